"""The Camera snapshot tab's handlers: prepare on capture, the streamed answer, the TTFT readout, bad frames."""

import re

import gradio as gr
import numpy as np
import pytest

from fastvlm import EngineConfig
from fastvlm.engine.prompt import DEFAULT_QUESTION
from fastvlm.engine.engine import Engine
from tests.fakes import FakeLM, FakeVision, record_questions
from ui.tab_snapshot import NO_TTFT_YET, SnapshotSession, analyse, guard, is_blank, on_capture

FRAME = np.random.default_rng(0).integers(30, 255, (48, 64, 3), dtype=np.uint8)
READOUT = re.compile(r"TTFT \d+ ms · total (\d+ ms|\d+\.\d s)")


def make_engine(script=b"You hold a cup.", delay=0.0):
    config = EngineConfig(vision_path="v.onnx", llm_path="m.gguf", resolution=128, threads=1)
    return Engine(FakeVision(), FakeLM(script, delay=delay), config)


def test_a_capture_is_prepared_at_once_so_analyse_reuses_its_encoding():
    engine = make_engine()
    on_capture(engine, FRAME, None)
    assert engine.vision.calls == 1
    asked = record_questions(engine)
    updates = list(analyse(engine, SnapshotSession(), FRAME, "What am I holding?", None, 64, every_s=0))
    list(analyse(engine, SnapshotSession(), FRAME, "", None, 64, every_s=0))
    assert asked == ["What am I holding?", DEFAULT_QUESTION]  # the person's question; none given, the default
    assert engine.vision.calls == 1  # the embedding from the capture was reused
    assert updates[-1][0] == "You hold a cup."
    assert READOUT.search(updates[-1][1])


def test_the_ttft_readout_is_always_there_and_fills_in_as_the_answer_arrives():
    updates = list(analyse(make_engine(), SnapshotSession(), FRAME, "", None, 64, every_s=0))
    readouts = [u[1] for u in updates]
    assert "TTFT … · total …" in readouts[0]
    assert re.search(r"TTFT \d+ ms · total …", readouts[1])  # first token: TTFT known, total still coming
    assert READOUT.search(readouts[-1])
    assert NO_TTFT_YET == "TTFT – · total –"


def test_no_capture_a_black_frame_and_a_second_click_are_reported_in_the_page():
    engine, session = make_engine(), SnapshotSession()
    with pytest.raises(gr.Error, match="Take a snapshot first"):
        guard(session, None, "q")
    with pytest.raises(gr.Error, match="Take a snapshot first"):
        list(analyse(engine, session, None, "q", None, 64))
    black = np.zeros((48, 64, 3), np.uint8)
    assert is_blank(black) and not is_blank(FRAME)
    assert is_blank(np.full((2, 2, 3), 7, np.uint8)) and not is_blank(np.full((2, 2, 3), 8, np.uint8))  # the dark edge
    assert is_blank(np.zeros((0, 0, 3), np.uint8)) and not is_blank(np.full((1, 1, 1), 200, np.uint8))
    with pytest.warns(UserWarning, match="black frame"):
        on_capture(engine, black, None)
    assert engine.vision.calls == 0
    on_capture(engine, None, None)  # the capture was cleared: nothing to do
    guard(session, FRAME, "q")
    with pytest.raises(gr.Error, match="Still answering"):
        guard(session, FRAME, "q")


def test_stop_mid_answer_frees_the_engine():
    engine, session = make_engine(b"z" * 300, delay=0.005), SnapshotSession()
    guard(session, FRAME)
    answer = analyse(engine, session, FRAME, "q", None, 300, every_s=0)
    for _ in range(4):
        next(answer)
    answer.close()
    assert not engine.busy and session.turnstile.active == 0
