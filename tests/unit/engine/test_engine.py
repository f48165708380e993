"""Engine behaviour with scripted models: streaming, stop reasons, single flight, cancellation, prepare."""

import threading
import time

import numpy as np
import pytest

from fastvlm import (Busy, Done, EngineConfig, FirstToken, GenerationOptions, InputError, Notice, Request, TextDelta,
                     Turn)
from fastvlm.engine.engine import Engine
from fastvlm.engine.kv import Tokens, identities
from tests.fakes import EOT, FakeLM, FakeVision

IMG = np.full((32, 48, 3), 200, np.uint8)


def make(script=b"Hello!", **kw):
    cfg_kw = {k: kw.pop(k) for k in list(kw) if k in EngineConfig.__dataclass_fields__ and k != "n_ctx"}
    lm = FakeLM(script, **kw)
    cfg = EngineConfig(vision_path="v.onnx", llm_path="m.gguf", resolution=128, threads=1, **cfg_kw)
    return Engine(FakeVision(), lm, cfg), lm


def test_stream_event_order_and_answer_equals_joined_stream():
    engine, _ = make("héllo 🌍".encode())
    events = list(engine.stream(Request(IMG, "hi")))
    kinds = [type(e) for e in events]
    assert kinds[0] is FirstToken and kinds[-1] is Done
    assert kinds.count(FirstToken) == 1 and kinds.count(Done) == 1
    joined = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert joined == "héllo 🌍"
    result = engine.answer(Request(IMG, "hi"))
    assert result.text == joined
    stats = result.stats
    assert stats.stop_reason == "end_of_turn" and stats.new_tokens == len("héllo 🌍".encode()) + 1
    assert stats.image_tokens == 4 and stats.prompt_tokens > stats.image_tokens
    assert 0 < stats.ttft_s <= stats.total_s


@pytest.mark.parametrize(
    "opts, make_kw, reason, text",
    [
        (GenerationOptions(max_new_tokens=3), {}, "max_tokens", "abc"),
        (GenerationOptions(stop=("cd",)), {}, "stop_string", "ab"),
        (GenerationOptions(), {"end": EOT}, "end_of_text", "abcdef"),
        (GenerationOptions(), {"end": ord("!")}, "context_full", "abcdef!"),
    ],
)
def test_stop_reasons(opts, make_kw, reason, text):
    engine, lm = make(b"abcdef", **make_kw)
    if reason == "context_full":
        lm.end = ord("!")  # not an end token: the script just runs out
    result = engine.answer(Request(IMG, "q", options=opts))
    assert (result.stats.stop_reason, result.text) == (reason, text)


def test_busy_is_raised_at_once_for_a_non_blocking_request():
    engine, lm = make(b"x" * 50, delay=0.01)
    first = engine.stream(Request(IMG, "slow"))
    next(first)  # holds the engine now
    t = time.perf_counter()
    with pytest.raises(Busy):
        next(engine.stream(Request(IMG, "live frame"), wait=0))
    assert time.perf_counter() - t < 0.1
    first.close()


def test_closing_the_stream_stops_decoding_and_frees_the_engine():
    engine, lm = make(b"x" * 1000, delay=0.005)
    stream = engine.stream(Request(IMG, "q"))
    for _ in range(5):
        next(stream)
    stream.close()
    evaluated = lm.evaluated
    assert not engine.busy
    time.sleep(0.05)
    assert lm.evaluated == evaluated  # nothing decodes after close
    assert engine.answer(Request(IMG, "next"), wait=0).stats.new_tokens == 256  # default max_new_tokens


def test_a_waiting_request_runs_after_the_first_and_never_alongside():
    engine, lm = make(b"y" * 20, delay=0.005)
    order = []

    def ask(name):
        for ev in engine.stream(Request(IMG, name)):
            if isinstance(ev, TextDelta):
                order.append(name)

    threads = [threading.Thread(target=ask, args=(n,)) for n in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(order) == 40
    assert order in (["a"] * 20 + ["b"] * 20, ["b"] * 20 + ["a"] * 20)


def test_an_exception_frees_the_engine():
    engine, _ = make()
    with pytest.raises(InputError):
        engine.answer(Request(b"not an image", "q"))
    assert not engine.busy
    assert engine.answer(Request(IMG, "q"), wait=0).text == "Hello!"


def test_embeddings_are_cached_by_content_and_resolution():
    engine, _ = make()
    vision = engine.vision
    engine.answer(Request(IMG, "a"))
    r = engine.answer(Request(IMG.copy(), "b"))
    assert vision.calls == 1 and r.stats.embedding_cached and r.stats.encode_s == 0
    engine.answer(Request(IMG, "a", resolution=64))
    engine.answer(Request(255 - IMG, "a"))
    assert vision.calls == 3


def test_prepare_encodes_and_prefills_prefix_while_idle():
    engine, lm = make()
    assert engine.prepare(IMG)
    prefix = lm.prefills[-1]
    assert prefix[-1][1] == 3  # ends with the last of the 4 image vectors
    r = engine.answer(Request(IMG, "q"))
    assert r.stats.embedding_cached and lm.prefills[-1][: len(prefix)] == prefix


def test_prepare_yields_to_a_real_request():
    engine, lm = make(delay=0.05)
    engine._flight._waiting = 1  # a request is queued
    assert engine.prepare(IMG) is False
    engine._flight._waiting = 0
    engine.answer(Request(IMG, "hold"))  # warm the embedding cache so prepare reaches prefill
    hits = iter([False, True])
    engine._flight.preempted = lambda: next(hits, True)
    assert engine.prepare(IMG) is False  # cancelled between chunks
    assert not engine.busy


class SlowPrefixLM(FakeLM):
    """A prefill that takes `delay` per image and is stopped after it (as llama.cpp's abort callback)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.prefilling = threading.Event()

    def prefill(self, parts, should_stop=None, logits=True) -> int:
        self.prefills.append(identities(parts))
        for p in parts:
            if not isinstance(p, Tokens):
                self.prefilling.set()
                time.sleep(self.delay)
            if should_stop is not None and should_stop():
                from fastvlm.engine.lm import Cancelled

                raise Cancelled()
        return 0


def slow_prefix_engine() -> tuple[Engine, SlowPrefixLM]:
    lm = SlowPrefixLM(delay=0.3)
    config = EngineConfig(vision_path="v.onnx", llm_path="m.gguf", resolution=128, threads=1)
    return Engine(FakeVision(), lm, config), lm


def preparing(engine: Engine, lm: SlowPrefixLM, image) -> tuple[threading.Thread, dict]:
    """`engine.prepare(image)` started in a thread, once its image prefill is under way -> (thread, {"ok": its
    result once joined})."""
    out: dict = {}
    worker = threading.Thread(target=lambda: out.update(ok=engine.prepare(image)))
    worker.start()
    assert lm.prefilling.wait(5)
    return worker, out


def png(path, pixels: np.ndarray) -> str:
    from PIL import Image as PILImage

    PILImage.fromarray(pixels).save(path)
    return str(path)


@pytest.mark.parametrize("asked", ["same frame", "another frame", "same file", "another file"])
def test_a_question_about_the_image_being_prepared_lets_that_prefill_finish(asked, tmp_path):
    """Voice: the frame is prepared while the question is spoken; the answer asked before that prefill is done
    waits for it (it would only redo it); a request for another image still stops the prepare. The Image tab:
    the same for an upload asked about at once (its path comes to the answer as another, equal string)."""
    path, other = png(tmp_path / "photo.png", IMG), png(tmp_path / "other.png", 255 - IMG)
    engine, lm = slow_prefix_engine()
    prepared_image = path if asked.endswith("file") else IMG
    image = {"same frame": IMG, "another frame": IMG.copy(), "same file": path[:1] + path[1:],
             "another file": other}[asked]
    worker, prepared = preparing(engine, lm, prepared_image)
    engine.answer(Request(image, "q"))
    worker.join()
    assert prepared["ok"] is asked.startswith("same")
    if asked.endswith("frame"):
        assert engine.vision.calls == 1  # the embedding is shared either way


def test_a_newer_prepare_stops_the_running_one_and_runs_next():
    """A photo retaken (or an upload replaced) while the last one is prepared: the newest image is the one about
    to be asked about, so its prepare takes over at the running one's next chunk instead of being skipped."""
    engine, lm = slow_prefix_engine()
    first, newer = IMG, 255 - IMG
    worker, prepared = preparing(engine, lm, first)
    t = time.monotonic()
    assert engine.prepare(newer) is True
    worker.join()
    assert prepared["ok"] is False and time.monotonic() - t < 0.3 + 0.3 + 0.2  # one chunk, then its own prefill
    assert engine.answer(Request(newer, "q")).stats.embedding_cached


def test_a_prepare_for_the_file_being_prepared_leaves_that_one_running(tmp_path):
    path = png(tmp_path / "photo.png", IMG)
    engine, lm = slow_prefix_engine()
    worker, prepared = preparing(engine, lm, path)
    assert engine.prepare(path[:1] + path[1:]) is False  # the same upload again (a new str): the running one covers it
    worker.join()
    assert prepared["ok"] is True


def test_a_prepare_still_waiting_gives_way_to_a_newer_one():
    engine, lm = slow_prefix_engine()
    first, first_result = preparing(engine, lm, IMG)
    results = {}
    second = threading.Thread(target=lambda: results.update(second=engine.prepare(255 - IMG)))
    second.start()
    time.sleep(0.05)  # the second waits for the first to give way
    results["third"] = engine.prepare(IMG // 2)
    for run in (first, second):
        run.join()
    assert {"first": first_result["ok"], **results} == {"first": False, "second": False, "third": True}
    assert engine.vision.calls == 2  # the second image was never encoded


def test_prepare_does_nothing_while_busy():
    engine, _ = make(b"z" * 30, delay=0.01)
    s = engine.stream(Request(IMG, "q"))
    next(s)
    assert engine.prepare(IMG) is False
    s.close()


def test_long_conversation_drops_oldest_turns_then_cuts_the_question():
    engine, lm = make(n_ctx=400)
    history = tuple(Turn(f"question {i} " * 5, f"answer {i} " * 5) for i in range(10))
    events = list(engine.stream(Request(IMG, "final?", history=history, options=GenerationOptions(max_new_tokens=50))))
    notices = [e.message for e in events if isinstance(e, Notice)]
    assert notices and "oldest" in notices[0]
    assert len(lm.prefills[-1]) <= 400 - 50
    events = list(engine.stream(Request(IMG, "why " * 500, options=GenerationOptions(max_new_tokens=50))))
    assert any("too long" in e.message for e in events if isinstance(e, Notice))
    assert len(lm.prefills[-1]) <= 350


def test_template_markers_typed_by_the_user_stay_text():
    engine, lm = make()
    engine.answer(Request(IMG, "a <|im_end|> b"))
    prompt_ids = lm.prefills[-1]
    assert prompt_ids.count(1001) == 2  # system turn + user turn closers only


# -- cancel: Stop, a closed tab or a gone client stops encode and prefill, not only decoding ---------------
class BlockingVision(FakeVision):
    """An encode that runs until `cancel()` is called (as ONNX Runtime's terminate / OpenVINO's cancel do)."""

    def __init__(self):
        super().__init__()
        self.started, self._stop = threading.Event(), threading.Event()

    def encode(self, pixels):
        self.started.set()
        if not self._stop.wait(10):
            raise AssertionError("never cancelled")
        from fastvlm.engine.vision import EncodeCancelled

        raise EncodeCancelled()

    def cancel(self):
        self._stop.set()


def _cancel_when(event: threading.Event, token):
    threading.Thread(target=lambda: (event.wait(10), token.cancel()), daemon=True).start()


def test_cancel_abandons_an_encode_and_frees_the_engine():
    from fastvlm.engine.cancel import CancelToken

    vision = BlockingVision()
    engine = Engine(vision, FakeLM(b"never"), EngineConfig(vision_path="v", llm_path="m", resolution=64, threads=1))
    token = CancelToken()
    _cancel_when(vision.started, token)
    events = list(engine.stream(Request(np.zeros((8, 8, 3), np.uint8), "q"), cancel=token))
    assert [type(e).__name__ for e in events] == ["Done"] and events[0].stats.stop_reason == "cancelled"
    assert not engine.busy


def test_a_stop_that_lands_before_the_encode_starts_is_not_lost(monkeypatch):
    """Stop during preprocessing: the runtime's cancel has nothing in flight yet, so the engine must not encode."""
    from fastvlm.engine import engine as engine_module
    from fastvlm.engine.cancel import CancelToken

    token, real = CancelToken(), engine_module.preprocess.to_pixels

    def to_pixels_then_stop(*args, **kwargs):
        out = real(*args, **kwargs)
        token.cancel()  # the Stop arrives while the image is being prepared
        return out

    monkeypatch.setattr(engine_module.preprocess, "to_pixels", to_pixels_then_stop)
    vision, lm = FakeVision(), FakeLM(b"never")
    engine = Engine(vision, lm, EngineConfig(vision_path="v", llm_path="m", resolution=64, threads=1))
    (done,) = engine.stream(Request(np.zeros((8, 8, 3), np.uint8), "q"), cancel=token)
    assert done.stats.stop_reason == "cancelled" and vision.calls == 0 and lm.prefills == []
    assert not engine.busy


def test_cancel_stops_a_prefill_between_chunks_and_decoding_at_once():
    from fastvlm.engine.cancel import CancelToken

    lm = FakeLM(b"abcdefgh", delay=0.05)
    engine = Engine(FakeVision(), lm, EngineConfig(vision_path="v", llm_path="m", resolution=64, threads=1))
    token = CancelToken()
    token.cancel()  # already cancelled: no work at all, one Done
    (done,) = engine.stream(Request(np.zeros((8, 8, 3), np.uint8), "q"), cancel=token)
    assert done.stats.stop_reason == "cancelled" and lm.prefills == []
    token = CancelToken()
    _cancel_when(lm.generating, token)
    result = engine.answer(Request(np.zeros((8, 8, 3), np.uint8), "q"), cancel=token)
    assert result.stats.stop_reason == "cancelled" and len(result.text) < 8 and not engine.busy


class InterruptibleLM(FakeLM):
    """A prefill that blocks inside its one "llama.cpp call" until `interrupt()` (as LlamaLM's abort flag)."""

    def __init__(self):
        super().__init__(b"never")
        self.in_call, self.interrupted = threading.Event(), threading.Event()

    def interrupt(self):
        self.interrupted.set()

    def prefill(self, parts, should_stop=None, logits=True) -> int:
        from fastvlm.engine.lm import Cancelled

        self.in_call.set()
        if self.interrupted.wait(10):
            raise Cancelled()
        return 0


def test_cancel_interrupts_the_language_models_call_in_flight():
    from fastvlm.engine.cancel import CancelToken

    lm = InterruptibleLM()
    engine = Engine(FakeVision(), lm, EngineConfig(vision_path="v", llm_path="m", resolution=64, threads=1))
    token = CancelToken()
    _cancel_when(lm.in_call, token)
    t = time.perf_counter()
    events = list(engine.stream(Request(np.zeros((8, 8, 3), np.uint8), "q"), cancel=token))
    assert time.perf_counter() - t < 5  # not the 10 s the call would otherwise block
    assert [type(e).__name__ for e in events] == ["Done"] and events[0].stats.stop_reason == "cancelled"
    assert events[0].stats.image_tokens > 0 and events[0].stats.prefill_s > 0  # the stages done so far are kept
    assert lm.interrupted.is_set() and not engine.busy


def test_the_native_flag_is_read_by_c_as_a_bool():
    import llama_cpp

    from fastvlm.engine.cancel import NativeFlag

    assert NativeFlag.available()  # libc's strlen is found: no Python callback on this platform
    flag = NativeFlag(llama_cpp.ggml_abort_callback)
    assert flag.callback(flag.data) is False  # the C function pointer itself, as llama.cpp calls it
    flag.set()
    assert flag.callback(flag.data) is True and flag.is_set
    flag.clear()
    assert flag.callback(flag.data) is False and not flag.is_set


def test_a_prepare_for_another_image_never_overtakes_a_question_waiting_for_the_one_being_prepared():
    """Voice: the question about the frame being prepared waits for that prefill. Someone else's upload prepared
    meanwhile gives way at once: it neither stops that prefill nor takes the engine before the question."""
    engine, lm = slow_prefix_engine()
    worker, prepared = preparing(engine, lm, IMG)
    answered = {}
    asking = threading.Thread(target=lambda: answered.update(result=engine.answer(Request(IMG, "q"))))
    asking.start()
    time.sleep(0.05)  # in line for the engine, behind the prepare of its own frame
    assert engine.prepare(255 - IMG) is False
    for thread in (worker, asking):
        thread.join(5)
    assert prepared["ok"] is True and engine.vision.calls == 1  # was: the frame's prefill stopped, the upload
    assert answered["result"].stats.embedding_cached  # encoded, and (half the time) the question waited for it


def test_a_question_about_the_frame_being_prepared_at_another_size_stops_that_prepare():
    """It could not use that prefill (another size is another encode): it stops the prepare, as another image does."""
    engine, lm = slow_prefix_engine()  # prepares at 128
    worker, prepared = preparing(engine, lm, IMG)
    result = engine.answer(Request(IMG, "q", resolution=64))
    worker.join(5)
    assert prepared["ok"] is False and not result.stats.embedding_cached  # was: waited for the 128 px prefill


@pytest.mark.parametrize("name, synthetic", [("fastvlm-synth-random-0.5b", True), ("Random FastVLM", True),
                                             ("FastVLM-0.5B", False), ("", False)])
def test_describe_flags_random_weights_by_the_models_name(name, synthetic):
    engine, lm = make()
    lm.name = name
    info = engine.describe()
    assert info["synthetic"] is synthetic and info["model"] == name

