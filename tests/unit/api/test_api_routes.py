"""Endpoints in-process (Starlette's test client) on a described engine: `GET /health` names the model files
without their folders (relative paths too), states the engine's own busy word and the uptime since the router was
built, and offers `continue_final_message` only where the engine says it can go on; `/predict` hands the form's
prompt and max_tokens to the engine."""

from __future__ import annotations

import time

import numpy as np
from fastapi import FastAPI
from fastapi.testclient import TestClient

from fastvlm.api import ApiSettings, build_router
from fastvlm.engine.events import TextDelta
from tests.unit.api.test_api_convert import png_bytes


class Described:
    """An engine as /health sees it: `describe()` only (and `continues_answers` where it has it)."""

    def __init__(self, info: dict):
        self.info = info

    def describe(self) -> dict:
        return self.info


def served(engine) -> TestClient:
    app = FastAPI()
    app.include_router(build_router(engine, ApiSettings(), host="127.0.0.1"))
    return TestClient(app, base_url="http://127.0.0.1", client=("127.0.0.1", 50000))  # this machine


def health(engine) -> dict:
    with served(engine) as http:
        return http.get("/health").json()


def test_the_model_files_are_named_without_their_folders_relative_or_absolute():
    got = health(Described({"vision": "models/fastvlm-0.5b/vision.onnx", "llm": "/root/.cache/fastvlm/llm.gguf",
                            "busy": False}))
    assert (got["engine"]["vision"], got["engine"]["llm"]) == ("vision.onnx", "llm.gguf")
    assert got["state"] == "idle"


def test_the_state_is_the_engines_and_the_uptime_counts_from_the_start():
    t = time.time()
    got = health(Described({"busy": True}))
    assert got["state"] == "busy" and 0 <= got["uptime_s"] <= time.time() - t + 0.1
    assert got["status"] == "ok" and got["model_id"] == ApiSettings().model_id


def test_going_on_from_an_answer_so_far_is_offered_only_by_an_engine_that_says_so():
    assert health(Described({}))["extensions"] == ["prepare"]  # says nothing: cannot
    going_on = Described({})
    going_on.continues_answers = True
    assert health(going_on)["extensions"] == ["prepare", "continue_final_message"]


class Answering(Described):
    """Answers "ok" to every request and keeps them."""

    def __init__(self):
        super().__init__({})
        self.requests = []

    def stream(self, request, wait=None, cancel=None):
        self.requests.append(request)
        yield TextDelta("ok")


def test_predict_hands_the_forms_prompt_and_max_tokens_to_the_engine():
    png = png_bytes(np.full((8, 8, 3), 90, np.uint8))
    engine = Answering()
    with served(engine) as http:
        r = http.post("/predict", files={"image": ("a.png", png, "image/png")},
                      data={"prompt": "What is it?", "max_tokens": "007"})
        assert (r.status_code, r.text) == (200, "ok")
        assert http.post("/predict", files={"image": ("a.png", png, "image/png")}).status_code == 200
    asked, bare = engine.requests
    assert (asked.question, asked.options.max_new_tokens) == ("What is it?", 7)
    assert bare.question == "" and bare.options.max_new_tokens == 256  # the engine's default


def test_every_chunk_and_message_is_choice_0_as_openais_clients_join_them():
    from fastvlm.api.schema import Completion
    from fastvlm.engine.events import Stats

    completion = Completion("fastvlm")
    chunks = [completion.chunk({"role": "assistant", "content": ""}), completion.chunk({"content": "A"}),
              completion.chunk({}, "stop")]
    assert [c["choices"][0]["index"] for c in chunks] == [0, 0, 0]
    assert len({c["id"] for c in chunks}) == 1  # one id for the whole stream
    assert completion.message("A", Stats(), [])["choices"][0]["index"] == 0
