"""One client cannot take every place in the engine's queue (`ApiSettings.max_per_client`): its next request gets
a 503 while others still get in; this machine's own clients are not counted, and a place given back is free again.
Through the API, the client is the address `judged_client` finds (behind a trusted proxy, the forwarded one)."""

from __future__ import annotations

import threading
import time

import anyio
import numpy as np
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from fastvlm import Request
from fastvlm.api import ApiSettings, build_router
from fastvlm.api.errors import ApiError
from fastvlm.api.streaming import Gate
from fastvlm.engine.events import TextDelta
from fastvlm.remote import image_data_url

A, B, HERE, PROXY = "203.0.113.5", "198.51.100.7", "127.0.0.1", "10.9.8.7"


class FirstWordEngine:
    """Answers each request with one word at once; the request keeps its place until its events are closed."""

    def stream(self, request, wait=None, cancel=None):
        yield TextDelta("word")


def _request() -> Request:
    return Request(np.zeros((8, 8, 3), np.uint8), "q")


def test_a_client_with_its_share_waits_while_others_get_in():
    async def main():
        gate = Gate(FirstWordEngine(), ApiSettings(max_waiting=9, max_per_client=3))
        held = [await gate.open(_request(), client=A) for _ in range(3)]
        with pytest.raises(ApiError) as refused:
            await gate.open(_request(), client=A)
        other = await gate.open(_request(), client=B)
        local = [await gate.open(_request(), client=HERE) for _ in range(4)]
        await held.pop().aclose()
        again = await gate.open(_request(), client=A)  # a place given back is A's to use
        with pytest.raises(ApiError):
            await gate.open(_request(), client=A)  # that one place only
        for events in [*held, other, *local, again]:
            await events.aclose()
        return refused.value, gate._admitted, dict(gate._by_client)

    refused, admitted, shares = anyio.run(main)
    assert refused.status == 503 and refused.code == "engine_busy" and "others get a turn" in refused.message
    assert admitted == 0 and shares == {}  # nothing kept of a client whose requests have all ended


def test_no_share_limit_with_zero():
    async def main():
        gate = Gate(FirstWordEngine(), ApiSettings(max_waiting=9, max_per_client=0))
        held = [await gate.open(_request(), client=A) for _ in range(6)]
        for events in held:
            await events.aclose()

    anyio.run(main)


class HoldFirstEngine(FirstWordEngine):
    """The first request's answer goes on until `done` is set; the others end after their word."""

    def __init__(self):
        self.done, self.calls = threading.Event(), 0

    def stream(self, request, wait=None, cancel=None):
        self.calls += 1
        first = self.calls == 1
        yield TextDelta("word")
        if first:
            self.done.wait(10)


def test_the_api_counts_the_forwarded_client():
    """Behind a trusted proxy every request comes from the proxy: the share is the forwarded client's."""
    settings = ApiSettings(max_waiting=9, max_per_client=1, trusted_proxies=(PROXY,), allow_unauthenticated_remote=True)
    engine = HoldFirstEngine()
    gate = Gate(engine, settings)
    app = FastAPI()
    app.include_router(build_router(engine, settings, gate=gate))
    image = {"type": "image_url", "image_url": {"url": image_data_url(np.zeros((8, 8, 3), np.uint8))}}
    body = {"messages": [{"role": "user", "content": [image, {"type": "text", "text": "hi"}]}], "max_tokens": 4}

    def ask(who: str):
        return client.post("/v1/chat/completions", json=body | {"stream": True}, headers={"X-Forwarded-For": who})

    with TestClient(app, client=(PROXY, 50000)) as client:
        first = threading.Thread(target=ask, args=(A,))
        first.start()  # A's one place, held until `done`
        deadline = time.monotonic() + 10
        while gate._admitted < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        refused, served = ask(A), ask(B)
        engine.done.set()
        first.join(10)
    assert refused.status_code == 503 and "others get a turn" in refused.json()["error"]["message"], refused.text
    assert served.status_code == 200 and "word" in served.text, served.text


def _connection(peer: str, forwarded: str | None = None):
    from starlette.requests import Request as HttpRequest

    headers = [(b"x-forwarded-for", forwarded.encode())] if forwarded else []
    return HttpRequest({"type": "http", "method": "GET", "path": "/", "headers": headers, "client": (peer, 5000)})


@pytest.mark.parametrize(("peer", "forwarded", "trusted", "counted"), [
    (PROXY, A, (PROXY,), A),  # a trusted proxy's client
    (PROXY, A, (), PROXY),  # a forwarding header from a peer not trusted: the peer counts, not "unknown" for all
    (A, None, (), A),
    (HERE, None, (), None),  # this machine: not counted
    (HERE, HERE, (HERE,), None),  # a proxy here forwarding a client here
])
def test_whom_a_request_counts_against(peer, forwarded, trusted, counted):
    from fastvlm.api.security import counted_client

    assert counted_client(_connection(peer, forwarded), ApiSettings(trusted_proxies=trusted)) == counted
