"""Who may call the API and how much they may send: bind check, bearer key, body size limit."""

from __future__ import annotations

import functools
import hmac
import ipaddress
import logging
from urllib.parse import urlsplit

from starlette.requests import HTTPConnection, Request

from .errors import ApiError
from .settings import ApiSettings

log = logging.getLogger(__name__)

_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}
_FORWARDING_HEADERS = ("forwarded", "x-forwarded-for", "x-real-ip")


class UnsafeBindError(RuntimeError):
    """The API would be reachable from other machines without an API key."""


def is_loopback(host: str | None) -> bool:
    """True for 127.0.0.0/8, ::1 and `localhost`; False for 0.0.0.0, ::, LAN addresses and other names."""
    if not host:
        return False
    host = host.strip().strip("[]").lower()
    if host in _LOOPBACK_NAMES:
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)  # ::ffff:127.0.0.1, an IPv4 client of a dual-stack socket
    return (mapped or ip).is_loopback


def _in_networks(host: str | None, networks: tuple[str, ...]) -> bool:
    try:
        ip = ipaddress.ip_address((host or "").strip().strip("[]"))
    except ValueError:
        return False
    ip = getattr(ip, "ipv4_mapped", None) or ip
    return any(ip in network for network in _networks(networks))


@functools.lru_cache(maxsize=16)
def _networks(networks: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """The trusted proxies as networks, parsed once (they are asked about for every request, line and queued
    event)."""
    return tuple(ipaddress.ip_network(n, strict=False) for n in networks)


def _forwarded_chain(request: HTTPConnection, header: str) -> list[str]:
    """The client addresses `header` names, nearest proxy's last (`Forwarded`: its `for=` values)."""
    values = ",".join(request.headers.getlist(header))
    if header == "forwarded":
        pairs = (kv.strip() for element in values.split(",") for kv in element.split(";"))
        return [_without_port(kv[4:]) for kv in pairs if kv.lower().startswith("for=")]
    return [a.strip() for a in values.split(",") if a.strip()]


def _without_port(node: str) -> str:
    """`"[2001:db8::1]:4711"` -> `2001:db8::1`, `192.0.2.4:80` -> `192.0.2.4` (RFC 7239 node syntax)."""
    node = node.strip().strip('"')
    if node.startswith("["):
        return node[1:node.find("]")] if "]" in node else node
    return node.rsplit(":", 1)[0] if node.count(":") == 1 else node


def client_host(request: HTTPConnection, trusted_proxies: tuple[str, ...] = (),
                forwarded_header: str = "x-forwarded-for") -> str | None:
    """The client's address for the loopback rule (and a WebSocket's, for the voice line's per-client cap). A
    request carrying Forwarded / X-Forwarded-For / X-Real-IP came through a proxy: unless its TCP peer is one of
    `trusted_proxies`, where it came from is unknown and None (remote) is returned; from a trusted proxy, the
    right-most address of `forwarded_header` (the one header that proxy sets) that is not a trusted proxy itself;
    the other headers, which the client may have written, are never read. Without those headers, the TCP peer."""
    peer = request.client.host if request.client else None
    if not any(h in request.headers for h in _FORWARDING_HEADERS):
        return peer
    if not _in_networks(peer, trusted_proxies):
        return None
    chain = _forwarded_chain(request, forwarded_header)
    untrusted = [a for a in chain if not _in_networks(a, trusted_proxies)]
    return untrusted[-1] if untrusted else (chain[0] if chain else None)


def judged_client(request: Request, settings: ApiSettings) -> str:
    """The client as the loopback rule sees it, for log lines ("unknown" when forwarded by an untrusted peer)."""
    return client_host(request, settings.trusted_proxies, settings.forwarded_header) or "unknown"


def counted_client(connection: HTTPConnection, settings: ApiSettings) -> str | None:
    """Whom a request or voice line counts against for a per-client limit (`max_per_client`, the voice lines'
    `max_lines_per_client`): the client `client_host` finds (behind a trusted proxy, the forwarded one), else the
    TCP peer (a forwarding header from a peer not trusted is not believed); None, not counted, on loopback: this
    machine's own clients."""
    host = (client_host(connection, settings.trusted_proxies, settings.forwarded_header)
            or (connection.client.host if connection.client else None))
    return None if is_loopback(host) else host


def _host_name(value: str) -> str:
    """`example.org:8080` -> `example.org`, `[::1]:7860` -> `::1`."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def check_host(request: Request, settings: ApiSettings) -> None:
    """For a server bound to loopback: `Host`, and `Origin` when a browser sends one, must name this machine or
    one of `allowed_hosts`. A web page elsewhere then cannot reach the API through DNS rebinding (its Host is
    the page's name) nor post to it blind (its Origin is the page's). A 403 otherwise."""
    allowed = {h.lower() for h in settings.allowed_hosts}

    def ok(name: str) -> bool:
        return is_loopback(name) or name in allowed

    host = _host_name(request.headers.get("host", ""))
    if not ok(host):
        raise ApiError(403, f"the Host header names {host!r}, not this server: a web page may be trying to reach "
                       "it through DNS rebinding. If clients reach this server under that name (a reverse proxy), "
                       "add it to --allowed-hosts / FASTVLM_ALLOWED_HOSTS", code="host_not_allowed")
    origin = request.headers.get("origin")
    if origin is not None and not ok(urlsplit(origin).hostname or origin.lower()):
        raise ApiError(403, f"requests from web pages at {origin!r} are refused: only pages of this server may "
                       "call it (add its name to --allowed-hosts / FASTVLM_ALLOWED_HOSTS if it is yours)",
                       code="origin_not_allowed")


def check_bind(host: str | None, settings: ApiSettings, share: bool = False) -> None:
    """Refuse to serve the API off-loopback (or through a public share link) without an API key.

    Call before starting the server. Raises `UnsafeBindError` saying how to fix it.
    """
    public = share or not is_loopback(host)
    if not public or settings.api_key:
        return
    where = "through a public share link" if share else f"on {host or 'all interfaces'!r}"
    if settings.allow_unauthenticated_remote:
        log.warning("serving the API %s WITHOUT an API key: anyone who can reach it can use it", where)
        return
    raise UnsafeBindError(
        f"refusing to serve the API {where} without an API key: set FASTVLM_API_KEY (clients then send "
        "'Authorization: Bearer <key>'), or bind to 127.0.0.1, or allow unauthenticated remote access "
        "explicitly if this network is trusted"
    )


def _bearer(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def authorize(request: Request, settings: ApiSettings) -> None:
    """Check `Authorization: Bearer <key>` (constant time) when a key is configured. Without one, only
    loopback clients are served unless `allow_unauthenticated_remote` (a second line behind `check_bind`)."""
    if settings.api_key is None:
        client = client_host(request, settings.trusted_proxies, settings.forwarded_header)
        if not settings.allow_unauthenticated_remote and not is_loopback(client):
            raise ApiError(403, "this server has no API key and serves local clients only (a request forwarded by "
                           "a proxy counts as remote unless the proxy is in FASTVLM_TRUSTED_PROXIES): start it with "
                           "FASTVLM_API_KEY set", code="remote_client_refused")
        return
    token = _bearer(request)
    challenge = {"WWW-Authenticate": "Bearer"}
    if token is None:
        raise ApiError(401, "missing API key: send 'Authorization: Bearer <key>'", code="missing_api_key",
                       headers=challenge)
    if not hmac.compare_digest(token.encode(), settings.api_key.encode()):
        raise ApiError(401, "incorrect API key", code="invalid_api_key", headers=challenge)


def api_key_dependency(settings: ApiSettings):
    """A FastAPI dependency that applies `authorize` (for routes outside this package's router)."""

    async def require_api_key(request: Request) -> None:
        authorize(request, settings)

    return require_api_key


async def read_body(request: Request, limit: int) -> None:
    """Read the body up to `limit` bytes (413 beyond) and keep it on the request for the endpoint."""
    if request.method in ("GET", "HEAD"):
        return
    too_big = ApiError(413, f"the request body is larger than {limit:,} bytes: send a smaller image",
                       code="request_too_large")
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise too_big
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_big
        chunks.append(chunk)
    request._body = b"".join(chunks)  # Starlette's own cache: body(), json() and form() read it from here
