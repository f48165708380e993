"""The security review of issue #19, one finding at a time (each test failed on the code the review read):
1 forwarded headers, 2 the page's Gradio endpoints, 3 Host/Origin, 5 message joining, 6 /health paths, error
mapping, backend key, documented flags, 7 a log line per refusal. (4, pinned weights:
tests/unit/weights/test_pins.py.)"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import httpx
import pytest

import app
import ui
from fastvlm.api.schema import MAX_MESSAGES
from fastvlm.engine.events import ModelFileError
from fastvlm.weights.loading import BackgroundLoad
from tests.unit.api.test_api_server import IMAGE, error_of, make_engine, msgs, post, serve
from tests.unit.ui.test_ui_app import free_port

ROOT = Path(__file__).resolve().parents[3]
KEY = "s3cret-key"


# -- 1: the client is judged by the one header the trusted proxy sets ------------------------------------------
@pytest.mark.parametrize("header, headers, allowed", [
    # nginx sets X-Real-IP only; the client wrote X-Forwarded-For / Forwarded itself, nginx passed them on
    ("x-real-ip", {"X-Real-IP": "203.0.113.9", "X-Forwarded-For": "127.0.0.1"}, False),
    ("x-real-ip", {"X-Real-IP": "203.0.113.9", "Forwarded": "for=127.0.0.1"}, False),
    ("x-real-ip", {"X-Real-IP": "127.0.0.1", "X-Forwarded-For": "203.0.113.9"}, True),  # a local client
    ("x-real-ip", {"X-Forwarded-For": "127.0.0.1"}, False),  # the proxy's header is missing: origin unknown
    ("forwarded", {"Forwarded": "for=203.0.113.9", "X-Real-IP": "127.0.0.1"}, False),
    # X-Forwarded-For appended by the proxy: its right-most entry is what the proxy saw
    ("x-forwarded-for", {"X-Forwarded-For": "127.0.0.1, 203.0.113.9", "X-Real-IP": "127.0.0.1"}, False),
])
def test_a_forwarded_request_is_judged_only_by_the_trusted_proxys_header(header, headers, allowed):
    engine, _ = make_engine()
    with serve(engine, trusted_proxies=("127.0.0.1",), forwarded_header=header) as server:
        r = httpx.get(server.url + "/v1/models", headers=headers)
        assert r.status_code == (200 if allowed else 403), r.text


def test_the_forwarded_header_is_one_of_three():
    from fastvlm.api import ApiSettings

    with pytest.raises(ValueError, match="'x-client-ip' is not one of x-forwarded-for, x-real-ip, forwarded"):
        ApiSettings(forwarded_header="x-client-ip")
    args = app.build_parser().parse_args(["--forwarded-header", "x-real-ip", "--trusted-proxies", "127.0.0.1"])
    assert app._api_settings(args).forwarded_header == "x-real-ip"


def test_every_endpoint_but_health_needs_the_key():
    from fastvlm.api import ApiSettings
    from fastvlm.api.server import BackgroundServer, create_app

    engine, _ = make_engine()
    api = create_app(engine, ApiSettings(api_key=KEY), host="127.0.0.1")
    # every endpoint the app documents (the routes FastAPI knows), so a new one is checked too
    routes = [(method.upper(), re.sub(r"\{[^}]*\}", "fastvlm", path)) for path, item in api.openapi()["paths"].items()
              if path != "/health" for method in item]
    assert {path for _, path in routes} >= {"/v1/chat/completions", "/v1/prepare", "/predict", "/v1/models"}
    with BackgroundServer(api) as server:
        for method, path in routes:
            r = httpx.request(method, server.url + path, json={"image_url": {"url": "data:,"}})
            assert r.status_code == 401 and error_of(r)["code"] == "missing_api_key", (method, path, r.text)
        assert httpx.get(server.url + "/health").status_code == 200


# -- 2: the page and its Gradio endpoints behind a login when asked ----------------------------------------------
def test_with_page_protection_gradio_client_cannot_call_ask_image(tmp_path):
    gradio_client = pytest.importorskip("gradio_client")
    engine, _ = make_engine(script=b"Hello!")
    demo = ui.create_app(engine)
    _, url, _ = ui.launch(demo, "127.0.0.1", free_port(), block=False, page_key=KEY)
    try:
        with pytest.raises(Exception, match="401|[Ll]ogin|[Uu]nauthori"):
            gradio_client.Client(url, verbose=False).predict(None, "hi", api_name="/ask_image")
        assert httpx.get(url + "config").status_code == 401
        client = gradio_client.Client(url, auth=("anyone", KEY), verbose=False)  # the key is the password
        assert "/ask_image" in client.view_api(print_info=False, return_format="dict")["named_endpoints"]
        with pytest.raises(ValueError, match="Could not login"):  # a refused login, not a dead server
            gradio_client.Client(url, auth=("anyone", "wrong"), verbose=False)
    finally:
        demo.close()


def test_page_protection_needs_a_key(capsys):
    assert app.main(["--protect-page", "--models", "nowhere"]) == 2
    assert "--protect-page needs FASTVLM_API_KEY" in capsys.readouterr().err


# -- 3: Host and Origin on a loopback bind --------------------------------------------------------------------
def test_on_loopback_other_hosts_and_origins_are_refused():
    engine, _ = make_engine(script=b"Hello!")
    with serve(engine, allowed_hosts=("vlm.example.org",)) as server:
        r = httpx.get(server.url + "/v1/models", headers={"Host": "evil.example"})  # DNS rebinding
        assert r.status_code == 403 and error_of(r)["code"] == "host_not_allowed", r.text
        files = {"image": ("a.png", b"x", "image/png")}  # a blind multipart POST from another site's page
        r = httpx.post(server.url + "/predict", files=files, headers={"Origin": "http://evil.example"})
        assert r.status_code == 403 and error_of(r)["code"] == "origin_not_allowed"
        assert httpx.post(server.url + "/predict", files=files, headers={"Origin": "null"}).status_code == 403
        assert httpx.get(server.url + "/health", headers={"Host": "evil.example"}).status_code == 200
        # this machine's names, and the proxy's public name given by the operator, pass
        for host in (f"127.0.0.1:{server.port}", "localhost", "[::1]:80", "vlm.example.org:8080"):
            assert httpx.get(server.url + "/v1/models", headers={"Host": host}).status_code == 200, host
        r = post(server, {"messages": msgs(IMAGE)}, headers={"Origin": "https://vlm.example.org"})
        assert r.status_code == 200


def test_through_a_share_link_the_links_name_is_accepted_and_the_key_protects():
    from fastapi import FastAPI

    from fastvlm.api import ApiSettings, mount_api
    from fastvlm.api.server import BackgroundServer

    engine, _ = make_engine()
    api = mount_api(FastAPI(), engine, ApiSettings(api_key=KEY), host="127.0.0.1", share=True)
    with BackgroundServer(api) as server:
        link = {"Host": "abc123.gradio.live", "Authorization": f"Bearer {KEY}"}
        assert httpx.get(server.url + "/v1/models", headers=link).status_code == 200
        assert httpx.get(server.url + "/v1/models", headers={"Host": "abc123.gradio.live"}).status_code == 401


# -- 5: messages joined linearly, and a cap on them ----------------------------------------------------------------
def test_a_flood_of_short_messages_is_refused_at_once_and_same_role_runs_cannot_escape_the_turn_cap():
    engine, lm = make_engine(script=b"Hello!")
    flood = msgs(IMAGE) + [{"role": "user", "content": "ab"} for _ in range(200_000)]
    with serve(engine) as server:
        r = post(server, {"messages": flood}, timeout=60)
        assert r.status_code == 400 and error_of(r)["code"] == "too_many_messages", r.text[:300]
        assert error_of(r)["message"].startswith("200001 messages are more than the")
        # refused as pydantic meets message 2001 (validating all 200,000 first held the event loop ~0.7 s)
        schema = httpx.get(server.url + "/openapi.json").json()["components"]["schemas"]["ChatCompletionRequest"]
        assert schema["properties"]["messages"]["maxItems"] == MAX_MESSAGES
        most = msgs(IMAGE) + [{"role": "user", "content": "ab"} for _ in range(MAX_MESSAGES - 1)]
        r = post(server, {"messages": most}, timeout=60)
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "Hello!"


# -- 6: /health without paths, errors by type, no key to a backend, documented flags exist ---------------------------
def test_health_shows_no_paths_while_loading_or_failed():
    def fail():
        raise ModelFileError("/root/.cache/huggingface/hub/models--x/llm.gguf is not a GGUF file (bad magic)")

    planned = {"vision": "/srv/secret/models/vision.onnx", "llm": "/srv/secret/models/llm.gguf", "resolution": 1024}
    engine = BackgroundLoad(fail, planned).start()
    with pytest.raises(ModelFileError):
        engine.ready(5)
    with serve(engine) as server:
        body = httpx.get(server.url + "/health").text
    assert "llm.gguf is not a GGUF file" in body and "vision.onnx" in body
    assert "/root" not in body and "/srv" not in body and "secret" not in body


def test_an_unexpected_value_error_is_a_500_without_its_message():
    engine, lm = make_engine()

    def broken(*a, **kw):
        raise ValueError("internal detail at /srv/secret")

    lm.generate = broken
    with serve(engine) as server:
        r = post(server, {"messages": msgs(IMAGE)})
    assert r.status_code == 500 and error_of(r)["code"] == "internal_error"
    assert "secret" not in r.text


def test_the_servers_own_key_is_never_sent_to_a_backend(monkeypatch):
    from fastvlm import remote

    sent = []
    monkeypatch.setattr(remote.RemoteEngine, "connect", classmethod(lambda cls, url, key=None: sent.append(key)))
    app.load_engine(app.build_parser().parse_args(["--backend", "http://gpu:7860", "--api-key", KEY]))
    app.load_engine(app.build_parser().parse_args(["--backend", "http://gpu:7860", "--api-key", KEY,
                                                   "--backend-key", "theirs"]))
    assert sent == [None, "theirs"]


def test_every_flag_the_api_docs_name_exists():
    flags = {o for a in app.build_parser()._actions for o in a.option_strings}
    named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]+", (ROOT / "docs" / "api.md").read_text()))
    assert named and named <= flags, f"docs/api.md names flags app.py does not have: {sorted(named - flags)}"


# -- 7: one log line per refused or failed request -------------------------------------------------------------
def test_each_refused_request_leaves_one_line_naming_client_method_path_status_reason(caplog):
    engine, _ = make_engine()
    caplog.set_level(logging.INFO)
    with serve(engine, api_key=KEY, max_body_bytes=200) as server:
        httpx.get(server.url + "/v1/models", headers={"Authorization": "Bearer wrong-" + KEY})
        post(server, {"messages": msgs(IMAGE)}, headers={"Authorization": f"Bearer {KEY}"})  # 413
        post(server, {"model": "gpt-4o", "messages": msgs(text="x")}, headers={"Authorization": f"Bearer {KEY}"})  # 404
        httpx.get(server.url + "/v1/models", headers={"Authorization": f"Bearer {KEY}"})  # served: no line
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("fastvlm.api") and "refused" in r.getMessage()]
    assert len(lines) == 3, lines
    assert re.search(r"client=127\.0\.0\.1 GET /v1/models status=401 reason=invalid_api_key", lines[0])
    assert "POST /v1/chat/completions status=413 reason=request_too_large" in lines[1]
    assert "status=404 reason=model_not_found" in lines[2]
    assert not any(KEY in r.getMessage() for r in caplog.records)
