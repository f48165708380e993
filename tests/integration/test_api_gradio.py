"""The API beside a Gradio app in one process and port, mounted as docs/api.md shows."""

import io
import socket

import httpx
import numpy as np
import openai
import pytest
from PIL import Image

from fastvlm import GenerationOptions, Request
from fastvlm.api import ApiSettings, build_router, check_bind, mount_api
from fastvlm.api.server import BackgroundServer
from fastvlm.remote import image_data_url

gr = pytest.importorskip("gradio")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def png() -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(7).integers(0, 256, (48, 64, 3), dtype=np.uint8)).save(buf, "PNG")
    return buf.getvalue()


def test_api_routes_passed_to_gradio_launch(tiny_engine):
    settings = ApiSettings(api_key="k")
    check_bind("127.0.0.1", settings)
    with gr.Blocks() as demo:
        gr.Markdown("FastVLM")
    _, url, _ = demo.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True,
                            app_kwargs={"routes": build_router(tiny_engine, settings).routes})
    try:
        image = png()
        expected = tiny_engine.answer(Request(image, "Hi", options=GenerationOptions(max_new_tokens=16))).text
        content = [{"type": "image_url", "image_url": {"url": image_data_url(image)}}, {"type": "text", "text": "Hi"}]
        with openai.OpenAI(base_url=url + "v1", api_key="k", max_retries=0) as client:
            stream = client.chat.completions.create(model="fastvlm", max_tokens=16, stream=True,
                                                    messages=[{"role": "user", "content": content}])
            assert "".join(c.choices[0].delta.content or "" for c in stream) == expected
        assert httpx.post(url + "v1/chat/completions", json={}).status_code == 401
        assert httpx.get(url + "health").json()["state"] == "idle"
        assert httpx.get(url).status_code == 200  # the Gradio page is still served
    finally:
        demo.close()


def test_api_beside_gradio_mounted_on_our_own_fastapi_app(tiny_engine):
    from fastapi import FastAPI

    with gr.Blocks() as demo:
        gr.Markdown("FastVLM")
    app = mount_api(FastAPI(), tiny_engine, ApiSettings(), host="127.0.0.1")
    app = gr.mount_gradio_app(app, demo, path="/")
    with BackgroundServer(app) as server:
        image = image_data_url(png())
        body = {"max_tokens": 8, "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": image}}, {"type": "text", "text": "Hi"}]}]}
        r = httpx.post(server.url + "/v1/chat/completions", json=body)
        expected = tiny_engine.answer(Request(png(), "Hi", options=GenerationOptions(max_new_tokens=8))).text
        assert r.json()["choices"][0]["message"]["content"] == expected
        assert httpx.get(server.url + "/").status_code == 200
