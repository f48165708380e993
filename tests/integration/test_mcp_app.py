"""The app as an MCP server (issue #14): app.py's UI + API + MCP on the tiny models, driven by the official
`mcp` Python client over streamable HTTP, as an agent would."""

import asyncio
import base64
import io

import httpx
import numpy as np
import openai
import pytest
from fastapi.routing import APIRoute
from PIL import Image

import app
from fastvlm import Request
from fastvlm.remote import image_data_url
from tests.unit.ui.test_ui_app import free_port

pytest.importorskip("mcp")
from tests import mcp_client  # noqa: E402 - needs mcp
from ui import create_app, launch

KEY = "secret-mcp"
QUESTION = "What is in the image?"


def png(seed: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 256, (48, 64, 3), dtype=np.uint8)).save(buf, "PNG")
    return buf.getvalue()


@pytest.fixture(scope="module")
def served(tiny_engine):
    """The app as `python app.py --api-key KEY` serves it (MCP is on by default): the base URL."""
    args = app.build_parser().parse_args(["--host", "127.0.0.1", "--api-key", KEY])
    routes, mcp = app.served_routes(tiny_engine, args)
    assert mcp is not None
    api = [route for route in routes if isinstance(route, APIRoute)]
    assert api and {route.endpoint.__self__.gate for route in api} == {mcp._gate}  # one queue: `max_waiting`
    # counts the API's requests and the tools' calls together
    demo = create_app(tiny_engine)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GRADIO_MCP_SERVER", "True")  # asks for Gradio's own MCP server, which must stay off
        _, url, _ = launch(demo, "127.0.0.1", free_port(), block=False, routes=routes, lifespan=mcp.lifespan)
    yield url.rstrip("/")
    demo.close()


def call(served, *calls):
    """Run tool calls `(name, arguments)` concurrently on one session; their results in order."""

    async def work(session):
        return await asyncio.gather(*(session.call_tool(name, args) for name, args in calls))

    return mcp_client.run(served + "/mcp", work, KEY)


def chat_completion(served, image: bytes, question: str) -> str:
    content = [{"type": "image_url", "image_url": {"url": image_data_url(image)}}, {"type": "text", "text": question}]
    with openai.OpenAI(base_url=served + "/v1", api_key=KEY, max_retries=0) as client:
        r = client.chat.completions.create(model="fastvlm", temperature=0, max_tokens=256,  # McpSettings' default
                                           messages=[{"role": "user", "content": content}])
    return r.choices[0].message.content


def test_exactly_the_two_tools_with_descriptions_for_a_model(served):
    tools = mcp_client.run(served + "/mcp", lambda s: s.list_tools(), KEY).tools
    assert sorted(t.name for t in tools) == ["ask_image", "describe_image"]
    for tool in tools:
        assert "data URL" in tool.inputSchema["properties"]["image"]["description"]
        assert "one image" in tool.description.lower() or "one request at a time" in tool.description
        assert tool.inputSchema["required"][0] == "image" and tool.outputSchema["required"] == ["answer", "ttft_s"]
    ask = next(t for t in tools if t.name == "ask_image")
    assert set(ask.inputSchema["properties"]) == {"image", "question", "resolution"}


def test_ask_image_answers_as_chat_completions_does_at_temperature_0(served):
    image = png(1)
    (result,) = call(served, ("ask_image", {"image": image_data_url(image), "question": QUESTION}))
    assert not result.isError, mcp_client.text(result)
    answer = mcp_client.text(result)
    assert answer and answer == chat_completion(served, image, QUESTION)
    assert result.structuredContent["answer"] == answer and result.structuredContent["ttft_s"] > 0


def test_describe_image_answers(served, tiny_engine):
    image = png(2)
    (result,) = call(served, ("describe_image", {"image": image_data_url(image)}))
    expected = tiny_engine.answer(Request(image, "Describe the image in detail.")).text
    assert not result.isError and mcp_client.text(result) == expected


def test_bad_images_and_remote_urls_are_tool_errors_with_the_apis_messages(served):
    not_an_image = "data:image/png;base64," + base64.b64encode(b"hello, not a png").decode()
    bad, remote, path = call(served, ("ask_image", {"image": not_an_image, "question": "q"}),
                             ("ask_image", {"image": served + "/health", "question": "q"}),
                             ("describe_image", {"image": "/etc/passwd"}))
    assert bad.isError and remote.isError and path.isError
    for result, url in ((bad, not_an_image), (remote, served + "/health")):
        body = {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}]}
        api = httpx.post(served + "/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"})
        assert mcp_client.text(result) == api.json()["error"]["message"]
    assert "does not fetch remote image URLs" in mcp_client.text(remote)
    assert "data:image/jpeg;base64" in mcp_client.text(path)


def test_two_concurrent_calls_are_answered_in_turn_never_mixed_and_the_app_answers_after(served, tiny_engine):
    images = [png(3), png(4)]
    questions = ["What colour dominates?", "Is there text?"]
    results = call(served, *(("ask_image", {"image": image_data_url(i), "question": q})
                             for i, q in zip(images, questions)))
    for image, question, result in zip(images, questions, results):
        if result.isError:  # allowed: a clear busy error instead of a wait
            assert mcp_client.text(result).startswith("busy, retry")
        else:
            assert mcp_client.text(result) == tiny_engine.answer(Request(image, question)).text
    assert not all(r.isError for r in results)
    (after,) = call(served, ("ask_image", {"image": image_data_url(images[0]), "question": QUESTION}))
    assert not after.isError and mcp_client.text(after) == chat_completion(served, images[0], QUESTION)
    assert httpx.get(served + "/health").json()["state"] == "idle"


def test_the_key_is_required_and_the_ui_is_still_served(served):
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream"}
    refused = httpx.post(served + "/mcp", json=hello, headers=headers)
    assert refused.status_code == 401 and "missing API key" in refused.text
    assert httpx.get(served + "/").status_code == 200
    assert httpx.get(served + "/gradio_api/mcp/").status_code == 404  # no UI callback is a tool


def test_mcp_is_on_by_default_off_by_flag_or_environment_and_needs_a_key_off_loopback(tiny_engine, monkeypatch):
    monkeypatch.delenv("FASTVLM_MCP", raising=False)
    monkeypatch.delenv("FASTVLM_API_KEY", raising=False)
    parse = app.build_parser().parse_args
    assert parse([]).mcp and not parse(["--no-mcp"]).mcp
    assert app.mcp_server(tiny_engine, parse(["--host", "127.0.0.1"])) is not None
    assert app.mcp_server(tiny_engine, parse(["--host", "0.0.0.0"])) is None
    assert app.mcp_server(tiny_engine, parse(["--host", "0.0.0.0", "--api-key", "k"])) is not None
    monkeypatch.setenv("FASTVLM_MCP", "0")
    assert not app.build_parser().parse_args([]).mcp and app.build_parser().parse_args(["--mcp"]).mcp
