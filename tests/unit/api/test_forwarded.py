"""Who a request comes from behind a proxy: the forwarding headers read as `client_host` reads them."""

import pytest
from starlette.requests import Request

from fastvlm.api.security import _in_networks, _without_port, client_host

PROXY = ("127.0.0.1",)


def request(headers: dict[str, str], peer: str = "127.0.0.1") -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "method": "GET", "path": "/", "headers": raw, "client": (peer, 50_000)})


@pytest.mark.parametrize("node, address", [
    ("[2001:db8::1]:4711", "2001:db8::1"), ('"[2001:db8::1]"', "2001:db8::1"), ("2001:db8::1", "2001:db8::1"),
    ("192.0.2.4:80", "192.0.2.4"), ("192.0.2.4", "192.0.2.4"), ("[2001:db8::1", "[2001:db8::1"),
])  # fmt: skip
def test_a_forwarded_node_loses_its_port_and_never_an_ipv6_address_its_last_group(node, address):
    assert _without_port(node) == address


@pytest.mark.parametrize("header, value, client", [
    ("forwarded", "for=192.0.2.60;proto=http;by=203.0.113.43", "192.0.2.60"),
    ("forwarded", 'for="[2001:db8:cafe::17]:4711"', "2001:db8:cafe::17"),
    # "unknown" (RFC 7239's hidden client) is not a trusted proxy: the client-written loopback left of it is not it
    ("forwarded", "for=127.0.0.1, for=unknown", "unknown"),
    ("x-forwarded-for", "127.0.0.1, nginx", "nginx"),
    ("x-forwarded-for", "203.0.113.9, 127.0.0.1", "203.0.113.9"),
])  # fmt: skip
def test_the_nearest_address_that_is_not_a_trusted_proxy_is_the_client(header, value, client):
    assert client_host(request({header: value}), PROXY, header) == client


def test_a_trusted_network_may_be_written_with_host_bits():
    assert _in_networks("10.9.9.9", ("10.0.0.1/8",)) and not _in_networks("11.0.0.1", ("10.0.0.1/8",))
    assert not _in_networks("nginx", ("10.0.0.1/8",)) and not _in_networks(None, ("0.0.0.0/0",))
