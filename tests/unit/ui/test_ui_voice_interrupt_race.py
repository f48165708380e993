"""A new question arriving while the last answer's next sentence is still being synthesized (threads, fakes):
the page is hushed at once, never after the player's wait for that sentence, and a sentence that finishes at
that moment is never sent under the new question's turn (the page's hush only drops older turns)."""

import struct
import threading

import numpy as np

from fastvlm.speech.audio import write_wav
from fastvlm.speech.tts import Speech
from tests.unit.ui.test_ui_voice import SETTINGS
from tests.unit.ui.test_ui_voice_tab import on_line
from ui.voice import playing as voice_playing
from ui.voice.session import VoiceSession
from ui.voice.speech_queue import SpeechQueue


class HeldSpeaker:
    """Synthesizes a short WAV once `go` is set."""

    def __init__(self, folder):
        self.folder, self.go = folder, threading.Event()

    def synthesize(self, text: str) -> Speech:
        assert self.go.wait(10)
        path = self.folder / "sentence.wav"
        write_wav(path, 16_000, np.zeros(1600, np.int16))
        return Speech(path, "fake", "voice")


class StoppedAnswer:
    """The running answer as `interrupt()` sees it: `stop()` is where the test lets the sentence finish."""

    def __init__(self, on_stop):
        self.stop = on_stop


def playing_the_rest(tmp_path, monkeypatch):
    """An answer's last sentence is being synthesized while `speak_rest` waits for it (5 s, not 0.1: so the
    test does not depend on when the new question comes). (session, speaker, queue, messages to the page, thread)"""
    play_next = voice_playing._play_next

    def waiting_long(*args, wait_s=0.0):
        return play_next(*args, wait_s=5.0 if wait_s else 0.0)

    monkeypatch.setattr(voice_playing, "_play_next", waiting_long)
    session = VoiceSession(listening=True)
    _, sent = on_line(session)
    speaker = HeldSpeaker(tmp_path)
    queue = session.speech = SpeechQueue(speaker)
    queue.say("The last answer's last sentence.")
    queue.finish()
    player = threading.Thread(target=lambda: list(voice_playing.speak_rest(session, SETTINGS)), daemon=True)
    player.start()
    return session, speaker, queue, sent, player


def sounds(sent: list) -> list[int]:
    """The turn each sentence sent to the page was tagged with."""
    return [struct.unpack("<I", m[:4])[0] for m in sent if isinstance(m, bytes)]


def test_a_new_question_hushes_the_page_without_waiting_for_the_sentence_being_made(tmp_path, monkeypatch):
    session, speaker, _, sent, player = playing_the_rest(tmp_path, monkeypatch)
    asking = threading.Thread(target=session.interrupt, daemon=True)  # what a new question does first
    asking.start()
    asking.join(1.0)
    hushed = not asking.is_alive() and {"type": "hush", "turn": session.turn} in sent
    speaker.go.set()
    player.join(5)
    assert hushed  # before the sentence was made (the player waits up to 5 s for it)
    assert not player.is_alive() and sounds(sent) == []


def test_a_sentence_made_as_the_question_arrives_is_never_sent_as_the_new_turns(tmp_path, monkeypatch):
    session, speaker, queue, sent, player = playing_the_rest(tmp_path, monkeypatch)
    made = threading.Event()

    def stop():  # between the turn's bump and the queue's close: the sentence is made now
        speaker.go.set()
        queue._pending[0].add_done_callback(lambda _: made.set())
        assert made.wait(5)
        player.join(0.2)  # the player's moment to send it

    session.answer = StoppedAnswer(stop)
    session.interrupt()
    player.join(5)
    assert not player.is_alive() and sent[-1] == {"type": "hush", "turn": session.turn}
    assert all(turn < session.turn for turn in sounds(sent))  # the page drops it (or it was never sent)
