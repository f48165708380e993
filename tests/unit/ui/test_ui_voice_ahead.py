"""Words ahead through the voice line: once the question's frame is prepared, its words so far are heard and
prefilled after the frame while the person still speaks (fakes: loudness VAD, a transcriber that always hears
"What am I holding?", scripted language model)."""

import time

import numpy as np

from fastvlm.speech import SpeechConfig
from tests.unit.ui.test_ui_voice import SETTINGS, FakeSpeaker, FakeTranscriber, LoudnessVad, make_engine, voice
from tests.unit.ui.test_ui_voice_tab import FRAME, pcm
from ui.voice.link import VoiceLink
from ui.voice.prepare import prepare
from ui.voice.models import SpeechModels
from ui.voice.session import VoiceSession


def wait_for(condition, timeout_s=5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


def on_line_preparing(tmp_path, backend):
    """A listening session on an open line, its frames prepared by `backend` as the app wires it (ui/blocks.py)."""
    session = VoiceSession(frame=FRAME)
    models = SpeechModels(FakeTranscriber(), FakeSpeaker(tmp_path), LoudnessVad(), SpeechConfig(words_ahead_s=0.8))
    session.listen(models.turn_taker(likely_events=True, onsets=True))
    session.link = VoiceLink(session, SETTINGS, [].append, prepare=lambda s, start_s, words="": prepare(
        backend, s, None, start_s, words))
    return session, session.link


def test_the_words_heard_so_far_are_prefilled_after_the_prepared_frame_while_the_question_goes_on(tmp_path):
    engine = make_engine()
    _, link = on_line_preparing(tmp_path, engine)
    for frame in np.split(voice(0.4), 10):  # the question begins: its frame is prepared
        link.hear(pcm(frame))
    assert wait_for(lambda: len(engine.lm.prefills) >= 1)
    frame_only = engine.lm.prefills[0]
    words = [ord(c) for c in "\nWhat am I"]  # all but the last word heard

    def words_prefilled() -> bool:
        return any(p[: len(frame_only)] == frame_only and p[len(frame_only):] == words for p in engine.lm.prefills)

    for frame in np.split(voice(2.0), 50):  # the person goes on: 40 ms frames, in real time
        link.hear(pcm(frame))
        time.sleep(0.04)
        if words_prefilled():
            break
    assert words_prefilled() and engine.vision.calls == 1


class Refuses:
    """A backend that cannot prepare (busy, or a remote engine asked for words): nothing is heard ahead."""

    def __init__(self):
        self.calls = []

    def prepare(self, image, resolution=None, words="", history=(), image_with_question=False):
        self.calls.append(words)
        return False


def test_nothing_is_heard_ahead_for_a_frame_that_was_never_prepared(tmp_path):
    backend = Refuses()
    session, link = on_line_preparing(tmp_path, backend)
    transcriber = session.taker.transcriber
    for frame in np.split(voice(2.4), 60):
        link.hear(pcm(frame))
    assert wait_for(lambda: len(backend.calls) >= 1)
    time.sleep(0.6)  # the frame's retries
    assert set(backend.calls) == {""} and transcriber.calls == 0
