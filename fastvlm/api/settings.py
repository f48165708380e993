"""How the HTTP API behaves. Only `app.py` and the CLI map flags and environment onto `ApiSettings`."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

FORWARDED_HEADERS = ("x-forwarded-for", "x-real-ip", "forwarded")  # what `forwarded_header` may name


@dataclass(frozen=True)
class ApiSettings:
    """Settings of the OpenAI-compatible API (`/v1/...`, `/predict`, `/health`)."""

    api_key: str | None = None  # required as `Authorization: Bearer <key>` when set (FASTVLM_API_KEY)
    allow_unauthenticated_remote: bool = False  # serve off-loopback without a key (trusted networks only)
    # reverse proxies (IPs or CIDRs) whose `forwarded_header` is believed; a request carrying any forwarding header
    # (Forwarded, X-Forwarded-For, X-Real-IP) from another peer counts as remote (FASTVLM_TRUSTED_PROXIES)
    trusted_proxies: tuple[str, ...] = ()
    # the ONE header those proxies set with the client's address: x-forwarded-for, x-real-ip or forwarded; its
    # right-most entry that is not a trusted proxy is the client; the other two are never read
    # (FASTVLM_FORWARDED_HEADER)
    forwarded_header: str = "x-forwarded-for"
    # host names, besides this machine's loopback names, that clients may use in Host/Origin when the server is
    # bound to loopback (a reverse proxy's public name); others get a 403, so no web page reaches the API through
    # DNS rebinding (FASTVLM_ALLOWED_HOSTS)
    allowed_hosts: tuple[str, ...] = ()
    queue_wait_s: float = 30.0  # how long a request waits for the busy engine before a 503
    max_waiting: int = 4  # requests allowed to wait behind the running one; more get a 503 at once
    # requests one client (its address, as judged above) may have running or waiting at once, the API's and the
    # MCP tools' together; more get a 503, so one client's batch cannot keep everyone else out. This machine's
    # own clients (loopback) are not counted. 0: no such limit
    max_per_client: int = 3
    # images decoded at once (the rest wait their turn): a small compressed file can take ~1.6 GB while it is
    # decoded (a 64-megapixel 16-bit PNG, the largest `max_image_pixels` lets through)
    max_decoding: int = 2
    retry_after_s: int = 5  # the `Retry-After` header of a 503
    max_body_bytes: int = 20 * 1024 * 1024  # larger request bodies get a 413
    model_id: str = "fastvlm"  # the id `/v1/models` lists and `model` must name (absent `model` is accepted)
    allow_remote_image_urls: bool = False  # fetch http(s) image URLs server-side (an SSRF risk: trusted users only)
    remote_image_timeout_s: float = 10.0  # connect + read limit of one remote image fetch

    def __post_init__(self) -> None:
        if self.api_key is not None and not self.api_key.strip():
            raise ValueError("api_key is empty: set a real key or leave it unset (None)")
        for proxy in self.trusted_proxies:
            try:
                ipaddress.ip_network(proxy, strict=False)
            except ValueError:
                raise ValueError(f"trusted proxy {proxy!r} is not an IP address or network (e.g. 127.0.0.1, "
                                 "10.0.0.0/8): fix FASTVLM_TRUSTED_PROXIES / --trusted-proxies") from None
        if self.forwarded_header not in FORWARDED_HEADERS:
            raise ValueError(f"forwarded header {self.forwarded_header!r} is not one of "
                             f"{', '.join(FORWARDED_HEADERS)}: "
                             "name the header your proxy sets (--forwarded-header / FASTVLM_FORWARDED_HEADER)")
        if min(self.queue_wait_s, self.max_waiting, self.max_per_client) < 0 or min(self.max_body_bytes,
                                                                                    self.max_decoding) < 1:
            raise ValueError("queue_wait_s, max_waiting and max_per_client must be >= 0, max_body_bytes and "
                             "max_decoding >= 1")
