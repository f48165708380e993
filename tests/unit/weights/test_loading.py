import threading

import numpy as np
import pytest

from fastvlm import Busy, EngineConfig, ModelFileError, Request
from fastvlm.engine.engine import Engine
from fastvlm.weights.loading import BackgroundLoad
from tests.fakes import FakeLM, FakeVision

IMG = np.zeros((8, 8, 3), np.uint8)


def fake_engine():
    return Engine(FakeVision(), FakeLM(b"ok"), EngineConfig(vision_path="v", llm_path="m", resolution=64, threads=1))


def test_stands_in_while_loading_then_serves():
    gate = threading.Event()
    loader = BackgroundLoad(lambda: (gate.wait(), fake_engine())[1], {"resolution": 64}).start()
    assert loader.describe() == {"resolution": 64, "state": "loading", "busy": True}
    assert loader.busy and loader.prepare(IMG) is False
    with pytest.raises(Busy, match="still loading"):
        next(loader.stream(Request(IMG, "q"), wait=0))
    assert loader.continues_answers  # what the app loads (an Engine) can go on from an answer so far
    gate.set()
    assert loader.answer(Request(IMG, "q")).text == "ok"  # waits for the load
    assert loader.continues_answers and loader.answer(Request(IMG, "q", answer_so_far="o")).text == "ok"
    assert loader.describe()["state"] == "ready" and not loader.busy and loader.prepare(IMG)


def test_a_failed_load_is_reported_to_every_request():
    def boom():
        raise ModelFileError("FastVLM weights are not available")

    loader = BackgroundLoad(boom, {}).start()
    with pytest.raises(ModelFileError, match="not available"):
        loader.answer(Request(IMG, "q"))
    info = loader.describe()
    assert info["state"] == "failed" and "not available" in info["error"]


def test_the_header_says_loading_then_names_the_model():
    from ui.widgets import header_markdown

    planned = {"vision": "/m/vision.onnx", "llm": "/m/llm.gguf", "resolution": 1024, "threads": 2, "n_ctx": 4096}
    assert "loading the model" in header_markdown({**planned, "state": "loading"}, "T")
    failed = header_markdown({**planned, "state": "failed", "error": "<weights> missing"}, "T")
    assert "could not be loaded" in failed and "&lt;weights&gt;" in failed
    assert "loading" not in header_markdown({**planned, "state": "ready", "model": "m"}, "T")


def test_closing_during_a_long_load_does_not_wait_for_it_and_the_late_engine_is_closed():
    """Ctrl-C during a first-run download: close() returns at once; what the load builds later is closed."""
    release, closed = threading.Event(), []

    class LateEngine:
        def close(self):
            closed.append(True)

    loader = BackgroundLoad(lambda: (release.wait(30), LateEngine())[1], {"resolution": 1024}).start()
    closer = threading.Thread(target=loader.close, kwargs={"wait": 0.2})
    closer.start()
    closer.join(5)
    assert not closer.is_alive()  # did not wait for the download
    release.set()
    loader._thread.join(5)
    assert closed == [True] and loader.state == "failed"


def test_closing_after_the_load_closes_the_engine_it_built():
    closed = []

    class Loaded:
        def close(self):
            closed.append(True)

    loader = BackgroundLoad(Loaded, {}).start()
    loader.ready(5)
    loader.close(wait=5)
    assert closed == [True]


def test_a_failed_load_closes_nothing_and_shows_no_stage():
    def boom():
        loader.report("downloading vision.onnx")
        raise ModelFileError("the Hub is unreachable")

    loader = BackgroundLoad(boom, {"resolution": 512})
    loader.start().close(wait=5)  # no engine: nothing to close, no error
    info = loader.describe()
    assert info["state"] == "failed" and "stage" not in info and "unreachable" in info["error"]
