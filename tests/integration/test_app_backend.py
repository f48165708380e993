"""Two app instances: B's UI drives A's engine through A's OpenAI-compatible API (`app.py --backend URL`)."""

import httpx
import pytest
from PIL import Image

import app
from fastvlm import GenerationOptions, Request
from tests.unit.ui.test_ui_app import free_port, users
from ui import create_app, launch

pytest.importorskip("gradio_client")


@pytest.fixture(scope="module")
def server_a(tiny_engine):
    args = app.build_parser().parse_args(["--api-key", "secret-a"])
    demo = create_app(tiny_engine)
    _, url, _ = launch(demo, "127.0.0.1", free_port(), block=False, routes=app.api_routes(tiny_engine, args))
    yield url.rstrip("/")
    demo.close()


def test_the_api_is_served_beside_the_ui_and_needs_its_key(server_a):
    assert httpx.get(f"{server_a}/health").status_code == 200
    assert httpx.get(f"{server_a}/v1/models").status_code == 401
    ok = httpx.get(f"{server_a}/v1/models", headers={"Authorization": "Bearer secret-a"})
    assert ok.status_code == 200 and ok.json()["data"]


def test_a_second_instance_answers_through_the_first(server_a, tiny_engine, tmp_path):
    from gradio_client import Client, handle_file

    photo = tmp_path / "p.png"
    Image.new("RGB", (96, 64), (200, 40, 90)).save(photo)
    args = app.build_parser().parse_args(["--backend", server_a, "--backend-key", "secret-a", "--no-api"])
    remote = app.load_engine(args)
    demo_b = create_app(remote)
    _, url_b, _ = launch(demo_b, "127.0.0.1", free_port(), block=False)
    try:
        chat, metrics, _ = Client(url_b, verbose=False).predict(handle_file(str(photo)), "what?", 128, 16,
                                                               api_name="/ask_image")
    finally:
        demo_b.close()
        remote.close()
    assert users(chat) == ["what?"] and "TTFT" in metrics
    local = tiny_engine.answer(Request(Image.open(photo), "what?", options=GenerationOptions(max_new_tokens=16),
                                       resolution=128))
    answers = [m["content"][0]["text"] for m in chat if m["role"] == "assistant"]
    assert answers == [local.text]


def test_off_loopback_the_api_needs_a_key_or_stays_off(tiny_engine, caplog):
    parse = app.build_parser().parse_args
    assert app.api_routes(tiny_engine, parse(["--host", "0.0.0.0"])) == []
    assert "API key" in caplog.text
    assert app.api_routes(tiny_engine, parse(["--host", "0.0.0.0", "--api-key", "k"]))
    assert app.api_routes(tiny_engine, parse(["--host", "0.0.0.0", "--allow-unauthenticated-remote"]))


def test_trusted_proxies_come_from_the_flag_or_the_environment(monkeypatch):
    args = app.build_parser().parse_args(["--trusted-proxies", "127.0.0.1, 10.0.0.0/8"])
    assert app._api_settings(args).trusted_proxies == ("127.0.0.1", "10.0.0.0/8")
    monkeypatch.setenv("FASTVLM_TRUSTED_PROXIES", "::1")
    assert app._api_settings(app.build_parser().parse_args([])).trusted_proxies == ("::1",)
    monkeypatch.delenv("FASTVLM_TRUSTED_PROXIES")
    assert app._api_settings(app.build_parser().parse_args([])).trusted_proxies == ()
