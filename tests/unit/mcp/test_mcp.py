"""The MCP tools with scripted models: argument checks (pure), then the server over HTTP through the official
client: single flight, busy errors, the API's key, size limits and messages, DNS-rebinding protection."""

import asyncio
import base64
import dataclasses
import logging
import time
from contextlib import contextmanager

import httpx
import numpy as np
import pytest

from fastvlm import Busy
from fastvlm.api import ApiSettings
from fastvlm.api.server import BackgroundServer
from fastvlm.mcp import McpSettings, ToolError
from fastvlm.mcp.tools import Limits, parse_call, tool_specs
from fastvlm.remote import image_data_url
from tests.unit.api.test_api_flight import SeedLM
from tests.unit.api.test_api_server import make_engine

pytest.importorskip("mcp")
from starlette.applications import Starlette  # noqa: E402

from fastvlm.mcp.server import McpServer, error_text, tool_error  # noqa: E402 - needs mcp
from tests import mcp_client  # noqa: E402

IMAGE = image_data_url(np.full((32, 48, 3), 200, np.uint8))


# -- pure ------------------------------------------------------------------------------------------------
def test_two_tools_whose_descriptions_state_the_limits():
    specs = tool_specs(Limits(max_body_bytes=20_000_000, max_image_pixels=64_000_000, queue_wait_s=30, resolution=512))
    assert [s["name"] for s in specs] == ["ask_image", "describe_image"]
    image_help = specs[0]["inputSchema"]["properties"]["image"]["description"]
    assert "20 MB" in image_help and "64 megapixels" in image_help and "data:image/" in image_help
    assert "30 s" in specs[0]["description"] and "default 512" in str(specs[1]["inputSchema"])
    assert [s["inputSchema"]["required"] for s in specs] == [["image", "question"], ["image"]]  # what to send


def test_the_output_schema_lists_exactly_the_engines_stop_reasons():
    from typing import get_args

    from fastvlm.engine.events import StopReason
    from fastvlm.mcp.tools import OUTPUT_SCHEMA

    field = OUTPUT_SCHEMA["properties"]["stop_reason"]
    assert field["enum"] == list(get_args(StopReason))
    assert "end_of_text" in field["description"] and "stop_string" in field["description"]
    assert "stop," not in field["description"] and not field["description"].endswith(" stop")


def test_arguments_become_one_request_or_a_tool_error_saying_what_to_send():
    settings = McpSettings(max_new_tokens=7, describe_question="Describe it.")
    ask = parse_call("ask_image", {"image": IMAGE, "question": " What\x00 is it? ", "resolution": 512}, settings)
    assert (ask.question, ask.resolution, ask.options.max_new_tokens) == ("What is it?", 512, 7)
    assert parse_call("describe_image", {"image": IMAGE}, settings).question == "Describe it."
    for name, args, words in [("ask_image", {"image": IMAGE, "question": "  "}, "'question' is empty"),
                              ("ask_image", {"question": "q"}, "'image' is missing"),
                              ("describe_image", {"image": IMAGE, "resolution": 100}, "multiple of 64"),
                              ("describe_image", {"image": IMAGE, "resolution": "big"}, "must be an integer"),
                              ("describe_image", {"image": IMAGE, "resolution": True}, "must be an integer"),
                              ("answer", {"image": IMAGE}, "use ask_image or describe_image")]:
        with pytest.raises(ToolError, match=words):
            parse_call(name, args, settings)


def test_a_busy_engine_reads_as_busy_retry():
    busy = tool_error(Busy("the engine is answering"), 5)
    assert error_text(busy, 5) == "busy, retry in 5 s: the engine is answering"
    assert error_text(tool_error(ToolError("send an image"), 5), 5) == "send an image"


class FullGate:
    """A waiting room with no room left."""

    decoding = None

    def check_room(self, client=None):
        raise Busy("2 requests are already running or waiting")

    async def open(self, request, gone=None, client=None):
        raise Busy("2 requests are already running or waiting")


def test_a_full_waiting_room_refuses_a_call_before_its_image_is_decoded(monkeypatch):
    from fastvlm.api import images

    decoded = []
    monkeypatch.setattr(images.preprocess, "load_image", lambda *a, **k: decoded.append(1))
    server = McpServer(make_engine()[0], ApiSettings(), host="127.0.0.1", gate=FullGate())
    with pytest.raises(Busy):
        asyncio.run(server.answer("ask_image", {"image": IMAGE, "question": "q"}))
    assert decoded == []  # a decode can take GBs: a busy server does not begin one


def test_a_tool_call_never_fetches_a_remote_image_even_where_the_api_may(monkeypatch):
    from fastvlm.api import images
    from fastvlm.api.errors import ApiError

    fetched = []

    async def fetch(url, *args, **kwargs):
        fetched.append(url)
        return b""

    monkeypatch.setattr(images, "fetch", fetch)
    server = McpServer(make_engine()[0], ApiSettings(allow_remote_image_urls=True), host="127.0.0.1")
    with pytest.raises(ApiError, match="does not fetch remote image URLs"):
        asyncio.run(server.answer("ask_image", {"image": "http://192.0.2.1/cat.png", "question": "q"}))
    assert fetched == []


# -- over HTTP ---------------------------------------------------------------------------------------------
@contextmanager
def serve(engine, settings=None, host="127.0.0.1", **api):
    mcp = McpServer(engine, ApiSettings(**api), settings, host=host)
    with BackgroundServer(Starlette(routes=mcp.routes, lifespan=mcp.lifespan)) as server:
        yield server.url + "/mcp"


def ask_all(url, n, key=None, image=IMAGE):
    async def work(session):
        calls = (session.call_tool("ask_image", {"image": image, "question": f"q{i}"}) for i in range(n))
        return await asyncio.gather(*calls)

    return mcp_client.run(url, work, key)


def test_concurrent_calls_take_turns_and_each_gets_its_own_answer():
    engine, lm = make_engine(SeedLM(delay=0.01))
    with serve(engine) as url:
        results = ask_all(url, 3)
    texts = [mcp_client.text(r) for r in results]
    assert not any(r.isError for r in results) and len(set(texts)) == 3
    for text in texts:  # never mixed: one seed's answer, whole
        assert text == text[: len(text) // 6] * 6
    spans = sorted(lm.spans)
    assert len(spans) == 3 and all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # never two at once


def test_beyond_the_waiting_room_a_call_gets_busy_retry_and_the_engine_answers_after():
    engine, _ = make_engine(SeedLM(delay=0.02))
    with serve(engine, max_waiting=0, retry_after_s=3) as url:
        results = ask_all(url, 2)
        errors = [mcp_client.text(r) for r in results if r.isError]
        assert len(errors) == 1 and errors[0].startswith("busy, retry in 3 s")
        assert not ask_all(url, 1)[0].isError


def test_the_apis_key_rule_and_body_limit_apply():
    engine, _ = make_engine(script=b"Hi")
    with serve(engine, api_key="k", max_body_bytes=4000) as url:
        assert mcp_client.text(ask_all(url, 1, key="k")[0]) == "Hi"
        post = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        headers = {"Accept": "application/json, text/event-stream"}
        assert httpx.post(url, json=post, headers=headers).status_code == 401
        wrong = httpx.post(url, json=post, headers={**headers, "Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_api_key"
        big = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "describe_image", "arguments": {"image": "data:image/png;base64," + "A" * 8000}}}
        too_big = httpx.post(url, json=big, headers={**headers, "Authorization": "Bearer k"})
        assert too_big.status_code == 413 and "larger than 4,000 bytes" in too_big.json()["error"]["message"]


def test_a_prefix_or_extension_of_the_key_is_refused():
    engine, _ = make_engine(script=b"Hi")
    with serve(engine, api_key="s3cret") as url:
        post = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        headers = {"Accept": "application/json, text/event-stream"}
        for wrong in ("s3cre", "s", "s3cretX"):
            r = httpx.post(url, json=post, headers={**headers, "Authorization": f"Bearer {wrong}"})
            assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", wrong
        assert httpx.post(url, json=post, headers={**headers, "Authorization": "Bearer s3cret"}).status_code == 200


def test_the_engines_pixel_limit_and_message_apply():
    engine, _ = make_engine(script=b"Hi")
    engine.config = dataclasses.replace(engine.config, max_image_pixels=1000)
    with serve(engine) as url:
        result = ask_all(url, 1)[0]
    assert result.isError and "above the limit of 1,000" in mcp_client.text(result)


def test_a_bug_reads_as_an_internal_error_and_its_traceback_is_logged_once(caplog):
    engine, _ = make_engine(script=b"Hi")

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    engine.stream = broken
    with caplog.at_level(logging.ERROR), serve(engine) as url:
        result = ask_all(url, 1)[0]
    assert result.isError and "internal error (RuntimeError)" in mcp_client.text(result)
    tracebacks = [r for r in caplog.records if r.exc_info and "boom" in str(r.exc_info[1])]
    assert len(tracebacks) == 1, [r.getMessage() for r in tracebacks]


def test_on_loopback_other_host_names_are_refused():
    engine, _ = make_engine(script=b"Hi")
    with serve(engine) as url:
        post = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        headers = {"Accept": "application/json, text/event-stream", "Host": "evil.example"}
        assert httpx.post(url, json=post, headers=headers).status_code == 421
        assert httpx.post(url, json=post, headers={**headers, "Host": "localhost:1"}).status_code == 200


def test_allowed_host_names_ignore_case_as_the_apis_do():
    engine, _ = make_engine(script=b"Hi")
    with serve(engine, allowed_hosts=("VLM.Example.org",)) as url:
        post = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        accept = {"Accept": "application/json, text/event-stream"}
        for host, origin in [("vlm.example.org", "https://vlm.example.org"), ("VLM.EXAMPLE.ORG:8443", None),
                             ("LocalHost", "http://LOCALHOST:7860")]:
            headers = {**accept, "Host": host, **({"Origin": origin} if origin else {})}
            assert httpx.post(url, json=post, headers=headers).status_code == 200, (host, origin)
        assert httpx.post(url, json=post, headers={**accept, "Host": "EVIL.example"}).status_code == 421


def test_a_data_url_without_base64_is_refused_as_the_api_does():
    engine, _ = make_engine(script=b"Hi")
    plain = "data:image/png," + base64.b64encode(b"x").decode()
    with serve(engine) as url:
        result = ask_all(url, 1, image=plain)[0]
    assert result.isError and mcp_client.text(result).startswith("the image data URL is not base64-encoded")


def test_a_client_that_goes_away_mid_answer_frees_the_engine():
    engine, lm = make_engine(script=b"x" * 200, delay=0.04)  # an 8 s answer if nobody stops it
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "describe_image", "arguments": {"image": IMAGE}}}
    with serve(engine) as url:
        with pytest.raises(httpx.TimeoutException):  # the agent gives up and closes its connection
            httpx.post(url, json=call, timeout=0.5, headers={"Accept": "application/json, text/event-stream"})
        deadline = time.monotonic() + 3
        while engine.busy and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not engine.busy and lm.evaluated < 150  # stopped, not drained to the end
        assert mcp_client.text(ask_all(url, 1)[0]) == "x" * 200  # and the next call is answered whole


def test_the_api_and_the_tools_share_one_waiting_room():
    """app.py serves both with one `Gate`: `max_waiting` counts every request waiting, however it came."""
    from fastapi import FastAPI

    from fastvlm.api import Gate, build_router

    engine, _ = make_engine(SeedLM(delay=0.2))  # an answer of ~15 s
    settings = ApiSettings(max_waiting=0, retry_after_s=3)
    gate = Gate(engine, settings)
    mcp = McpServer(engine, settings, host="127.0.0.1", gate=gate)
    routes = build_router(engine, settings, "127.0.0.1", gate).routes + mcp.routes
    with BackgroundServer(FastAPI(routes=routes, lifespan=mcp.lifespan)) as server:
        body = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": IMAGE}},
                                                          {"type": "text", "text": "q"}]}], "stream": True}
        with httpx.stream("POST", server.url + "/v1/chat/completions", json=body, timeout=30) as running:
            lines = running.iter_lines()  # kept: the answer runs on while the tool is called
            assert running.status_code == 200 and next(lines).startswith("data: ")
            result = ask_all(server.url + "/mcp", 1)[0]
    assert result.isError and mcp_client.text(result).startswith("busy, retry in 3 s")  # was: it waited its turn


def test_one_clients_share_of_the_queue_counts_its_tool_calls_too():
    """Behind a trusted proxy, a client with its `max_per_client` places (here an API answer) gets busy for a tool
    call as well, with the reason, while the queue has room for others."""
    from fastapi import FastAPI

    from fastvlm.api import Gate, build_router

    engine, _ = make_engine(SeedLM(delay=0.2))  # an answer of ~15 s
    settings = ApiSettings(api_key="k", max_waiting=4, max_per_client=1, retry_after_s=3,
                           trusted_proxies=("127.0.0.1",))
    gate = Gate(engine, settings)
    mcp = McpServer(engine, settings, host="127.0.0.1", gate=gate)
    routes = build_router(engine, settings, "127.0.0.1", gate).routes + mcp.routes
    behind = {"X-Forwarded-For": "203.0.113.5"}  # a client elsewhere: the key is needed

    async def one_call(session):
        return await session.call_tool("ask_image", {"image": IMAGE, "question": "q"})

    with BackgroundServer(FastAPI(routes=routes, lifespan=mcp.lifespan)) as server:
        body = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": IMAGE}},
                                                          {"type": "text", "text": "q"}]}], "stream": True}
        with httpx.stream("POST", server.url + "/v1/chat/completions", json=body, timeout=30,
                          headers={**behind, "Authorization": "Bearer k"}) as running:
            lines = running.iter_lines()
            assert running.status_code == 200 and next(lines).startswith("data: ")
            result = mcp_client.run(server.url + "/mcp", one_call, key="k", headers=behind)
    assert result.isError and "others get a turn" in mcp_client.text(result), mcp_client.text(result)
