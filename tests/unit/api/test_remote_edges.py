"""`RemoteEngine` against a scripted server (httpx's MockTransport, no sockets): what it sends (images as they are,
no empty stop list, no answer so far before the server said it can go on), when it refuses at once (busy with
`wait=0`), what it makes of a stream without usage, when it prepares, and each HTTP error's exception."""

from __future__ import annotations

import base64
import io
import json

import httpx
import numpy as np
import pytest
from PIL import Image

from fastvlm import Busy, GenerationOptions, InputError, Request, Turn
from fastvlm.remote import RemoteEngine, RemoteError, image_data_url

IMG = np.full((16, 16, 3), 120, np.uint8)


def sse(*texts: str, usage: dict | None = None) -> bytes:
    chunks = [{"choices": [{"delta": {"content": t}}]} for t in texts]
    chunks.append({"choices": [{"delta": {}, "finish_reason": "stop"}], **({"usage": usage} if usage else {})})
    return "".join(f"data: {json.dumps(c)}\n\n" for c in chunks).encode() + b"data: [DONE]\n\n"


class Server:
    """Answers each request with `reply(request)`; keeps the requests."""

    def __init__(self, reply):
        self.reply, self.requests = reply, []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.reply(request)

    def bodies(self, path: str) -> list[dict]:
        return [json.loads(r.content) for r in self.requests if r.url.path == path]


def remote(reply, **kw) -> tuple[RemoteEngine, Server]:
    server = Server(reply)
    engine = RemoteEngine("http://server.test/v1", **kw)
    answer_with(engine, server)
    return engine, server


def answer_with(engine: RemoteEngine, reply) -> None:
    """`engine`'s requests answered by `reply` from now on (its own HTTP client closed)."""
    engine._http.close()
    engine._http = httpx.Client(base_url=engine.base_url, transport=httpx.MockTransport(reply))


def encoded(fmt: str) -> bytes:
    out = io.BytesIO()
    Image.fromarray(IMG).save(out, fmt)
    return out.getvalue()


def test_encoded_images_go_as_they_are_and_pixels_as_the_format_asked(tmp_path):
    jpeg = encoded("JPEG")
    assert image_data_url(jpeg) == "data:image/jpeg;base64," + base64.b64encode(jpeg).decode()  # not re-encoded
    (tmp_path / "a.jpg").write_bytes(jpeg)
    assert image_data_url(tmp_path / "a.jpg") == image_data_url(jpeg)
    as_jpeg = image_data_url(IMG, "JPEG")
    out = io.BytesIO()
    Image.fromarray(IMG).save(out, "JPEG", quality=90)
    assert as_jpeg == "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode()
    with pytest.raises(InputError, match="no-such.png"):
        image_data_url(tmp_path / "no-such.png")  # the engine's own message, not a FileNotFoundError


def test_no_answer_so_far_goes_before_the_server_says_it_can_go_on():
    engine, server = remote(lambda r: httpx.Response(200, content=sse("x")))
    assert engine.continues_answers is False  # only `connect` asks the server's /health
    with pytest.raises(InputError, match="cannot go on from an answer so far"):
        engine.answer(Request(IMG, "q", answer_so_far="It is"))
    assert server.requests == []


def test_stop_strings_go_only_when_there_are_some():
    engine, server = remote(lambda r: httpx.Response(200, content=sse("x")))
    engine.answer(Request(IMG, "q"))
    engine.answer(Request(IMG, "q", options=GenerationOptions(stop=("END",))))
    plain, stopped = server.bodies("/v1/chat/completions")
    assert "stop" not in plain and stopped["stop"] == ["END"]
    assert plain["stream"] is True and plain["stream_options"] == {"include_usage": True}  # usage comes at the end


def test_busy_with_wait_0_is_refused_here_and_any_other_wait_goes_to_the_server():
    engine, server = remote(lambda r: httpx.Response(200, content=sse("a", "b")))
    assert engine.answer(Request(IMG, "q"), wait=0).text == "ab"  # idle: wait 0 goes
    first = engine.stream(Request(IMG, "q"))
    next(first)  # one answer streaming: this client is busy
    assert engine.busy
    with pytest.raises(Busy, match="still receiving another answer"):
        next(engine.stream(Request(IMG, "q"), wait=0))
    assert len(server.requests) == 2
    assert engine.answer(Request(IMG, "q"), wait=5).text == "ab"  # the server may queue it
    assert engine.busy  # the first answer still streams
    first.close()
    assert not engine.busy and len(server.requests) == 3
    waits = [body.get("queue_wait_s", "the server's own") for body in server.bodies("/v1/chat/completions")]
    assert waits == [0, "the server's own", 5]


def test_a_stream_without_usage_counts_its_pieces():
    engine, _ = remote(lambda r: httpx.Response(200, content=sse("a", "b", "c")))
    result = engine.answer(Request(IMG, "q"))
    assert result.text == "abc" and result.stats.new_tokens == 3 and result.stats.prompt_tokens == 0
    engine, _ = remote(lambda r: httpx.Response(200, content=sse("a", usage={"completion_tokens": 7})))
    assert engine.answer(Request(IMG, "q")).stats.new_tokens == 7


def test_the_times_are_this_clients_from_sending_to_the_first_piece_and_the_end():
    ticks = iter([10.0, 11.5, 14.0, 20.0, 23.0])  # sent, first piece, end; then sent, end of an empty answer
    engine, _ = remote(lambda r: httpx.Response(200, content=sse("a", "b")), clock=lambda: next(ticks))
    events = list(engine.stream(Request(IMG, "q")))
    stats = events[-1].stats
    assert (events[0].ttft_s, stats.ttft_s, stats.decode_s, stats.total_s) == (1.5, 1.5, 2.5, 4.0)
    answer_with(engine, lambda r: httpx.Response(200, content=sse()))
    first, done = list(engine.stream(Request(IMG, "q")))
    stats = done.stats  # nothing said: its first token is at the end
    assert (first.ttft_s, stats.ttft_s, stats.decode_s, stats.total_s) == (3.0, 3.0, 0.0, 3.0)


def test_the_first_choice_is_read_and_data_lines_may_omit_the_space():
    chunk = {"choices": [{"delta": {"content": "mine"}}, {"delta": {"content": "another's"}}]}
    body = f"data:{json.dumps(chunk)}\n\ndata:[DONE]\n\n".encode()
    engine, _ = remote(lambda r: httpx.Response(200, content=body))
    assert engine.answer(Request(IMG, "q")).text == "mine"


def test_a_server_that_cannot_be_reached_is_no_prepare_and_a_described_error():
    def unreachable(request):
        raise httpx.ConnectError("connection refused", request=request)

    engine, _ = remote(unreachable)
    assert engine.prepare(IMG) is False
    info = engine.describe()
    assert (info["model"], info["synthetic"], info["backend"], info["busy"]) == ("", False, "http://server.test",
                                                                                  False)
    assert "could not reach http://server.test" in info["error"]


def test_a_prepare_is_sent_only_where_it_can_help_and_true_only_when_the_server_prepared():
    replies = iter([httpx.Response(200, json={"prepared": True}), httpx.Response(200, json={"prepared": False}),
                    httpx.Response(500, json={"prepared": True}), httpx.Response(404)])
    engine, server = remote(lambda r: next(replies))
    assert engine.prepare(IMG, words="what is") is False and server.requests == []  # no question goes there
    turns = (Turn("What is it?", "A cup."),)
    assert engine.prepare(None, history=turns, image_with_question=True) is False and server.requests == []  # no image
    assert [engine.prepare(IMG) for _ in range(4)] == [True, False, False, False]
    assert engine.prepare(IMG) is False and len(server.requests) == 4  # a server without it is not asked again
    engine, server = remote(lambda r: httpx.Response(405))
    assert [engine.prepare(IMG), engine.prepare(IMG)] == [False, False] and len(server.requests) == 1
    engine, server = remote(lambda r: httpx.Response(200, text="prepared, I think"))  # not JSON
    assert [engine.prepare(IMG), engine.prepare(IMG)] == [False, False] and len(server.requests) == 2


@pytest.mark.parametrize("status, raised, words", [
    (503, Busy, "queue full"),
    (400, InputError, "queue full"), (413, InputError, "queue full"), (422, InputError, "queue full"),
    (401, RemoteError, "refused the request \\(queue full\\): check the API key"),
    (403, RemoteError, "check the API key"),
    (500, RemoteError, "answered HTTP 500: queue full"),
    (504, RemoteError, "answered HTTP 504"),
])
def test_each_http_error_becomes_its_exception(status, raised, words):
    engine, _ = remote(lambda r: httpx.Response(status, json={"error": {"message": "queue full"}}))
    with pytest.raises(raised, match=words):
        engine.answer(Request(IMG, "q"))


def test_an_error_that_is_not_openais_shows_the_start_of_its_body():
    engine, _ = remote(lambda r: httpx.Response(502, text="<html>" + "x" * 500))
    with pytest.raises(RemoteError, match=r"answered HTTP 502: <html>x{194}$"):
        engine.answer(Request(IMG, "q"))
    assert not engine.busy
    engine, _ = remote(lambda r: httpx.Response(502))  # no body at all: the status's own words
    with pytest.raises(RemoteError, match=r"answered HTTP 502: Bad Gateway$"):
        engine.answer(Request(IMG, "q"))
