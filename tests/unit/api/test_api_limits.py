"""What one API request may cost is bounded before it costs it: images are decoded only when the request would be
admitted, a few at a time; stop strings and content parts are few and short; form numbers are checked as ASCII;
a remote image's download has a total time limit (scripted models, a real uvicorn server)."""

import asyncio
import base64
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from fastvlm.api import ApiSettings, images
from fastvlm.api.errors import ApiError
from fastvlm.api.schema import MAX_PARTS, MAX_STOP, MAX_STOP_CHARS
from fastvlm.engine import preprocess
from tests.unit.api.test_api_server import IMAGE, URL, make_engine, msgs, post, serve


@pytest.fixture(scope="module")
def hello():
    """A server whose engine says "Hello!", for requests that change nothing."""
    engine, _ = make_engine(script=b"Hello!")
    with serve(engine) as server:
        yield server


class CountingDecodes:
    """`preprocess.load_image` for encoded bytes, counted (how many, and how many at once), each taking `hold_s`."""

    def __init__(self, real, hold_s: float = 0.0):
        self.real, self.hold_s = real, hold_s
        self.calls = self.now = self.peak = 0
        self.lock = threading.Lock()

    def __call__(self, source, *args, **kwargs):
        if not isinstance(source, bytes):
            return self.real(source, *args, **kwargs)
        with self.lock:
            self.calls, self.now = self.calls + 1, self.now + 1
            self.peak = max(self.peak, self.now)
        try:
            time.sleep(self.hold_s)
            return self.real(source, *args, **kwargs)
        finally:
            with self.lock:
                self.now -= 1


def test_a_request_that_would_be_refused_is_refused_before_its_image_is_decoded(monkeypatch):
    decodes = CountingDecodes(preprocess.load_image)
    monkeypatch.setattr(preprocess, "load_image", decodes)
    engine, _ = make_engine(script=b"x" * 3000, delay=0.01)  # a long answer (30 s) holds the engine
    long_answer = {"messages": msgs(IMAGE), "stream": True, "max_tokens": 3000}
    with serve(engine, max_waiting=0) as server, \
            httpx.stream("POST", server.url + "/v1/chat/completions", json=long_answer, timeout=60) as running:
        lines = running.iter_lines()  # kept: a dropped iterator closes the stream, and the answer with it
        next(lines)
        decodes.calls = 0
        with ThreadPoolExecutor(6) as pool:
            codes = list(pool.map(lambda _: post(server, {"messages": msgs(IMAGE)}).status_code, range(6)))
    assert codes == [503] * 6 and decodes.calls == 0  # was 6: each decoded, then refused (a PNG can take GBs)


def test_images_are_decoded_a_few_at_a_time(monkeypatch):
    decodes = CountingDecodes(preprocess.load_image, hold_s=0.2)
    monkeypatch.setattr(preprocess, "load_image", decodes)
    engine, _ = make_engine(script=b"ok")
    with serve(engine, max_waiting=8, max_decoding=2) as server, ThreadPoolExecutor(6) as pool:
        codes = list(pool.map(lambda _: post(server, {"messages": msgs(IMAGE)}, timeout=30).status_code, range(6)))
    assert codes == [200] * 6 and decodes.calls == 6 and decodes.peak == 2  # was 6 at once


@pytest.mark.parametrize("stop", [["a"] * (MAX_STOP + 1), "x" * (MAX_STOP_CHARS + 1), ["ok", "y" * 1000]])
def test_too_many_or_too_long_stop_strings_are_refused(hello, stop):
    r = post(hello, {"messages": msgs(IMAGE), "stop": stop})
    error = r.json()["error"]
    assert r.status_code == 422 and error["param"].startswith("stop") and "at most" in error["message"], r.text


def test_stop_strings_within_the_limits_still_stop_the_answer(hello):
    r = post(hello, {"messages": msgs(IMAGE), "stop": ["", "z", "q", "llo"]})  # the script says "Hello!"
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "He"


def test_the_documented_limits_are_4_stop_strings_of_64_characters_and_64_parts(hello):
    docs = (Path(__file__).resolve().parents[3] / "docs" / "api.md").read_text()
    assert "a list of at most 4, each at most 64 characters" in docs and "at most 64 `text`/`image_url` parts" in docs
    r = post(hello, {"messages": msgs(IMAGE), "stop": ["z" * 64] * 4})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "Hello!", r.text
    assert post(hello, {"messages": msgs(IMAGE), "stop": ["z"] * 5}).status_code == 422
    assert post(hello, {"messages": msgs(IMAGE), "stop": "z" * 65}).status_code == 422
    text = {"type": "text", "text": "q"}
    assert post(hello, {"messages": [{"role": "user", "content": [IMAGE] + [text] * 63}]}).status_code == 200
    r = post(hello, {"messages": [{"role": "user", "content": [IMAGE] + [text] * 64}]})
    assert r.status_code == 422 and "at most 64 items" in r.json()["error"]["message"], r.text


def test_a_message_of_too_many_parts_is_refused_without_checking_each(hello):
    parts = [{"type": 1}] * 200_000  # every part malformed: an error for each would take seconds and GBs
    t = time.monotonic()
    r = post(hello, {"messages": [{"role": "user", "content": parts}]}, timeout=60)
    assert r.status_code == 422 and len(r.content) < 10_000, r.text[:500]
    assert r.json()["error"]["message"].startswith(f"messages.0.content: List should have at most {MAX_PARTS} items")
    assert time.monotonic() - t < 10  # was ~2 s here and ~150 MB of errors (20 s for the 1.8 M parts of a 20 MB body)


@pytest.mark.parametrize("max_tokens", ["\u00b2", "9" * 5000, "0", "-3", "1e3"])
def test_predict_refuses_a_max_tokens_that_is_not_a_plain_positive_number(hello, max_tokens):
    png = base64.b64decode(URL.split(",", 1)[1])
    r = httpx.post(hello.url + "/predict", files={"image": ("a.png", png)}, data={"max_tokens": max_tokens},
                   timeout=10)
    assert r.status_code == 400 and "max_tokens" in r.text  # "²" and 5000 digits were a 500


def trickling_server() -> int:
    """A port where an HTTP server answers 200 and then sends one byte every 0.2 s, for 10 s."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)

    def run():
        conn, _ = sock.accept()
        conn.recv(65536)
        try:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: 100000\r\n\r\n")
            for _ in range(50):
                time.sleep(0.2)
                conn.sendall(b"x")
        except OSError:  # the client gave up
            pass
        finally:
            conn.close()
            sock.close()

    threading.Thread(target=run, daemon=True).start()
    return sock.getsockname()[1]


def test_a_remote_image_that_trickles_in_is_given_up_after_the_time_limit_in_all():
    settings = ApiSettings(allow_remote_image_urls=True, remote_image_timeout_s=1.0)
    t = time.monotonic()
    with pytest.raises(ApiError, match="longer than 1 s") as caught:
        asyncio.run(images.fetch(f"http://127.0.0.1:{trickling_server()}/photo.png", settings))
    assert time.monotonic() - t < 3  # was 10 s: httpx's timeout is per read
    assert (caught.value.status, caught.value.code) == (400, "image_fetch_failed")  # the client's, not a 5xx


@pytest.mark.parametrize("field", ["temperature", "repeat_penalty"])
def test_an_infinite_sampling_setting_is_refused(hello, field):
    body = '{"messages": [{"role": "user", "content": "hi"}], "' + field + '": Infinity}'  # Python's json reads it
    r = httpx.post(hello.url + "/v1/chat/completions", content=body, headers={"Content-Type": "application/json"},
                   timeout=10)
    assert r.status_code == 422 and r.json()["error"]["param"] == field, r.text
