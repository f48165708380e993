"""`RemoteEngine` against this API and against another kind of OpenAI-compatible server."""

import json

import pytest

from fastvlm import InputError, Notice, Request, TextDelta, Turn
from fastvlm.api.server import BackgroundServer
from fastvlm.remote import RemoteEngine, RemoteError
from tests.unit.api.test_api_server import IMG, make_engine, serve


def test_remote_engine_events_stats_notices_and_errors():
    engine, lm = make_engine(script="héllo 🌍".encode(), n_ctx=200)
    with serve(engine) as server:
        remote = RemoteEngine.connect(server.url + "/v1")
        assert remote.model == "fastvlm"
        long = tuple(Turn("q" * 60, "a" * 60) for _ in range(3))
        events = list(remote.stream(Request(IMG, "Hi", long)))
        local = list(engine.stream(Request(IMG, "Hi", long)))
        kinds = [type(e).__name__ for e in events]
        assert kinds == [type(e).__name__ for e in local]  # Notice, FirstToken, TextDelta..., Done
        assert [e for e in events if isinstance(e, Notice)] == [e for e in local if isinstance(e, Notice)] != []
        text = "".join(e.text for e in events if isinstance(e, TextDelta))
        assert text == "héllo 🌍"
        stats = events[-1].stats
        assert stats.new_tokens == len("héllo 🌍".encode()) + 1 and stats.image_tokens == 4
        assert stats.stop_reason == "end_of_turn" and 0 < stats.ttft_s <= stats.total_s
        with pytest.raises(InputError, match="multiple of 64"):
            remote.answer(Request(IMG, "q", resolution=100))
        assert remote.continues_answers  # this server's /health names continue_final_message
        remote.answer(Request(IMG, "Hi", answer_so_far="Well, héllo"))
        assert bytes(lm.prefills[-1][-len("Well, héllo".encode()):]) == "Well, héllo".encode()  # after the header
        assert remote.prepare(IMG) is True
        d = remote.describe()
        assert d["backend"] == server.url and d["llm"] == "m.gguf" and d["busy"] is False
        remote.close()
    with pytest.raises(RemoteError, match="could not reach"):
        RemoteEngine.connect(server.url)


def openai_like_server():
    """A minimal other OpenAI-compatible server (as llama-server answers): no /health, no extensions."""
    from fastapi import FastAPI
    from fastapi.responses import StreamingResponse

    app = FastAPI()
    seen = []

    @app.get("/v1/models")
    def models():
        return {"object": "list", "data": [{"id": "other-vlm", "object": "model"}]}

    @app.post("/v1/chat/completions")
    def chat(body: dict):
        seen.append(body)

        def chunks():
            for delta, finish in [({"role": "assistant"}, None), ({"content": "ab"}, None), ({"content": "c"}, None),
                                  ({}, "length")]:
                yield f"data: {json.dumps({'choices': [{'index': 0, 'delta': delta, 'finish_reason': finish}]})}\n\n"
            yield f"data: {json.dumps({'choices': [], 'usage': {'prompt_tokens': 9, 'completion_tokens': 3}})}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(chunks(), media_type="text/event-stream")

    return app, seen


def test_remote_engine_against_another_kind_of_server():
    app, seen = openai_like_server()
    with BackgroundServer(app) as server, RemoteEngine.connect(server.url + "/v1/") as remote:
        events = list(remote.stream(Request(IMG, "q")))
        assert seen[0]["model"] == "other-vlm"  # the server's first model, from /v1/models
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "abc"
        stats = events[-1].stats
        assert (stats.prompt_tokens, stats.new_tokens, stats.stop_reason) == (9, 3, "max_tokens")
        assert remote.prepare(IMG) is False and remote._prepare_supported is False  # no /v1/prepare there
        assert not remote.continues_answers
        with pytest.raises(InputError, match="cannot go on"):  # never answered as if it were a new question
            remote.answer(Request(IMG, "q", answer_so_far="It is"))
        info = remote.describe()  # no /health there: what the UI reads, with an error
        assert info["backend"] == server.url and info["resolution"] == 1024 and "error" in info
