"""BackgroundServer.start: a server that dies while starting, or never starts, is an error at once or at the
deadline, not a hang and not a server taken for started."""

from __future__ import annotations

import threading
import time

import pytest
import uvicorn

from fastvlm.api.server import BackgroundServer


async def app(scope, receive, send):  # never served: the tests stop uvicorn before it runs
    raise AssertionError("not reached")


def test_a_server_that_dies_while_starting_is_an_error_at_once(monkeypatch):
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: None)  # ends without having started
    server = BackgroundServer(app, start_timeout_s=30)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="did not start"):
        server.start()
    assert time.monotonic() - started < 5
    server._socket.close()


def test_a_server_that_never_starts_is_an_error_at_its_deadline(monkeypatch):
    release = threading.Event()
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: release.wait(10))  # alive, never started
    server = BackgroundServer(app, start_timeout_s=0.3)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=f"{server.url} did not start"):
        server.start()
    assert 0.3 <= time.monotonic() - started < 5
    release.set()
    server._socket.close()
