"""One person's voice session: the timings and windows the mutation probe found untested in `ui/voice/session.py`
(docs/testing.md). Times are given, not read: `now` is an argument everywhere here."""

import numpy as np

from fastvlm import Request, Turn
from fastvlm.speech.audio import write_wav
from fastvlm.speech.tts import Speech
from ui.voice.session import TurnTimes, VoiceSession
from ui.voice.spoken import SpokenAnswer


class Line:
    """The page's audio line: takes every sentence."""

    def __init__(self):
        self.said = []

    def say(self, path, turn):
        self.said.append((path.name, turn))
        return True

    def hush(self, turn):
        pass

    def hold(self, held):
        pass

    def close(self):
        pass


class Queue:
    def __init__(self, done):
        self.done = done


def spoken(tmp_path, name="s.wav"):
    write_wav(tmp_path / name, 16_000, np.zeros(160, np.int16))
    return Speech(tmp_path / name, "fake-tts", "v1")


def test_the_timeline_adds_the_time_to_first_token_to_when_the_engine_was_asked():
    times = TurnTimes(stt_s=0.3, ttft_s=0.2, first_sound_s=0.95, asked_s=0.41, begun_s=0.45)
    assert times.timeline() == ("question known 0.41 s after the end of speech, engine asked 0.45 s, first token "
                                "0.65 s, first sound sent 0.95 s (STT 0.30 s)")
    assert "first token ?" in TurnTimes(begun_s=0.45).timeline()
    assert "first token ?" in TurnTimes(ttft_s=0.2).timeline()


def test_over_the_line_sentences_queue_after_what_still_plays(tmp_path):
    session = VoiceSession(link=Line())
    session.play(spoken(tmp_path, "a.wav"), 2.0, now=10.0, gap_s=0.1, keep=2)
    assert session.playing_until == 12.1 and session.sound_from == 10.0
    session.play(spoken(tmp_path, "b.wav"), 1.0, now=11.0, gap_s=0.1, keep=2)  # sent while the first plays
    assert session.playing_until == 13.2 and session.sound_from == 10.0  # after it, and no new start of sound
    session.play(spoken(tmp_path, "c.wav"), 1.0, now=13.2, gap_s=0.0, keep=2, turn=0)  # as the sound ended
    assert session.sound_from == 13.2 and session.playing_until == 14.2
    session.turn = 2
    session.play(spoken(tmp_path, "d.wav"), 1.0, now=15.0, gap_s=0.0, keep=2)
    assert session.link.said == [("a.wav", 0), ("b.wav", 0), ("c.wav", 0), ("d.wav", 2)]  # of its own turn
    assert not list(tmp_path.iterdir())  # the page has the bytes: the files are gone


def test_the_turns_first_sentence_says_how_long_after_the_end_of_speech_it_was_sent(tmp_path):
    session = VoiceSession(first_sound_from=9.0)
    assert session.play(spoken(tmp_path, "a.wav"), 1.0, now=10.25, gap_s=0.0, keep=2) == (1.25, False)
    assert session.times.first_sound_s == 1.25
    assert session.play(spoken(tmp_path, "b.wav"), 1.0, now=11.25, gap_s=0.0, keep=2) == (None, False)


def test_the_echo_window_holds_its_ends():
    session = VoiceSession(sound_from=10.0, playing_until=20.0)
    assert session.opening(10.0, 0.5) and session.opening(10.5, 0.5)
    assert not session.opening(9.99, 0.5) and not session.opening(10.51, 0.5)
    assert session.closing(19.5, 0.5) and session.closing(20.5, 0.5)  # either side of the sound's end
    assert not session.closing(19.49, 0.5) and not session.closing(20.51, 0.5)


def test_the_answer_is_over_when_its_sound_has_ended_and_nothing_is_left_to_say():
    session = VoiceSession(playing_until=10.0, speech=Queue(done=False))
    assert not session.speech_over(0.5, now=11.0)  # sentences still to come
    session.speech = Queue(done=True)
    assert session.speech_over(0.5, now=10.5) and not session.speech_over(0.5, now=10.4)
    assert VoiceSession(playing_until=10.0).speech_over(0.5, now=10.5)  # no answer's sentences at all


def test_only_the_current_turns_question_being_transcribed_is_awaited():
    session = VoiceSession(turn=3, transcribing=2)  # an older turn's: a newer question replaced it
    assert not session.awaiting
    session.transcribing = 3
    assert session.awaiting


def test_the_conversation_keeps_the_turns_asked_for_and_moves_on_that_many_at_a_time():
    """At least the newest `keep` turns; the earlier ones too until they would make 2·`keep`, so the turns before the
    frame stay the same from one question to the next."""
    earlier = (Turn("What is it?", "A cup."), Turn("Is it full?", "Yes."))
    answer = SpokenAnswer(Request(None, "What colour?", earlier), chunker=None, queue=None, text="Red.")
    session = VoiceSession(answer=answer)
    assert session.conversation(1) == (Turn("What colour?", "Red."),)  # 2 turns: twice 1, moved on
    assert session.conversation(2) == (*earlier, Turn("What colour?", "Red."))  # 3 < 4: grown by the newest
    assert session.conversation(3) == (*earlier, Turn("What colour?", "Red."))
    assert session.conversation(0) == ()
    longer = SpokenAnswer(Request(None, "Why?", (Turn("Hi", "Hello"), *earlier)), chunker=None, queue=None, text="So.")
    assert VoiceSession(answer=longer).conversation(2) == (earlier[1], Turn("Why?", "So."))  # 4: the newest 2


def test_a_sentence_may_go_to_gradios_player_the_moment_the_one_before_has_ended():
    session = VoiceSession(playing_until=10.0)
    assert session.can_send(10.0) and not session.can_send(9.99)
    session.held_end_s = 8.0  # a question answered before its end was confirmed: nothing sounds yet
    assert not session.can_send(11.0)


def test_leaving_deletes_the_files_kept_for_gradios_player_even_where_one_is_gone(tmp_path):
    session = VoiceSession()
    for name in ("a.wav", "b.wav"):
        session.play(spoken(tmp_path, name), 1.0, now=0.0, gap_s=0.0, keep=2)
    (tmp_path / "a.wav").unlink()  # Gradio's cache cleaner, or a disk tidied by hand
    session.close()
    assert not list(tmp_path.iterdir()) and session.files == []
