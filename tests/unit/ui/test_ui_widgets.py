"""Shared UI pieces: readout formatting, the event fold, the per-person turnstile, the header, bad uploads."""

import itertools
from pathlib import Path

import gradio as gr
import numpy as np
import pytest
from gradio.data_classes import ImageData

from fastvlm import Busy, Done, EngineConfig, FirstToken, Notice, Request, Stats, TextDelta
from fastvlm.engine.engine import Engine
from tests.fakes import FakeLM, FakeVision
from ui.inputs import GONE, UNREADABLE, readable_uploads
from ui.settings import AppSettings
from fastvlm.engine.events import InputError, ModelFileError
from ui.widgets import (
    CSS_PATH,
    ENGINE_FAILED,
    Turnstile,
    by_component,
    fail,
    follow,
    format_metrics,
    format_ttft,
    header_markdown,
    ms,
    preset_buttons,
    readout_html,
    wire_answer,
)

IMG = np.full((32, 48, 3), 200, np.uint8)


def make_engine(script=b"Hello there!", delay=0.0, **cfg):
    config = EngineConfig(vision_path="v.onnx", llm_path="m.gguf", resolution=128, threads=1, **cfg)
    return Engine(FakeVision(), FakeLM(script, delay=delay), config)


def test_readouts_read_as_specified():
    stats = Stats(encode_s=0.12, prefill_s=0.2, decode_s=1.0, ttft_s=0.64, total_s=2.1, new_tokens=49)
    assert format_metrics(stats) == "TTFT 640 ms · encode 120 ms · prefill 200 ms · 48.0 tok/s · 49 tokens"
    cached = Stats(prefill_s=0.003, ttft_s=0.007, reused_tokens=303, embedding_cached=True, new_tokens=1)
    assert format_metrics(cached) == "TTFT 7 ms · encode cached · prefill 3 ms (303 reused) · 0.0 tok/s · 1 tokens"
    assert format_ttft(0.64, 2.1) == "TTFT 640 ms · total 2.1 s"
    assert format_ttft(0.64) == "TTFT 640 ms · total …" and format_ttft(None) == "TTFT … · total …"
    assert format_ttft(0.04, 0.25) == "TTFT 40 ms · total 250 ms"
    assert ms(12.34) == "12.3 s"
    assert readout_html("a<b", "ttft") == '<div class="readout readout-ttft">a&lt;b</div>'


def test_follow_folds_a_real_stream_into_the_answer_so_far():
    engine = make_engine("héllo 🌍 world".encode())
    parts = list(follow(engine.stream(Request(IMG, "hi")), every_s=0))
    assert parts[0].text == "h" and parts[0].ttft_s > 0 and parts[0].stats is None  # the first token shows at once
    assert all(b.text.startswith(a.text) for a, b in itertools.pairwise(parts))  # only ever grows
    assert parts[-1].text == engine.answer(Request(IMG, "hi")).text == "héllo 🌍 world"
    assert parts[-1].stats is not None and parts[-1].stats.new_tokens > 0
    assert all(p.stats is None for p in parts[:-1])


def test_follow_coalesces_deltas_but_always_shows_first_text_and_end():
    now = [0.0]
    events = [FirstToken(0.1), *[TextDelta(c) for c in "abcdef"], Done(Stats(new_tokens=7))]
    parts = list(follow(iter(events), every_s=10, clock=lambda: now[0]))
    assert [p.text for p in parts] == ["a", "abcdef"]  # the first text at once; later ones within 10 s held back
    assert parts[0].ttft_s == 0.1  # with its time to first token, in the same page update
    assert parts[-1].stats.new_tokens == 7


def test_follow_turns_notices_into_info_and_input_errors_into_page_errors(capsys):
    parts = list(follow(iter([Notice("conversation trimmed"), FirstToken(0.1), Done(Stats())])))
    assert "conversation trimmed" in capsys.readouterr().out  # gr.Info outside a request prints
    assert all(p.text == "" for p in parts)
    engine = make_engine()
    with pytest.raises(gr.Error) as err:
        list(follow(engine.stream(Request(b"not an image", "q"))))
    assert "not an image" in err.value.message
    assert not engine.busy


def test_follow_lets_busy_through_and_closing_it_frees_the_engine():
    engine = make_engine(b"x" * 500, delay=0.002)
    first = follow(engine.stream(Request(IMG, "q")), every_s=0)
    next(first)
    with pytest.raises(Busy):
        next(follow(engine.stream(Request(IMG, "frame"), wait=0)))
    first.close()
    assert not engine.busy


def test_turnstile_refuses_a_second_answer_until_the_first_leaves_or_stop():
    t = Turnstile()
    t.enter()
    ticket = t.active
    with pytest.raises(gr.Error, match="Still answering"):
        t.enter()
    t.leave(ticket + 1)  # an older answer ending late does not free a newer one
    assert t.active == ticket
    t.leave(ticket)
    t.enter()
    t.release()
    t.enter()
    assert t.active == ticket + 2


def test_header_names_files_settings_licence_and_flags_synthetic_weights():
    info = {"model": "fastvlm-synth-tiny", "synthetic": True, "vision": "/m/vision.onnx", "llm": "/m/llm.gguf",
            "resolution": 1024, "threads": 4, "n_ctx": 4096, "busy": False}
    text = header_markdown(info, "FastVLM on CPU")
    for part in ("`vision.onnx`", "`llm.gguf`", "1024 px", "4 threads", "FastVLM weights: Apple AMLR licence",
                 "synthetic weights: answers are gibberish"):
        assert part in text
    assert "gibberish" not in header_markdown({**info, "synthetic": False}, "t")


def test_an_unreadable_upload_becomes_a_page_error_that_says_what_to_send(tmp_path):
    bad = tmp_path / "photo.png"
    bad.write_bytes(b"this is not a png")
    box = readable_uploads(gr.Image(type="filepath", image_mode=None))
    with pytest.raises(gr.Error) as err:
        box.preprocess(ImageData(path=str(bad), orig_name="photo.png"))
    assert err.value.message == UNREADABLE
    good = tmp_path / "ok.png"
    from PIL import Image

    Image.new("RGB", (8, 8)).save(good)
    assert box.preprocess(ImageData(path=str(good), orig_name="ok.png")) == str(good)
    assert not list(Path(readable_uploads.__code__.co_filename).parent.glob("*.pyi"))  # no stub files written
                                                                                       # beside ui/


def test_an_upload_the_server_no_longer_has_asks_for_it_again_not_for_another_format(tmp_path):
    """The cache sweep deletes uploads left unused (ui/cache.py): the next question about one must not call a
    good PNG unreadable."""
    from PIL import Image

    photo = tmp_path / "photo.png"
    Image.new("RGB", (8, 8)).save(photo)
    box = readable_uploads(gr.Image(type="filepath", image_mode=None))
    payload = ImageData(path=str(photo), orig_name="photo.png")
    assert box.preprocess(payload) == str(photo)
    photo.unlink()  # swept
    with pytest.raises(gr.Error) as err:
        box.preprocess(payload)
    assert err.value.message == GONE and err.value.title == "Upload it again"  # was UNREADABLE


def test_a_handler_with_nothing_to_show_skips_its_outputs_instead_of_clearing_them():
    """Gradio 6 sets every output of a generator handler that yields nothing to None (checked in a page: a Textbox
    and a Chatbot emptied). The voice tab's "speak the rest" step has nothing to show after an answer that was not
    spoken (a "Nothing asked" warning, a barge-in): it must leave the status and readout as they are."""
    from ui.voice.session import VoiceSession
    from ui.voice.tab import speak

    status, readout = object(), object()
    components = {"status": status, "readout": readout}
    assert list(by_component(iter([]), components)) == [{status: gr.skip(), readout: gr.skip()}]
    assert list(by_component(iter([{"status": "<p>x</p>"}]), components)) == [{status: "<p>x</p>"}]
    assert list(by_component(speak(VoiceSession(phase="listening"), AppSettings()), components)) == \
        [{status: gr.skip(), readout: gr.skip()}]



def test_readouts_change_unit_at_ten_seconds_and_the_total_at_one():
    assert (ms(9.99), ms(10.0)) == ("9990 ms", "10.0 s")
    assert format_ttft(0.5, 0.9) == "TTFT 500 ms · total 900 ms"
    assert format_ttft(0.5, 1.0) == "TTFT 500 ms · total 1.0 s"
    assert format_ttft(0.5, 1.5) == "TTFT 500 ms · total 1.5 s"


def test_only_a_stop_before_any_token_reads_as_stopped():
    stopped = Stats(total_s=0.3, stop_reason="cancelled")
    assert format_metrics(stopped) == "stopped before the first token · 300 ms"
    for stats in (Stats(ttft_s=0.2, new_tokens=3, stop_reason="cancelled"), Stats(total_s=0.3)):
        assert format_metrics(stats).startswith("TTFT ")


def test_follow_shows_text_again_once_every_s_has_passed_since_the_last_update():
    now = [0.0]

    def clock():
        return now[0]

    def stream():
        yield TextDelta("a")  # first: shown at 0
        for t, text in ((5.0, "b"), (10.0, "c"), (15.0, "d")):
            now[0] = t
            yield TextDelta(text)

    assert [p.text for p in follow(stream(), every_s=10, clock=clock)] == ["a", "abc"]  # 10 s after "a": shown


def test_expected_errors_are_toasts_without_a_traceback_in_the_log_and_others_are_logged(caplog):
    for error, title in ((Busy("3 waiting"), "Busy"), (InputError("too big"), "This request cannot be answered"),
                         (ModelFileError("m.gguf: missing"), "The model is not loaded")):
        shown = fail(error)
        assert (shown.title, shown.print_exception) == (title, False) and str(error) in shown.message
    assert fail(RuntimeError("kaput")).message == ENGINE_FAILED and "kaput" in caplog.text
    engine = make_engine()
    with pytest.raises(gr.Error) as err:
        list(follow(engine.stream(Request(b"not an image", "q"))))
    t = Turnstile()
    t.enter()
    with pytest.raises(gr.Error) as busy:
        t.enter()
    assert err.value.print_exception is False and busy.value.print_exception is False


def test_answers_run_one_at_a_time_across_the_app_and_stop_skips_the_queue():
    with gr.Blocks() as page:
        ask, stop, state, out = gr.Button(), gr.Button(), gr.State(), gr.Textbox()
        wire_answer([ask.click], lambda s: None, lambda s: "", [state], [out], stop, state, "ask")
        preset_buttons(["Describe the image."], out)
    fns = list(page.fns.values())
    index, answer = next((i, f) for i, f in page.fns.items() if f.api_name == "ask")
    assert (answer.concurrency_id, answer.concurrency_limit, answer.trigger_mode) == ("engine", 1, "multiple")
    release = next(f for f in fns if f.name == "_release")
    assert release.queue is False and any(index in (f.cancels or []) for f in fns)
    preset = next(f for f in fns if f.js and "Describe the image." in f.js)
    assert preset.fn is None  # the browser fills the box: no server round trip


def test_the_header_says_where_each_part_came_from_and_whether_the_model_is_ready():
    info = {"vision": "/m/v.onnx", "llm": "/m/l.gguf", "resolution": 512, "threads": 2, "n_ctx": 4096,
            "sources": {"vision": "hub <apple>", "llm": "cache"}, "vision_runtime": "openvino",
            "vision_precision": "int8"}
    text = header_markdown(info, "t")
    assert "model: `v.onnx` + `l.gguf` · 512 px" in text
    assert "<small>vision: hub &lt;apple&gt; · llm: cache · vision runtime: openvino · int8</small>" in text
    assert "<small>vision: hub &lt;apple&gt; · llm: cache</small>" in header_markdown(
        {**info, "vision_runtime": None, "vision_precision": None}, "t")
    assert "<small>" not in header_markdown({**info, "sources": None}, "t")
    assert "⏳ *encoding…* (questions asked now wait for it)" in header_markdown(
        {**info, "state": "loading", "stage": "encoding"}, "t")
    failed = header_markdown({**info, "state": "failed", "error": "no <file>"}, "t")
    assert "**✖ the model could not be loaded:** no &lt;file&gt;" in failed and "⏳" not in failed
    assert "✖" not in text and "⏳" not in text


def test_the_stylesheet_is_found():
    assert CSS_PATH.is_file() and CSS_PATH.read_text().strip()
