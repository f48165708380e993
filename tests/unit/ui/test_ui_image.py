"""The Image tab's handlers with a scripted engine: streaming into the chat, follow-ups, bad input, Stop."""

import itertools
import threading

import gradio as gr
import pytest
from PIL import Image

from fastvlm import EngineConfig, Request
from fastvlm.engine.engine import Engine
from fastvlm.engine.events import Busy, ModelFileError
from fastvlm.engine.prompt import DEFAULT_QUESTION, Turn
from tests.fakes import FakeLM, FakeVision
from ui.tab_image import NO_IMAGE, ImageSession, ask, guard, messages, new_conversation, prepare, resolution_choices
from ui.widgets import ENGINE_FAILED


class Recording:
    """An engine that remembers every request it streams."""

    def __init__(self, engine):
        self.engine, self.requests = engine, []

    def stream(self, request, wait=None, cancel=None):
        self.requests.append(request)
        return self.engine.stream(request, wait, cancel)

    def __getattr__(self, name):
        return getattr(self.engine, name)


def make_engine(script=b"A red square.", delay=0.0, **cfg):
    config = EngineConfig(vision_path="v.onnx", llm_path="m.gguf", resolution=128, threads=1, **cfg)
    return Recording(Engine(FakeVision(), FakeLM(script, delay=delay), config))


@pytest.fixture
def photo(tmp_path):
    path = tmp_path / "photo.png"
    Image.new("RGB", (64, 48), (200, 30, 30)).save(path)
    return str(path)


def run(engine, session, image, question="What is it?", resolution=128, max_new_tokens=64):
    guard(session, image)
    return list(ask(engine, session, image, question, resolution, max_new_tokens, every_s=0))


def test_an_answer_streams_into_the_chat_with_a_metrics_line(photo):
    engine, session = make_engine(), ImageSession()
    updates = run(engine, session, photo)
    chat, metrics, box = updates[0]
    assert chat == messages([], ("What is it?", "")) and box == ""  # question shown at once, box cleared
    assert "waiting" in metrics
    answers = [u[0][-1]["content"] for u in updates]
    assert answers[-1] == "A red square." and all(b.startswith(a) for a, b in itertools.pairwise(answers))
    final_metrics = updates[-1][1]
    assert "TTFT" in final_metrics and "tok/s" in final_metrics and \
        "14 tokens" in final_metrics  # 13 bytes + the end token
    assert session.history == [Turn("What is it?", "A red square.")]
    assert session.turnstile.active == 0
    assert "A red square." not in final_metrics  # the answer lives in the chat only


def test_follow_ups_send_the_history_and_a_new_image_starts_over(photo, tmp_path):
    engine, session = make_engine(), ImageSession()
    run(engine, session, photo, "first?")
    chat = run(engine, session, photo, "second?")[-1][0]
    assert [m["content"] for m in chat if m["role"] == "user"] == ["first?", "second?"]
    assert engine.requests[-1].history == (Turn("first?", "A red square."),)
    other = tmp_path / "other.png"
    Image.new("RGB", (40, 40), (0, 0, 255)).save(other)
    chat = run(engine, session, str(other), "third?")[-1][0]
    assert engine.requests[-1].history == () and len(chat) == 2


def test_upload_clear_and_new_conversation_reset_only_this_session(photo):
    engine, mine, theirs = make_engine(), ImageSession(), ImageSession()
    run(engine, mine, photo)
    run(engine, theirs, photo)
    assert new_conversation(mine)[0] == [] and mine.history == [] and mine.image == photo
    assert len(theirs.history) == 1
    chat = run(engine, mine, photo, "after the reset?")[-1][0]
    assert len(chat) == 2 and engine.requests[-1].history == ()


def test_an_empty_question_asks_the_default():
    engine, session = make_engine(), ImageSession()
    image = Image.new("RGB", (32, 32))
    chat = list(ask(engine, session, image, "   ", 128, 16, every_s=0))[-1][0]
    assert chat[0]["content"] == DEFAULT_QUESTION and engine.requests[-1].question == DEFAULT_QUESTION


def test_no_image_and_a_second_click_are_refused_in_the_page(photo):
    session = ImageSession()
    with pytest.raises(gr.Error, match="Upload an image first"):
        guard(session, None, "q", 128, 64)
    with pytest.raises(gr.Error) as err:
        list(ask(make_engine(), session, None, "q", 128, 64))
    assert err.value.message == NO_IMAGE
    guard(session, photo)
    with pytest.raises(gr.Error, match="Still answering"):
        guard(session, photo)


def test_a_broken_upload_warns_on_upload_and_errors_on_ask_never_in_the_chat(tmp_path, recwarn):
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40)  # a PNG signature, then nothing usable
    engine, session = make_engine(), ImageSession()
    prepare(engine, str(broken), 128)
    assert any("cannot be" in str(w.message) or "not an image" in str(w.message) for w in recwarn)
    updates = []
    with pytest.raises(gr.Error) as err:
        for update in ask(engine, session, str(broken), "q?", 128, 64, every_s=0):
            updates.append(update)  # noqa: PERF402 - the updates made before the error are what is checked
    assert updates[-1][0] == [] and updates[-1][2] == "q?"  # the pending turn is taken back, the question restored
    assert all("not an image" not in str(u) for u in updates)
    assert "not an image" in err.value.message and session.history == [] and session.turnstile.active == 0
    assert not engine.busy


def test_a_huge_image_is_refused_with_a_page_error(tmp_path):
    huge = tmp_path / "huge.png"
    Image.new("RGB", (400, 300)).save(huge)
    engine = make_engine(max_image_pixels=100_000)
    with pytest.warns(UserWarning, match="above the limit"):
        prepare(engine, str(huge), 128)
    with pytest.raises(gr.Error, match="above the limit"):
        list(ask(engine, ImageSession(), str(huge), "q", 128, 64))


def test_a_new_image_withdraws_the_question_still_waiting_for_the_old_one(photo, tmp_path):
    """A question waits in line (another person's answer runs); the image is replaced before it runs. The new
    image's question gets in at once, and the old one, when its turn comes, does nothing: no restart to the old
    image, no answer, no error. (The load browser test met this: a refused strip's question still in line made
    the next Submit 'Still answering', then wiped the chat when it failed.)"""
    engine, session = make_engine(), ImageSession()
    guard(session, photo)  # Submit on the old image; its answer is queued behind someone else's
    other = tmp_path / "other.png"
    Image.new("RGB", (40, 40), (0, 0, 255)).save(other)
    new_conversation(session, str(other))  # the upload of the new image
    guard(session, str(other))  # not "Still answering"
    withdrawn = list(ask(engine, session, photo, "old?", 128, 64, every_s=0))  # its turn comes: nothing happens,
    assert withdrawn == [(gr.skip(),) * 3]  # not even to the page (yielding nothing would clear the chat)
    assert engine.requests == [] and session.turnstile.active
    chat = list(ask(engine, session, str(other), "new?", 128, 64, every_s=0))[-1][0]
    assert [m["content"] for m in chat] == ["new?", "A red square."] and session.turnstile.active == 0
    assert engine.requests[-1].image == str(other)


def test_a_new_or_cleared_image_stops_the_answer_about_the_old_one_at_once(photo, tmp_path):
    """Replacing the image (or clearing it) while its answer runs stops that answer then, not at the next Submit:
    the engine is freed for whoever is next in line, and nothing more is shown about the old image."""
    other = tmp_path / "other.png"
    Image.new("RGB", (40, 40), (0, 0, 255)).save(other)
    for replaced_by in (str(other), None):
        session = ImageSession()
        guard(session, photo)
        token = session.turnstile.token
        new_conversation(session, replaced_by)
        assert token.cancelled and not session.turnstile.active, replaced_by


def test_a_submit_that_beats_the_uploads_own_event_is_not_refused_or_withdrawn(photo, tmp_path):
    """The new image's Submit can reach the server before the upload's event: the question about the new image
    withdraws the one about the old image, and the upload's event that follows leaves it running."""
    engine, session = make_engine(), ImageSession()
    guard(session, photo)  # a question about the old image, in line
    old_token = session.turnstile.token
    other = tmp_path / "other.png"
    Image.new("RGB", (40, 40), (0, 0, 255)).save(other)
    guard(session, str(other))  # not "Still answering": the image was replaced
    new_token = session.turnstile.token
    new_conversation(session, str(other))  # the upload's own event, late
    assert old_token.cancelled and not new_token.cancelled and session.turnstile.active
    assert list(ask(engine, session, photo, "old?", 128, 64, every_s=0)) == [(gr.skip(),) * 3]
    chat = list(ask(engine, session, str(other), "new?", 128, 64, every_s=0))[-1][0]
    assert [m["content"] for m in chat] == ["new?", "A red square."] and engine.requests[-1].image == str(other)


def test_stop_mid_answer_frees_the_engine_keeps_the_partial_turn_and_lets_the_next_ask_start(photo):
    engine, session = make_engine(b"y" * 400, delay=0.005), ImageSession()
    guard(session, photo)
    answer = ask(engine, session, photo, "long?", 128, 400, every_s=0)
    for _ in range(6):
        next(answer)
    session.turnstile.release()  # what the Stop button does before Gradio closes the generator
    answer.close()
    assert not engine.busy
    assert len(session.history) == 1 and 0 < len(session.history[0].answer) < 400
    assert run(engine, session, photo, "next?")[-1][0][-1]["content"] == "y" * 64


def test_stop_while_waiting_for_the_engine_says_stopped_and_leaves_no_empty_turn(photo):
    """Someone else holds the engine; Stop while this question waits in line: the chat keeps no empty answer for
    follow-ups to be asked after, and the metrics line says it stopped (was "TTFT 0 ms ... 0 tokens")."""
    engine, session = make_engine(b"y" * 400, delay=0.01), ImageSession()
    other = engine.stream(Request(photo, "someone else's question"))
    next(other)  # holds the engine
    guard(session, photo)
    waiting = ask(engine, session, photo, "mine?", 128, 64, every_s=0)
    next(waiting)  # the question shown, in line
    threading.Timer(0.2, session.turnstile.release).start()  # Stop
    chat, metrics, _ = list(waiting)[-1]
    other.close()
    assert session.history == [] and "stopped before the first token" in metrics and "TTFT" not in metrics
    assert run(engine, session, photo, "next?")[-1][0][0]["content"] == "next?"  # asked with no empty turn before


def test_a_question_let_in_while_the_stopped_answer_winds_down_follows_it(photo):
    """Stop, then the next Submit before the stopped answer has ended (its token was on its way): the stopped
    turn stays in the chat, once, and the next question is asked after it."""
    engine, session = make_engine(b"y" * 400, delay=0.005), ImageSession()
    guard(session, photo)
    answer = ask(engine, session, photo, "long?", 128, 400, every_s=0)
    shown = [next(answer) for _ in range(6)][-1][0][-1]["content"]
    session.turnstile.release()  # Stop
    guard(session, photo, "next?")  # the next Submit, let in while the old answer still holds the engine
    assert session.history == [Turn("long?", shown)]
    next(answer)  # the token on its way comes too late for the chat
    answer.close()
    chat = list(ask(engine, session, photo, "next?", 128, 64, every_s=0))[-1][0]
    assert [m["content"] for m in chat] == ["long?", shown, "next?", "y" * 64]
    assert engine.requests[-1].history == (Turn("long?", shown),) and len(session.history) == 2


def test_two_sessions_streaming_at_once_never_see_each_others_answers(photo, tmp_path):
    engine = make_engine(b"same words", delay=0.001)
    sessions = [ImageSession(), ImageSession()]
    results = {}

    def person(i):
        results[i] = run(engine, sessions[i], photo, f"question {i}")[-1][0]

    threads = [threading.Thread(target=person, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    for i in range(2):
        assert [m["content"] for m in results[i] if m["role"] == "user"] == [f"question {i}"]
        assert sessions[i].history == [Turn(f"question {i}", "same words")]


def test_resolution_choices_offer_accurate_fast_and_the_configured_size():
    assert [v for _, v in resolution_choices(1024)] == [1024, 512]
    assert [v for _, v in resolution_choices(128)] == [1024, 512, 128]


class BusyBackend:
    """A remote backend whose server is full: its stream raises `Busy` (an HTTP 503)."""

    def stream(self, request, wait=None, cancel=None):
        raise Busy("the server's queue is full; retry after 5 s")


def test_a_busy_backend_and_an_image_too_big_for_the_context_say_so_not_that_the_model_failed(photo, caplog):
    session = ImageSession()
    with pytest.raises(gr.Error) as busy:
        run(BusyBackend(), session, photo)
    assert busy.value.title == "Busy" and "try again in a moment" in busy.value.message
    assert "queue is full" in busy.value.message and ENGINE_FAILED not in busy.value.message
    session = ImageSession()
    small = Recording(Engine(FakeVision(), FakeLM(n_ctx=120), EngineConfig(
        vision_path="v.onnx", llm_path="m.gguf", resolution=1024, threads=1)))  # 256 image positions > 120
    with pytest.raises(gr.Error) as plan:
        run(small, session, photo, resolution=1024)
    assert "lower the resolution" in plan.value.message and ENGINE_FAILED not in plan.value.message
    assert session.history == [] and "answer failed" not in caplog.text  # nothing logged as a crash


class UnloadedBackend(BusyBackend):
    """The app's engine when its background load failed (`weights.loading.BackgroundLoad`)."""

    def stream(self, request, wait=None, cancel=None):
        raise ModelFileError("llm.gguf is truncated: delete it and start the app again to download it")


def test_a_model_that_did_not_load_says_why_not_that_it_failed_on_this_request(photo, caplog):
    with pytest.raises(gr.Error) as unloaded:
        run(UnloadedBackend(), ImageSession(), photo)
    assert unloaded.value.title == "The model is not loaded" and "llm.gguf is truncated" in unloaded.value.message
    assert ENGINE_FAILED not in unloaded.value.message and "answer failed" not in caplog.text  # was both


def test_the_resolution_choice_offers_only_what_the_vision_graph_serves():
    from ui.tab_image import resolution_choices

    assert [v for _, v in resolution_choices(1024)] == [1024, 512]
    assert [v for _, v in resolution_choices(1024, [1024])] == [1024]  # a graph exported for 1024 only
    assert [v for _, v in resolution_choices(128)] == [1024, 512, 128]


class LoadingBackend(BusyBackend):
    """The app's engine while its background load runs, then loaded with a graph that serves 1024 px only."""

    def __init__(self):
        self.info = {"state": "loading", "resolution": 1024, "busy": True}

    def describe(self):
        return self.info


def test_a_page_opened_while_the_model_loads_gets_the_loaded_models_sizes():
    """The Radio offered 1024 and 512 until the page was reloaded, though the loaded graph serves only 1024."""
    from ui import create_app

    backend = LoadingBackend()
    demo = create_app(backend)
    refresh = next(fn for fn in demo.fns.values() if fn.name == "refresh")
    radio = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "image-resolution")
    timer = next(b for b in refresh.outputs if isinstance(b, gr.Timer))
    assert radio in refresh.outputs and timer.active  # the header is refreshed while the model loads
    backend.info = {"state": "loading", "resolution": 1024, "busy": True, "stage": "converting"}
    loading = refresh.fn()
    assert not isinstance(loading[refresh.outputs.index(radio)], gr.Radio)  # left as it is: nothing known yet
    assert loading[refresh.outputs.index(timer)].active and "converting" in loading[0]
    backend.info = {"state": "ready", "resolution": 1024, "resolutions": [1024]}
    ready = refresh.fn()
    update = ready[refresh.outputs.index(radio)]
    assert [v for _, v in update.choices] == [1024] and update.value == 1024
    assert not ready[refresh.outputs.index(timer)].active  # loaded: the refreshing stops
    refresh = next(fn for fn in create_app(backend).fns.values() if fn.name == "refresh")
    assert not next(b for b in refresh.outputs if isinstance(b, gr.Timer)).active  # a page opened once loaded
