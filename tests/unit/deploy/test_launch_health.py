"""deploy/launch.py's readiness probe: anything that is not a replica's /health answer is "not ready yet"."""

from __future__ import annotations

import socket
import threading

from tests.deploy_stack import launch


def _serve_once(reply: bytes) -> int:
    """A loopback port that answers one connection with `reply` (after reading its request), then closes."""
    server = socket.create_server(("127.0.0.1", 0))

    def answer() -> None:
        with server, server.accept()[0] as conn:
            conn.recv(65536)
            conn.sendall(reply)

    threading.Thread(target=answer, daemon=True).start()
    return server.getsockname()[1]


def test_a_port_that_echoes_the_request_is_not_ready():
    """A connect to a port nothing listens on can meet itself (the client's own port is the one asked for) and
    read back its own request line: the probe says "not ready", it does not raise (it failed a test start-up)."""
    assert launch.health(_serve_once(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")) is None


def test_a_replica_answer_is_read():
    body = b'{"engine": {"state": "ready"}}'
    reply = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    assert launch.health(_serve_once(reply)) == {"engine": {"state": "ready"}}
