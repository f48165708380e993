"""The Voice + camera tab's handlers and layout, and app.py's voice flags (fakes; no speech models loaded)."""

import json
import time
import warnings

import gradio as gr
import numpy as np
import pytest

import app
from fastvlm.speech import Speech
from tests.unit.ui.test_ui_voice import RATE, SETTINGS, FakeTranscriber, asked, make_engine, make_models, voice
from ui import AppSettings, create_app
from ui.voice.link import VoiceLink
from ui.voice.links import VoiceLinks
from ui.voice.models import SpeechModels, VoiceUnavailable
from ui.voice.session import VoiceSession
from ui.voice.tab import (
    answer,
    check_microphone,
    line_opened,
    open_line,
    prepare,
    push_to_talk_started,
    push_to_talk_stopped,
    speak,
    speech_started,
    status_html,
    stop,
)
from ui.voice.events import Answering

FRAME = np.full((48, 64, 3), 120, np.uint8)


def test_the_page_follows_a_turn_transcript_answer_spoken_sentence_and_voice_engine(tmp_path):
    engine, models = make_engine(b"A cup. Red."), make_models(tmp_path)
    session = asked(models)
    updates = list(answer(engine, models, session, SETTINGS)) + list(speak(session, SETTINGS))
    assert updates[0]["transcript"] == "What am I holding?" and updates[0]["answer"] == ""
    assert [u["answer"] for u in updates if "answer" in u][-1] == "A cup. Red."
    spoken = [u["speaker"] for u in updates if "speaker" in u]
    assert len(spoken) == 2 and all(p.endswith(".wav") for p in spoken)
    assert any("Voice: fake-tts (v1)" in u.get("voice", "") for u in updates)
    readout = [u["readout"] for u in updates if "readout" in u][-1]
    assert "STT 10 ms" in readout and "first sound" in readout and "…" not in readout
    assert "Listening" in updates[-1]["status"]  # back to listening once the last sentence has played


def test_nothing_heard_and_no_sound_are_warnings_not_errors(tmp_path):
    engine = make_engine()
    models = make_models(tmp_path, FakeTranscriber(""))
    with pytest.warns(UserWarning, match="No speech heard"):
        updates = list(answer(engine, models, asked(models), SETTINGS))
    assert "Listening" in updates[-1]["status"] and engine.lm.prefills == []
    models = make_models(tmp_path, fail="edge-tts failed; the offline voice failed too")
    session = asked(models)
    with pytest.warns(UserWarning, match="the offline voice failed too") as warned:
        updates = list(answer(engine, models, session, SETTINGS)) + list(speak(session, SETTINGS))
    assert len([w for w in warned if "offline voice" in str(w.message)]) == 1  # once per answer, not per sentence
    assert [u["answer"] for u in updates if "answer" in u][-1] == "You hold a red cup. It looks full. That is all."
    assert any("No sound: edge-tts failed" in u.get("voice", "") for u in updates)


def pcm(audio: np.ndarray) -> bytes:
    """float samples -> the 16-bit little-endian PCM the page's line sends."""
    return (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()


def on_line(session: VoiceSession, settings=SETTINGS) -> tuple[VoiceLink, list]:
    """`session` with an open line whose messages to the page are collected in the list."""
    sent = []
    session.link = VoiceLink(session, settings, sent.append)
    return session.link, sent


def test_start_issues_the_line_and_the_line_tells_the_page_when_a_question_starts_and_ends(tmp_path):
    models, links = make_models(tmp_path), VoiceLinks(SETTINGS)
    session = VoiceSession(frame=FRAME)
    token, status = open_line(links, models, session)
    assert links.session(token) is session and session.listening and "Listening" in status
    link, sent = on_line(session)
    for frame in np.split(np.concatenate([voice(1), np.zeros(RATE)]), 50):  # 40 ms frames, as link.js sends
        link.hear(pcm(frame))
    kinds = [m["type"] for m in sent]
    assert kinds == ["hush", "start", "hush", "ask"], sent  # every interrupt hushes what the page still plays
    assert session.utterance.frame is FRAME and session.phase == "thinking" and session.questions == 1
    link.hear(b"")  # nothing: nothing happens
    assert len(sent) == 4


def test_a_line_the_page_could_not_open_is_a_warning_and_stops_listening(tmp_path):
    links, session = VoiceLinks(SETTINGS), VoiceSession()
    token, _ = open_line(links, make_models(tmp_path), session)
    assert isinstance(line_opened(links, token, ""), dict) and session.listening  # opened: nothing to say
    with pytest.warns(UserWarning, match="Permission denied"):
        status = line_opened(links, token, "NotAllowedError: Permission denied")
    assert "Press Start" in status and not session.listening


def test_the_frame_is_prepared_while_the_person_speaks_so_the_answer_only_adds_the_question(tmp_path):
    engine, models = make_engine(), make_models(tmp_path)
    session = VoiceSession(frame=FRAME)
    session.listen(models.turn_taker())
    link, _ = on_line(session)
    for frame in np.split(voice(0.5), 5):  # speech starts: the frame of that moment is the question's
        link.hear(pcm(frame))
    session.frame = np.zeros_like(FRAME)  # the camera moves on while the person talks
    prepare(engine, session, None)
    assert engine.vision.calls == 1 and len(engine.lm.prefills) == 1
    for frame in np.split(np.zeros(RATE, np.float32), 25):
        link.hear(pcm(frame))
    assert session.utterance.frame is FRAME
    list(answer(engine, models, session, SETTINGS))
    assert engine.vision.calls == 1  # the answer reused the prepared image


def test_over_the_line_every_sentence_is_sent_at_once_tagged_with_its_turn_and_no_file_is_kept(tmp_path):
    engine, models = make_engine(b"A cup. Red. Full."), make_models(tmp_path)
    session = asked(models)
    _, sent = on_line(session)
    updates = list(answer(engine, models, session, SETTINGS)) + list(speak(session, SETTINGS))
    spoken = [m for m in sent if isinstance(m, bytes)]
    # three sentences, none waited for: each its 16 kHz rate, one part (0) and 800 raw samples (no decode needed)
    assert len(spoken) == 3 and all(int.from_bytes(m[4:8], "little") == RATE and len(m) == 12 + 1600 for m in spoken)
    assert all(m[8:12] == bytes(4) for m in spoken)
    assert {int.from_bytes(m[:4], "little") for m in spoken} == {session.turn}
    assert not any("speaker" in u for u in updates)  # Gradio's player is not used
    assert not list(tmp_path.glob("*.wav"))  # the page has the bytes: the files are gone
    assert session.playing_until > time.monotonic() - 1  # three sentences queued one after another


def test_no_microphone_audio_after_start_is_a_warning():
    session = VoiceSession(listening=True)
    with pytest.warns(UserWarning, match="allow microphone access"):
        check_microphone(session, 0)
    session.chunks = 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_microphone(session, 0)  # audio arrived: quiet
    assert "Press Start" in status_html("ready") and "Listening" in status_html("listening")


def test_push_to_talk_empty_or_broken_recordings_warn_and_a_good_one_is_asked(tmp_path):
    session = VoiceSession(frame=FRAME)
    starts, _ = push_to_talk_started(session)
    assert starts == 1 and session.question_frame is FRAME
    with pytest.warns(UserWarning, match="recording is empty"):
        push_to_talk_stopped(session, None)
    with pytest.warns(UserWarning, match="NaN"):
        push_to_talk_stopped(session, (48_000, np.array([0.0, np.inf], np.float32)))
    assert session.utterance is None
    questions, status = push_to_talk_stopped(session, (48_000, (voice(1) * 9000).astype(np.int16)))
    assert questions == 1 and "Thinking" in status and session.utterance.frame is FRAME


def test_push_to_talk_refuses_a_long_or_foreign_file_before_it_is_decoded_and_says_why(tmp_path, monkeypatch):
    """Its endpoint takes any file from an API caller: Gradio decoded all of it (a 50 MB WAV is an hour of sound;
    with ffmpeg, any compressed format too) before the handler saw it."""
    from gradio.data_classes import FileData

    from fastvlm.speech.audio import write_wav
    from ui.inputs import Refused

    demo = create_app(make_engine(), AppSettings(voice_max_recording_s=2.0), speech=make_models(tmp_path))
    ptt = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "voice-ptt")
    for seconds in (1, 3):
        write_wav(tmp_path / f"{seconds}s.wav", 16_000, (voice(seconds) * 9000).astype(np.int16))
    (tmp_path / "song.mp3").write_bytes(b"ID3\x03\x00" + bytes(1000))
    rate, samples = ptt.preprocess(FileData(path=str(tmp_path / "1s.wav")))
    assert rate == 16_000 and len(samples) == 16_000
    decoded = []
    monkeypatch.setattr("gradio.processing_utils.audio_from_file", lambda *a, **k: decoded.append(a))
    long, foreign = (ptt.preprocess(FileData(path=str(tmp_path / name))) for name in ("3s.wav", "song.mp3"))
    assert decoded == []  # neither was decoded (was: both)
    assert isinstance(long, Refused) and "3 s long" in long.reason and "up to 2 s" in long.reason
    assert isinstance(foreign, Refused) and "not a WAV" in foreign.reason
    session = VoiceSession(frame=FRAME)
    push_to_talk_started(session)
    with pytest.warns(UserWarning, match="This recording is 3 s long"):
        questions, status = push_to_talk_stopped(session, long)
    assert questions == gr.skip(), questions
    assert session.utterance is None and "Press Start" in status


def test_stop_ends_the_answer_and_silences_the_speaker(tmp_path):
    engine, models = make_engine(b"x" * 300, delay=0.005), make_models(tmp_path)
    session = asked(models)
    updates = answer(engine, models, session, SETTINGS)
    next(updates), next(updates)
    status, speaker = stop(session)
    list(updates)
    assert engine.lm.evaluated < 100 and not engine.busy  # stopped at its next token, not after its 300
    assert speaker is None and "Press Start" in status and not session.listening


def test_the_voice_tab_is_third_or_says_why_voice_is_unavailable(tmp_path):
    engine = make_engine()
    demo = create_app(engine, speech=make_models(tmp_path))
    tabs = [b.label for b in demo.blocks.values() if isinstance(b, gr.Tab)]
    assert tabs == ["Image", "Camera snapshot", "Voice + camera", "Live"]
    demo = create_app(engine, speech=VoiceUnavailable("speech input needs faster-whisper"))
    texts = [b.value for b in demo.blocks.values() if isinstance(b, gr.Markdown)]
    assert any("Voice is unavailable" in t and "faster-whisper" in t for t in texts)
    demo = create_app(engine)
    assert "Voice + camera" not in [b.label for b in demo.blocks.values() if isinstance(b, gr.Tab)]


def test_the_voice_lines_believe_the_proxies_the_api_does(monkeypatch):
    """Behind nginx every line comes from 127.0.0.1: app.py gives the lines --trusted-proxies and
    --forwarded-header, so their per-client cap counts the forwarded client (`VoiceLinks.client`)."""
    served = []
    monkeypatch.setattr(app, "load_engine", lambda args, background=False: make_engine())
    monkeypatch.setattr("ui.launch", lambda demo, *args, **kwargs: served.append(demo))
    assert app.main(["--no-voice", "--no-api", "--no-mcp", "--trusted-proxies", "127.0.0.1",
                     "--forwarded-header", "x-real-ip"]) == 0
    api = served[0].voice_links.api
    assert (api.trusted_proxies, api.forwarded_header) == (("127.0.0.1",), "x-real-ip")


def test_voice_flags_map_onto_the_speech_config_and_a_failed_load_keeps_the_app(monkeypatch):
    args = app.build_parser().parse_args(["--whisper-model", "base", "--tts-voice", "en-GB-RyanNeural",
                                          "--end-silence-ms", "500", "--threads", "2", "--no-download",
                                          "--speech-pad-ms", "350", "--end-of-turn", "silence",
                                          "--turn-judge", "smart-turn", "--words-ahead-s", "0.8"])
    config = app.speech_config(args)
    assert (config.whisper_model, config.tts_voice, config.end_silence_ms, config.threads, config.download,
            config.speech_pad_ms, config.end_of_turn, config.turn_judge, config.words_ahead_s) == (
        "base", "en-GB-RyanNeural", 500, 2, False, 350, "silence", "smart-turn", 0.8)
    default = app.speech_config(app.build_parser().parse_args([]))
    assert (default.speech_pad_ms, default.end_of_turn, default.turn_judge, default.words_ahead_s) == (
        400, "semantic", "transcript", 0)
    assert app.load_speech(app.build_parser().parse_args(["--no-voice"])) is None

    def broken(config):
        raise ImportError("speech input needs faster-whisper: pip install faster-whisper")

    monkeypatch.setattr(SpeechModels, "load", broken)
    unavailable = app.load_speech(app.build_parser().parse_args([]))
    assert isinstance(unavailable, VoiceUnavailable) and "pip install faster-whisper" in unavailable.reason


def test_without_espeak_edge_tts_still_speaks_and_its_failure_names_both_reasons(monkeypatch):
    from fastvlm import speech
    from fastvlm.speech import SpeechConfig, SpeechUnavailable

    def no_espeak(config):
        raise SpeechUnavailable("no eSpeak NG library: pip install espeakng-loader")

    monkeypatch.setattr(speech.WhisperTranscriber, "load", classmethod(lambda cls, config: FakeTranscriber()))
    monkeypatch.setattr(speech.EspeakSpeaker, "load", classmethod(lambda cls, config: no_espeak(config)))
    monkeypatch.setattr(speech, "silero_vad", lambda: object())
    monkeypatch.setattr(speech.EdgeSpeaker, "synthesize", lambda self, text: (_ for _ in ()).throw(
        SpeechUnavailable("edge-tts failed (no connection)")))
    monkeypatch.setattr(FakeTranscriber, "source", "fake", raising=False)
    models = SpeechModels.load(SpeechConfig())
    with pytest.raises(SpeechUnavailable, match="edge-tts failed.*pip install espeakng-loader"):
        models.speaker.synthesize("Hello.")
    assert "Whisper tiny.en (fake)" in models.about


def spoken_bytes(sent: list) -> list[bytes]:
    return [m for m in sent if isinstance(m, bytes)]


def test_an_answer_begun_at_the_judges_verdict_sounds_only_once_the_end_is_confirmed(tmp_path):
    engine, models = make_engine(b"A cup. Red."), make_models(tmp_path)
    session = VoiceSession(frame=FRAME)
    session.listen(models.turn_taker(likely_events=True))
    _, sent = on_line(session)
    session.ask(voice(1.0), time.monotonic(), held_end_s=1.0)
    updates = list(answer(engine, models, session, SETTINGS))  # decoded in full while the silence goes on
    assert updates[-1]["answer"] == "A cup. Red." and not spoken_bytes(sent) and not engine.busy
    assert not session.confirm(0.5) and session.confirm(1.0)  # only the question held at 1.0 s is confirmed
    list(speak(session, SETTINGS))
    assert len(spoken_bytes(sent)) == 2


def test_speaking_on_after_the_verdict_drops_the_answer_begun_for_it(tmp_path):
    engine, models = make_engine(b"x" * 300, delay=0.005), make_models(tmp_path)
    session = VoiceSession(frame=FRAME)
    session.listen(models.turn_taker(likely_events=True))
    _, sent = on_line(session)
    session.ask(voice(1.0), time.monotonic(), held_end_s=1.0)
    updates = answer(engine, models, session, SETTINGS)
    next(updates), next(updates)
    turn = session.turn
    session.resume(1.0)  # the person went on talking: "What is written ... on the sign?"
    list(updates)
    assert session.turn == turn + 1 and session.utterance is None and not engine.busy
    assert not spoken_bytes(sent) and sent[-1] == {"type": "hush", "turn": turn + 1}


def test_a_pause_mid_question_is_answered_once_with_the_whole_question(tmp_path):
    models = make_models(tmp_path)  # the fake transcriber hears a finished question at every pause
    session = VoiceSession(frame=FRAME)
    open_line(VoiceLinks(SETTINGS), models, session)  # the page's line: answered at the verdict
    link, sent = on_line(session)
    audio = np.concatenate([voice(1.0), np.zeros(RATE // 2), voice(0.6), np.zeros(RATE)])  # 0.5 s pause mid-way
    for frame in np.array_split(audio, audio.size // 640):
        link.hear(pcm(frame))
    asks = [m for m in sent if m.get("type") == "ask"]
    assert len(asks) == 2 and session.questions == 2  # the first, at the mid-question pause, was withdrawn
    assert session.held_end_s is None and session.utterance.audio.size > 1.5 * RATE  # the whole question


def test_a_question_paused_in_stays_about_the_frame_it_began_with(tmp_path):
    """The camera moves on while a person pauses mid-question: the whole question is asked about the frame of its
    start, as the answer withdrawn at the pause was (so the engine reuses that frame's encode and prefill)."""
    models = make_models(tmp_path)
    session = VoiceSession(frame=FRAME)
    open_line(VoiceLinks(SETTINGS), models, session)
    link, sent = on_line(session)
    for part in (voice(1.0), np.zeros(RATE // 2)):  # asked at the pause
        for frame in np.array_split(part, part.size // 640):
            link.hear(pcm(frame))
    assert session.held_end_s is not None and session.utterance.frame is FRAME
    session.frame = np.zeros_like(FRAME)  # the camera moves on
    for part in (voice(0.6), np.zeros(RATE)):  # the question goes on, then ends
        for frame in np.array_split(part, part.size // 640):
            link.hear(pcm(frame))
    assert session.questions == 2 and session.held_end_s is None
    assert session.utterance.frame is FRAME and session.question_frame is None


def test_speech_over_a_playing_answer_holds_its_sound_before_it_counts_as_a_question(tmp_path):
    models = make_models(tmp_path)
    session = asked(models)
    link, sent = on_line(session)
    turn, session.playing_until = session.turn, time.monotonic() + 10  # a sentence is playing
    for frame in np.split(voice(0.16), 4):  # 160 ms of speech: short of min_speech_ms (250)
        link.hear(pcm(frame))
    assert sent == [{"type": "pause"}]  # the sound stands still now; nothing else yet
    assert session.turn == turn and session.held is not None  # not yet a question: decoding goes on
    for frame in np.split(voice(0.2), 5):  # it goes on: a question starts, the answer's decoding stops
        link.hear(pcm(frame))
    assert [m["type"] for m in sent[1:]] == ["start"] and session.turn == turn + 1  # its sound waits for the words
    assert session.held.until is not None and session.barge_ins == 1


def test_a_cough_over_a_playing_answer_holds_its_sound_and_then_lets_it_play_on(tmp_path):
    models = make_models(tmp_path)
    session = asked(models)
    link, sent = on_line(session)
    until = time.monotonic() + 10
    turn, session.playing_until = session.turn, until  # a sentence is playing
    clip = np.concatenate([voice(0.2), np.zeros(RATE // 2)])  # 200 ms of sound, then quiet
    for frame in np.split(clip, 14):
        link.hear(pcm(frame))
    assert [m["type"] for m in sent] == ["pause", "resume"] and session.turn == turn  # the same answer goes on
    assert session.held is None and session.barge_ins == 0 and session.questions == 1
    assert session.playing_until > until  # it ends later by as long as it was held


def test_speech_that_begins_as_the_answer_starts_to_sound_must_last_longer_to_stop_it(tmp_path):
    """The browser's echo canceller lets a burst of an answer's first sound through (up to 0.25 s of speech to
    the detector, docs/voice.md): in that window a burst shorter than a question leaves the answer playing, a
    longer one only holds it, and it takes 400 ms of speech to stop it; later, 150 ms of speech holds it."""
    models = make_models(tmp_path)
    session = asked(models)
    link, sent = on_line(session)
    turn, now = session.turn, time.monotonic()
    session.sound_from, session.playing_until = now - 0.3, now + 10  # the answer began to sound 0.3 s ago
    for frame in np.split(np.concatenate([voice(0.2), np.zeros(RATE // 5)]), 10):  # a 200 ms burst, then quiet
        link.hear(pcm(frame))
    assert sent == [] and session.turn == turn and session.playing_until == now + 10  # it plays on
    for frame in np.split(np.concatenate([voice(0.32), np.zeros(RATE // 2)]), 41):  # 320 ms: held, then on
        link.hear(pcm(frame))
    assert [m["type"] for m in sent] == ["pause", "resume"] and session.turn == turn
    for frame in np.split(voice(0.6), 15):  # a person speaks up then: stopped once it is 400 ms long
        link.hear(pcm(frame))
    assert [m["type"] for m in sent[2:]] == ["pause", "start"] and session.turn == turn + 1
    assert session.barge_ins == 1

    session = asked(models)
    link, sent = on_line(session)
    turn, session.sound_from, session.playing_until = session.turn, now - 5, now + 10  # 5 s into its sound
    for frame in np.split(voice(0.32), 8):
        link.hear(pcm(frame))
    assert [m["type"] for m in sent] == ["pause", "start"] and session.turn == turn + 1


@pytest.mark.parametrize("ends_in_s", [0.2, -0.3])
def test_speech_that_begins_as_the_answers_sound_ends_must_last_longer_to_be_a_question(tmp_path, ends_in_s):
    """In a reverberant room the canceller lets a burst of the answer's last word through as its sound ends (0.26-
    0.38 s of speech to the detector, docs/voice.md; heard as "in.", it was asked and answered): within the echo
    window either side of the end such a burst is no question; speech that goes on is one."""
    models = make_models(tmp_path)
    session = asked(models)
    link, sent = on_line(session)
    turn, now = session.turn, time.monotonic()
    session.sound_from, session.playing_until = now - 10, now + ends_in_s  # its sound ends 0.2 s from now / ended
    for frame in np.split(np.concatenate([voice(0.32), np.zeros(RATE // 2)]), 41):  # a 320 ms burst, then quiet
        link.hear(pcm(frame))
    assert session.turn == turn and session.barge_ins == 0 and session.questions == 1
    assert [m["type"] for m in sent] in ([], ["pause", "resume"])  # held a moment at most
    for frame in np.split(voice(0.6), 15):  # a person speaks up then: a question once it is 400 ms long
        link.hear(pcm(frame))
    assert session.turn == turn + 1 and [m["type"] for m in sent][-1] == "start"


def test_the_echo_window_opens_when_the_page_says_the_sound_began_not_when_it_was_sent(tmp_path):
    """A slow page starts playing 0.5 s after the server sent the sentence: a burst 0.3 s into its sound (0.8 s
    after the send, past the 0.6 s window) is still the canceller settling, and the answer plays on."""
    models = make_models(tmp_path)
    session = asked(models)
    link, sent = on_line(session)
    turn, now = session.turn, time.monotonic()
    session.sound_from, session.playing_until = now - 0.8, now + 10  # sent 0.8 s ago
    assert link.told(json.dumps({"type": "sounding", "turn": turn - 1}), now=now - 0.3) is None  # an older turn's
    assert session.sound_from == now - 0.8
    assert link.told(json.dumps({"type": "sounding", "turn": turn}), now=now - 0.3) is None  # sounds 0.3 s ago
    assert session.sound_from == now - 0.3
    for frame in np.split(np.concatenate([voice(0.2), np.zeros(RATE // 5)]), 10):  # a 200 ms burst, then quiet
        link.hear(pcm(frame))
    assert sent == [] and session.turn == turn  # not even held (timed from the send, 150 ms would hold it)
    for bad in ({"type": "sounding"}, {"type": "sounding", "turn": "1"}, {"type": "sounding", "turn": True},
                {"type": "dance"}):
        assert link.told(json.dumps(bad)) is not None and session.sound_from == now - 0.3


def test_the_answers_sound_begins_again_only_after_a_silence(tmp_path):
    session, speech = VoiceSession(), lambda: Speech(tmp_path / "s.wav", "espeak-ng", "en-us")
    session.play(speech(), 2.0, now=100.0, gap_s=0.1, keep=2)
    session.play(speech(), 2.0, now=101.0, gap_s=0.1, keep=2)  # sent while the first still plays
    assert session.sound_from == 100.0 and session.opening(100.9, 1.0) and not session.opening(101.5, 1.0)
    session.play(speech(), 2.0, now=110.0, gap_s=0.1, keep=2)  # after a silence: the canceller settles again
    assert session.sound_from == 110.0 and not session.opening(110.5, 0.0)


def test_the_lines_speech_start_shows_hearing_and_a_late_one_changes_nothing():
    session = VoiceSession(frame=FRAME, question_frame=FRAME, listening=True, phase="hearing")
    assert "Hearing you" in speech_started(session)
    session.phase = "thinking"  # the question already ended when the click arrived
    assert speech_started(session) == gr.skip()


def test_the_line_prepares_the_frame_of_the_first_sound_of_speech_before_the_question_is_sure(tmp_path):
    """Preparing a 1024 frame takes longer than a short question on 2 cores: it starts at the first 32 ms
    window of speech (`SpeechOnset`), 250 ms before `SpeechStarted`, with the frame of that moment."""
    session = VoiceSession(frame=FRAME)
    session.listen(make_models(tmp_path).turn_taker(onsets=True))
    prepared = []
    session.link = link = VoiceLink(session, SETTINGS, [].append,
                                    prepare=lambda s, *_: prepared.append(s.question_frame))
    link.hear(pcm(voice(0.04)))  # one window of speech: not yet a question
    session.frame = np.zeros_like(FRAME)  # the camera moves on
    deadline = time.monotonic() + 2
    while not prepared and time.monotonic() < deadline:
        time.sleep(0.01)
    assert prepared == [FRAME] and session.starts == 0
    for frame in np.split(voice(0.4), 10):
        link.hear(pcm(frame))
    while len(prepared) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert session.starts == 1 and prepared == [FRAME, FRAME]  # again at the start, for the same frame


def test_a_new_question_ends_the_wait_for_the_last_answers_sound_at_once(tmp_path):
    """The last answer's `speak` waits until its sound has played; a question over it (a barge-in) must not be
    kept waiting behind that: Gradio runs the new answer's `speak` only once the old one has returned."""
    import threading

    session = VoiceSession(phase="speaking")
    session.listen(make_models(tmp_path).turn_taker())
    session.playing_until = time.monotonic() + 30  # a long answer still sounding
    waiting = threading.Thread(target=lambda: list(speak(session, SETTINGS)), daemon=True)
    waiting.start()
    time.sleep(0.2)
    assert waiting.is_alive()  # waits while the answer plays
    session.interrupt()  # the person asks something else
    waiting.join(1.0)
    assert not waiting.is_alive(), "the old answer's speak kept waiting for its sound"


def test_over_the_line_the_first_phrase_sounds_when_it_is_synthesized_not_at_the_next_page_update(tmp_path):
    """The page's text is updated every `voice_update_s`; speech must not wait for that: the phrase is cut as its
    text arrives and sent over the line the moment it is synthesized (held until a confirmed end, if held)."""
    from dataclasses import replace

    from ui.voice.turn import answer_turn

    settings = replace(SETTINGS, voice_update_s=30)  # after the first text, no page update for 30 s
    for held in (False, True):
        engine, models = make_engine(b"You are holding a red mug. " + b"x" * 200, delay=0.01), make_models(tmp_path)
        session = VoiceSession(frame=FRAME)
        session.listen(models.turn_taker())
        session.ask(voice(1.0), time.monotonic(), held_end_s=1.0 if held else None)
        _, sent = on_line(session)
        turn = answer_turn(engine, models, session, settings)
        while not isinstance(next(turn), Answering):  # the first text is shown; the page pulls nothing more
            pass
        deadline = time.monotonic() + 2
        while not any(isinstance(m, bytes) for m in sent) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert any(isinstance(m, bytes) for m in sent) is not held
        if held:
            assert session.confirm(1.0)
            session.push()  # as `listen` does when the end is confirmed
            assert any(isinstance(m, bytes) for m in sent)
        assert models.speaker.texts[0] == "You are holding"
        turn.close()
        session.close()
