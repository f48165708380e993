"""The API over HTTP on a real uvicorn server with scripted models: answers, formats, errors, keys, limits.
(Helpers here are shared by test_api_flight.py and test_api_remote.py.)"""

import base64
import io
import json
from contextlib import contextmanager

import httpx
import numpy as np
import openai
import pytest

from fastvlm import EngineConfig, Request
from fastvlm.api import ApiSettings
from fastvlm.api.server import BackgroundServer, create_app
from fastvlm.engine.engine import Engine
from fastvlm.remote import RemoteEngine, RemoteError, image_data_url
from tests.fakes import FakeLM, FakeVision

IMG = np.full((32, 48, 3), 200, np.uint8)
URL = image_data_url(IMG)


def msgs(*parts, text="What is it?"):
    return [{"role": "user", "content": [*parts, {"type": "text", "text": text}]}]


IMAGE = {"type": "image_url", "image_url": {"url": URL}}


def make_engine(lm=None, **kw):
    lm = lm or FakeLM(**kw)
    cfg = EngineConfig(vision_path="v.onnx", llm_path="m.gguf", resolution=128, threads=1)
    return Engine(FakeVision(), lm, cfg), lm


@contextmanager
def serve(engine, **settings):
    with BackgroundServer(create_app(engine, ApiSettings(**settings), host="127.0.0.1")) as server:
        yield server


@pytest.fixture(scope="module")
def fake():
    """One server on a quick scripted engine, for the requests that do not change settings."""
    engine, _ = make_engine(script=b"Hello!")
    with serve(engine) as server:
        yield server


def client(server, key="unused", **kw):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0, **kw)


def post(server, body=None, timeout=10.0, **kw):
    return httpx.post(server.url + "/v1/chat/completions", json=body, timeout=timeout, **kw)


def error_of(resp):
    e = resp.json()["error"]
    assert set(e) == {"message", "type", "param", "code"}
    return e


# -- requests and answers ------------------------------------------------------
def test_non_streaming_answer_with_usage(fake):
    r = client(fake).chat.completions.create(model="fastvlm", messages=msgs(IMAGE))
    assert r.choices[0].message.content == "Hello!" and r.choices[0].finish_reason == "stop"
    assert r.usage.completion_tokens == len("Hello!") + 1  # the end-of-turn token counts
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.model == "fastvlm" and r.object == "chat.completion"


def test_sse_stream_format(fake):
    body = {"messages": msgs(IMAGE), "stream": True, "stream_options": {"include_usage": True}, "max_tokens": 3}
    with httpx.stream("POST", fake.url + "/v1/chat/completions", json=body) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = [ln for ln in r.iter_lines() if ln]
    assert all(ln.startswith("data: ") for ln in lines) and lines[-1] == "data: [DONE]"
    chunks = [json.loads(ln[6:]) for ln in lines[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"} and len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[1:-1])
    assert text == "Hel"
    final, use = chunks[-2], chunks[-1]
    assert final["choices"][0]["finish_reason"] == "length" and final["timings"]["stop_reason"] == "max_tokens"
    assert use["choices"] == [] and use["usage"]["completion_tokens"] == 3


def test_openai_streaming_client(fake):
    stream = client(fake).chat.completions.create(model="fastvlm", messages=msgs(IMAGE), stream=True)
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "Hello!"
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_predict_streams_plain_text(fake):
    with httpx.stream("POST", fake.url + "/predict", files={"image": ("x.png", base64.b64decode(URL[22:]))},
                      data={"prompt": "Hi"}) as r:
        assert r.status_code == 200 and r.headers["content-type"] == "text/plain; charset=utf-8"
        assert r.read() == b"Hello!"
    r = httpx.post(fake.url + "/predict", data={"prompt": "no image"})
    assert r.status_code == 400 and error_of(r)["param"] == "image"


def test_models_health_and_prepare(fake):
    assert [m.id for m in client(fake).models.list()] == ["fastvlm"]
    h = httpx.get(fake.url + "/health").json()
    assert h["status"] == "ok" and h["state"] == "idle" and h["engine"]["llm"] == "m.gguf"
    assert h["engine"]["resolution"] == 128 and h["uptime_s"] >= 0
    r = httpx.post(fake.url + "/v1/prepare", json={"image_url": {"url": URL}})
    assert r.json() == {"prepared": True}


# -- bad requests ---------------------------------------------------------------
@pytest.mark.parametrize("body, status, code", [
    ({"messages": msgs()}, 400, "image_required"),
    ({"messages": msgs(IMAGE, IMAGE)}, 400, "too_many_images"),
    ({"messages": msgs({"type": "image_url", "image_url": {"url": "data:text/plain;base64,aGk="}})}, 400,
     "invalid_image_url"),
    ({"messages": msgs({"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}})}, 400,
     "invalid_input"),
    ({"messages": msgs({"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}})}, 400,
     "remote_image_url_refused"),
    ({"messages": msgs(IMAGE), "resolution": 100}, 400, "invalid_value"),
    ({"messages": msgs(IMAGE), "temperature": -1}, 422, "invalid_value"),
    ({"messages": "hello"}, 422, "invalid_value"),
    ({"model": "gpt-4o", "messages": msgs(IMAGE)}, 404, "model_not_found"),
])
def test_bad_requests_get_openai_style_errors(fake, body, status, code):
    r = post(fake, body)
    assert (r.status_code, error_of(r)["code"]) == (status, code), r.text


def test_malformed_json_is_a_400(fake):
    r = post(fake, content=b'{"messages": [', headers={"content-type": "application/json"})
    assert r.status_code == 400 and error_of(r)["code"] == "json_invalid"


def test_the_openai_client_sees_typed_errors(fake):
    c = client(fake)
    with pytest.raises(openai.NotFoundError, match="model_not_found|does not exist"):
        c.chat.completions.create(model="gpt-4o", messages=msgs(IMAGE))
    with pytest.raises(openai.BadRequestError, match="no image"):
        c.chat.completions.create(model="fastvlm", messages=msgs())


def test_oversized_bodies_are_413s():
    engine, _ = make_engine()
    with serve(engine, max_body_bytes=50_000) as server:
        big = {"messages": msgs({"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 60_000}})}
        r = post(server, big)
        assert r.status_code == 413 and error_of(r)["code"] == "request_too_large"
        chunked = (b"x" * 10_000 for _ in range(6))  # no Content-Length: counted while reading
        r = httpx.post(server.url + "/predict", content=chunked, headers={"content-type": "multipart/form-data"})
        assert r.status_code == 413
        assert post(server, {"messages": msgs(IMAGE)}).status_code == 200
        exact, form = b"x" * 50_000, {"content-type": "multipart/form-data"}
        for content in (exact, (exact[i:i + 10_000] for i in range(0, 50_000, 10_000))):  # declared; counted
            r = httpx.post(server.url + "/predict", content=content, headers=form)
            assert r.status_code == 400, r.text  # the limit itself is allowed: read, then refused as no image
        assert httpx.post(server.url + "/predict", content=exact + b"x", headers=form).status_code == 413


def test_remote_image_urls_are_fetched_only_when_allowed():
    from fastapi import FastAPI, Response

    files = FastAPI()
    files.get("/cat.png")(lambda: Response(base64.b64decode(URL[22:]), media_type="image/png"))
    files.get("/huge.png")(lambda: Response(b"\x89PNG" + b"0" * 60_000, media_type="image/png"))
    engine, _ = make_engine()
    with BackgroundServer(files) as host, serve(engine, allow_remote_image_urls=True, max_body_bytes=50_000) as api:
        def ask_url(url):
            return post(api, {"messages": msgs({"type": "image_url", "image_url": {"url": url}})})

        r = ask_url(host.url + "/cat.png")
        assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "Hello!"
        assert error_of(ask_url(host.url + "/missing.png"))["code"] == "image_fetch_failed"
        assert ask_url(host.url + "/huge.png").status_code == 413
        assert error_of(ask_url("http://127.0.0.1:9/x.png"))["code"] == "image_fetch_failed"


def test_api_key_is_checked_before_the_body_is_read():
    engine, _ = make_engine()
    with serve(engine, api_key="s3cret", max_body_bytes=1000) as server:
        body = {"messages": msgs(IMAGE)}
        r = post(server, body)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert error_of(r)["code"] == "missing_api_key"
        assert post(server, {"x": "y" * 5000}, headers={"Authorization": "Bearer nope"}).status_code == 401
        assert httpx.post(server.url + "/predict", headers={"Authorization": "Basic s3cret"}).status_code == 401
        with pytest.raises(openai.AuthenticationError):
            client(server, "wrong").models.list()
        assert [m.id for m in client(server, "s3cret").models.list()] == ["fastvlm"]
        assert httpx.get(server.url + "/health").status_code == 200  # health checks need no key
        with pytest.raises(RemoteError, match="API key"):
            RemoteEngine(server.url, "wrong").answer(Request(IMG, "q"))
        assert RemoteEngine(server.url, "s3cret").answer(Request(IMG, "q")).text == "Hello!"


def test_a_prefix_or_extension_of_the_key_is_refused():
    engine, _ = make_engine()
    with serve(engine, api_key="s3cret") as server:
        for wrong in ("s3cre", "s", "s3cretX"):
            r = httpx.get(server.url + "/v1/models", headers={"Authorization": f"Bearer {wrong}"})
            assert r.status_code == 401 and error_of(r)["code"] == "invalid_api_key", wrong
        assert httpx.get(server.url + "/v1/models", headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_a_long_strip_image_is_a_400_that_says_what_to_do(fake):
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (2100, 10)).save(buf, "PNG")  # 210:1: padded, the content would be a sliver
    strip = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    r = post(fake, {"messages": msgs({"type": "image_url", "image_url": {"url": strip}})})
    assert r.status_code == 400 and "crop it or split it" in error_of(r)["message"]
    r = httpx.post(fake.url + "/predict", files={"image": ("strip.png", buf.getvalue())})
    assert r.status_code == 400 and "crop it or split it" in r.text


def test_too_many_turns_are_refused_and_the_cap_itself_is_answered(fake):
    from fastvlm.engine.plan import MAX_TURNS

    def chat(turns):
        earlier = [{"role": r, "content": t} for _ in range(turns) for r, t in (("user", "q?"), ("assistant", "a."))]
        first = msgs(IMAGE, text="q?")[0]
        return {"messages": [first, {"role": "assistant", "content": "a."}, *earlier[2:], msgs(text="now?")[0]]}

    r = post(fake, chat(MAX_TURNS + 1))
    assert r.status_code == 400 and error_of(r)["code"] == "too_many_turns", r.text
    assert "send only the recent turns" in error_of(r)["message"]
    r = post(fake, chat(MAX_TURNS))
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "Hello!"


@pytest.mark.parametrize("headers, trusted, allowed", [
    ({}, (), True),  # a local client, no proxy
    ({"Forwarded": "for=203.0.113.9;proto=https"}, (), False),  # nginx on this host: the peer is loopback
    ({"X-Forwarded-For": "127.0.0.1"}, (), False),  # forwarded, and no proxy named: origin unknown
    ({"X-Real-IP": "127.0.0.1"}, (), False),
    ({"X-Forwarded-For": "203.0.113.9"}, ("127.0.0.1",), False),  # a named proxy, a remote client
    ({"Forwarded": 'for="[2001:db8::7]:4711"'}, ("127.0.0.0/8",), False),
    ({"X-Forwarded-For": "127.0.0.1"}, ("127.0.0.1",), True),  # a named proxy, a local client
    ({"X-Forwarded-For": "203.0.113.9, 127.0.0.1"}, ("127.0.0.1",), False),  # the nearest untrusted hop counts
    # a client-written loopback entry left of the address the proxy saw is not believed
    ({"X-Forwarded-For": "127.0.0.2, 203.0.113.9"}, ("127.0.0.1",), False),
])
def test_without_a_key_forwarded_requests_count_as_remote_unless_the_proxy_is_named(headers, trusted, allowed):
    engine, _ = make_engine()
    with serve(engine, trusted_proxies=trusted) as server:
        r = httpx.get(server.url + "/v1/models", headers=headers)
        assert r.status_code == (200 if allowed else 403), r.text
        if not allowed:
            assert error_of(r)["code"] == "remote_client_refused" and \
                "FASTVLM_TRUSTED_PROXIES" in error_of(r)["message"]
        assert httpx.get(server.url + "/v1/models").status_code == 200  # direct local clients stay served


def test_trusted_proxies_must_be_addresses():
    with pytest.raises(ValueError, match="'nginx' is not an IP address or network.*FASTVLM_TRUSTED_PROXIES"):
        ApiSettings(trusted_proxies=("nginx",))
    assert ApiSettings(trusted_proxies=("10.0.0.0/8", "::1")).trusted_proxies == ("10.0.0.0/8", "::1")


def test_continue_final_message_is_offered_only_by_an_engine_that_can_go_on():
    going_on = [*msgs(IMAGE), {"role": "assistant", "content": "It is "}]
    engine, lm = make_engine(script=b"grey.")
    with serve(engine) as server:
        assert httpx.get(server.url + "/health").json()["extensions"] == ["prepare", "continue_final_message"]
        r = post(server, {"messages": going_on, "continue_final_message": True})
        assert r.json()["choices"][0]["message"]["content"] == "grey."  # only what follows
        assert bytes(lm.prefills[-1][-len(b"It is "):]) == b"It is "
    engine.continues_answers = False  # as a server that is itself a client of another one
    with serve(engine) as server:
        assert httpx.get(server.url + "/health").json()["extensions"] == ["prepare"]
        r = post(server, {"messages": going_on, "continue_final_message": True})
        assert r.status_code == 400 and error_of(r)["param"] == "continue_final_message"
