"""The API on the tiny real engine: the official `openai` client, `/predict` and `RemoteEngine` get the
same greedy answers as the engine itself, and a second server driving the first through `RemoteEngine`."""

import io
from dataclasses import replace

import httpx
import numpy as np
import openai
import pytest
from PIL import Image

from fastvlm import Done, GenerationOptions, Request, TextDelta, Turn
from fastvlm.api import ApiSettings
from fastvlm.api.server import BackgroundServer, create_app
from fastvlm.remote import RemoteEngine, image_data_url

GREEDY = GenerationOptions(max_new_tokens=24)


def png(seed=0, shape=(96, 160, 3)) -> bytes:
    a = np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(a).save(buf, "PNG")
    return buf.getvalue()


def messages(image: bytes, question: str, history=()) -> list[dict]:
    first, *rest = [*history, (question, None)]
    out = [{"role": "system", "content": "ignored: FastVLM's system prompt is fixed"},
           {"role": "user", "content": [{"type": "image_url", "image_url": {"url": image_data_url(image)}},
                                        {"type": "text", "text": first[0]}]}]
    if first[1] is not None:
        out.append({"role": "assistant", "content": first[1]})
    for q, a in rest:
        out.append({"role": "user", "content": q})
        if a is not None:
            out.append({"role": "assistant", "content": a})
    return out


@pytest.fixture(scope="module")
def server(tiny_engine):
    with BackgroundServer(create_app(tiny_engine, ApiSettings(model_id="fastvlm-tiny"), host="127.0.0.1")) as s:
        yield s


@pytest.fixture(scope="module")
def client(server):
    with openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0) as c:
        yield c


def test_openai_client_gets_the_engines_answer(tiny_engine, client):
    image = png(0)
    expected = tiny_engine.answer(Request(image, "What is in the picture?", options=GREEDY))
    assert expected.text  # gibberish, but not empty
    r = client.chat.completions.create(model="fastvlm-tiny", messages=messages(image, "What is in the picture?"),
                                       max_tokens=24, temperature=0)
    assert r.choices[0].message.content == expected.text
    assert r.choices[0].finish_reason == ("length" if expected.stats.stop_reason == "max_tokens" else "stop")
    assert (r.usage.prompt_tokens, r.usage.completion_tokens) == (expected.stats.prompt_tokens,
                                                                 expected.stats.new_tokens)
    stream = client.chat.completions.create(model="fastvlm-tiny", messages=messages(image, "What is in the picture?"),
                                            max_tokens=24, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == expected.text
    assert chunks[-1].usage.completion_tokens == expected.stats.new_tokens


def test_a_conversation_maps_onto_history(tiny_engine, client):
    image, history = png(1), (("Describe it.", "A red square."), ("Bigger?", "No."))
    expected = tiny_engine.answer(Request(image, "Why?", tuple(Turn(q, a) for q, a in history), options=GREEDY))
    r = client.chat.completions.create(model="fastvlm-tiny", messages=messages(image, "Why?", history),
                                       max_tokens=24, seed=5)
    assert r.choices[0].message.content == expected.text


def test_predict_multipart_gets_the_engines_answer(tiny_engine, server):
    image = png(2)
    expected = tiny_engine.answer(Request(image, "Read the text.", options=GREEDY)).text
    with httpx.stream("POST", server.url + "/predict", files={"image": ("photo.png", image, "image/png")},
                      data={"prompt": "Read the text.", "max_tokens": "24"}) as r:
        pieces = list(r.iter_text())
    assert "".join(pieces) == expected


def test_remote_engine_gets_the_engines_events(tiny_engine, server):
    image = np.random.default_rng(3).integers(0, 256, (64, 64, 3), dtype=np.uint8)  # pixels: sent as PNG
    req = Request(image, "What colour?", options=GREEDY)
    local = list(tiny_engine.stream(req))
    with RemoteEngine.connect(server.url) as remote:
        events = list(remote.stream(req))

    def text(evs):
        return "".join(e.text for e in evs if isinstance(e, TextDelta))

    assert text(events) == text(local)
    assert [type(e) for e in events if not isinstance(e, TextDelta)] == \
        [type(e) for e in local if not isinstance(e, TextDelta)]
    here, there = events[-1].stats, local[-1].stats
    assert isinstance(events[-1], Done)
    assert (here.new_tokens, here.prompt_tokens, here.image_tokens, here.stop_reason) == \
        (there.new_tokens, there.prompt_tokens, there.image_tokens, there.stop_reason)
    assert here.embedding_cached  # the server encoded this image for the local request a moment ago
    assert 0 < here.ttft_s <= here.total_s


def test_a_remote_engine_keeps_the_image_with_the_question_as_the_engine_does(tiny_engine, server):
    """`Request.image_with_question` reaches the server (the image in the last user message) and is laid out there
    as the local engine lays it out: the same answer, other than with the image in the first turn."""
    image = np.random.default_rng(6).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    req = Request(image, "And now?", (Turn("Describe it.", "A red square."), Turn("Bigger?", "No.")), GREEDY,
                  image_with_question=True)
    local = tiny_engine.answer(req)
    first_turn = tiny_engine.answer(replace(req, image_with_question=False))
    with RemoteEngine.connect(server.url) as remote:
        there = remote.answer(req)
    assert there.text == local.text != first_turn.text


def test_an_answer_stopped_part_way_goes_on_through_remote_engine_to_the_same_answer(tiny_engine, server):
    image = np.random.default_rng(4).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    req = Request(image, "What is there?", options=GREEDY)
    whole = tiny_engine.answer(req).text
    with RemoteEngine.connect(server.url) as remote:
        assert remote.continues_answers
        stream, so_far = remote.stream(req), ""
        for ev in stream:
            so_far += ev.text if isinstance(ev, TextDelta) else ""
            if len(so_far) >= len(whole) // 3:
                break
        stream.close()
        rest = remote.answer(Request(image, "What is there?", options=GREEDY, answer_so_far=so_far))
    assert 0 < len(so_far) < len(whole) and so_far + rest.text == whole


def test_a_second_server_drives_the_first_through_remote_engine(tiny_engine, server):
    image = png(4)
    expected = tiny_engine.answer(Request(image, "Count them.", options=GREEDY)).text
    with RemoteEngine.connect(server.url) as remote, \
            BackgroundServer(create_app(remote, ApiSettings(), host="127.0.0.1")) as second:
        assert second.port != server.port
        with openai.OpenAI(base_url=second.url + "/v1", api_key="none", max_retries=0) as c:
            r = c.chat.completions.create(model="fastvlm", messages=messages(image, "Count them."), max_tokens=24)
        assert r.choices[0].message.content == expected
        assert httpx.get(second.url + "/health").json()["engine"]["backend"] == server.url
        prepared = httpx.post(second.url + "/v1/prepare", json={"image_url": image_data_url(png(5))})
        assert prepared.json() == {"prepared": True}  # second -> RemoteEngine -> the first's /v1/prepare
