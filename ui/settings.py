"""What the app lets a person choose, and its limits. `app.py` maps flags onto these; tests shrink them."""

from __future__ import annotations

from dataclasses import dataclass

from fastvlm.speech.intent import ACKNOWLEDGEMENTS, REPEAT_PHRASES, STOP_PHRASES

CONTINUE_MAX_S = 5.0  # the longest `voice_continue_s`: a question begun later after another never goes on with it


@dataclass(frozen=True)
class AppSettings:
    title: str = "FastVLM on CPU"
    max_new_tokens: int = 256  # default of the Image tab's slider
    max_new_tokens_limit: int = 1024  # the slider's top
    snapshot_max_new_tokens: int = 128
    live_max_new_tokens: int = 48  # live answers stay short so the next frame is not skipped
    live_interval_s: float = 4.0  # default seconds between live frames (slider 1-10)
    live_feed_size: int = 20  # answers kept in the live feed, newest first
    frame_every_s: float = 0.5  # how often the live webcam sends its latest frame
    camera_resolution: int | None = None  # snapshot + live image size; None: the engine's configured one
    ui_update_s: float = 0.05  # coalesce text deltas into at most one page update per this many seconds
    # events one client (its address; behind a trusted proxy the forwarded one) may have waiting in the page's queue
    # (64 for everyone) at once; more are refused as a full queue is, so one visitor's script cannot keep everyone
    # else out. A person's page has one or two waiting at most; a school behind one NAT address shares it. This
    # machine's own clients (loopback) are not counted. 0: no such limit (ui/queue_share.py)
    max_waiting_per_client: int = 8
    # webcam frames decoded at once, app-wide: the three webcams' endpoints take any file from an API caller, a 0.2 MB
    # PNG of 64 megapixels (the limit) takes ~0.6 GB while it is decoded, and Gradio runs up to 40 decodes at once
    max_frame_decodes: int = 2
    # Gradio copies every upload, webcam frame and spoken sentence into its cache folder (GRADIO_TEMP_DIR);
    # every `cache_sweep_s` the app's files there older than `cache_max_age_s` are deleted (an image still in
    # a conversation is kept: each question refreshes it). Files held at once: about creation rate x (age + sweep).
    cache_sweep_s: int = 60
    cache_max_age_s: int = 1800
    # past this total, the oldest of those files go too at each sweep, so uploads sent faster than they age out
    # cannot fill the disk (the most it holds: this + what arrives in one sweep_s); 0: by age only
    cache_max_bytes: int = 2 * 1024**3
    # -- Voice + camera --
    voice_max_new_tokens: int = 96  # spoken answers stay short
    # a question follows on from at least the last this many turns (question + answer as decoded) since Start:
    # "What is written on it?" after "What am I holding?"; at most twice as many less one (the window moves this
    # many at a time, VoiceSession.conversation). They go before the question's frame, prefilled with it while it
    # is spoken (only the newest, save when the window moves on); 0: every question stands alone
    voice_history_turns: int = 3  # app.py's --voice-turns
    # the spoken answer's text on the page at most this often: each update costs CPU its decoding needs (0.05 s
    # updates made the first sound ~0.13 s later through the page on 2 cores, docs/voice.md); speech never waits
    voice_update_s: float = 0.3
    voice_chunk_s: float = 0.04  # audio in each frame the page's voice line sends (ui/voice/link.js)
    voice_early_stt_ms: int = 300  # silence rule: transcribing starts at a pause this long (0: at the end silence)
    voice_echo_margin_s: float = 0.6  # the microphone stays deaf this long after the spoken answer should have ended
    # the answer's first spoken piece may be a phrase of at least this many words ("You are holding | a red mug."),
    # so the voice starts before the first sentence is complete (fastvlm/speech/sentences.py); 0: whole sentences
    voice_first_phrase_words: int = 3
    voice_sentence_gap_s: float = 0.15  # pause between spoken sentences (covers the browser's start-up per file)
    voice_keep_audio: int = 4  # spoken-sentence files kept per person; older ones are deleted
    # push to talk: a longer recording is refused before it is decoded, saying so (Whisper hears up to 30 s of it)
    voice_max_recording_s: float = 60.0
    voice_mic_check_s: float = 4.0  # after Start, warn when no microphone audio has arrived within this
    # The browser's own processing of the microphone (getUserMedia constraints, set explicitly: ui/voice/capture.py).
    # Echo cancellation on (barge-in needs it); noise suppression and gain control off: through the voice line they
    # cost Whisper words ("the shirt I am" heard as "not sure time") that it hears without them (docs/voice.md)
    voice_echo_cancellation: bool = True  # removes the app's own voice from the microphone (barge-in needs it)
    voice_barge_in: bool = True  # speech over the spoken answer stops it (speech and decoding) and is the next question
    voice_barge_in_ms: int = 150  # speech this long over the answer holds its sound (asking still needs min_speech_ms)
    voice_resume_s: float = 0.2  # held speech that ends short of a question (a cough): sounds on after this quiet
    # speech with words that begins this soon after a question's end goes on with it (a person paused longer than
    # the end of turn waits): the two are one question, asked again whole. 0: off
    voice_continue_s: float = 1.5
    # the browser's echo canceller lets a burst of an answer's first sound through (up to 0.25 s of speech to the
    # detector, docs/voice.md), and in a reverberant room one of its last word (up to 0.38 s): speech that begins
    # within voice_echo_settle_s of the answer starting to sound, or either side of its end, stops it (or is a
    # question) only once it has lasted voice_echo_speech_ms. 0 s: off
    voice_echo_settle_s: float = 0.6
    voice_echo_speech_ms: int = 400
    # a spoken turn that is only these phrases ("Stop.", "Never mind.", "Okay, that's enough.") stops the answer it was
    # said over and asks nothing; one of only acknowledgements ("Okay.", "Yeah.", "Thanks.") asks nothing and the
    # answer plays on, as after an "um"; one of only repeat phrases ("Say that again?", "Pardon?") says the latest
    # answer again from its start (fastvlm/speech/intent.py). Empty: such words are a question like any other
    voice_stop_phrases: tuple[str, ...] = STOP_PHRASES
    voice_repeat_phrases: tuple[str, ...] = REPEAT_PHRASES
    voice_acknowledgements: tuple[str, ...] = ACKNOWLEDGEMENTS
    voice_noise_suppression: bool = False  # the browser's noise suppression
    voice_auto_gain: bool = False  # the browser's automatic gain control

    def __post_init__(self) -> None:
        if not 1 <= self.live_interval_s <= 10:
            raise ValueError("live_interval_s must be between 1 and 10 seconds")
        if not 1 <= self.max_new_tokens <= self.max_new_tokens_limit:
            raise ValueError("max_new_tokens must be between 1 and max_new_tokens_limit")
        if not 0.02 <= self.voice_chunk_s <= 1:
            raise ValueError("voice_chunk_s must be between 0.02 and 1 second")
        if self.voice_barge_in_ms < 32:
            raise ValueError("voice_barge_in_ms must be at least 32 (one VAD window)")
        if not 0 <= self.voice_resume_s <= 5:
            raise ValueError("voice_resume_s must be between 0 and 5 seconds")
        if not 0 <= self.voice_continue_s <= CONTINUE_MAX_S:
            raise ValueError(f"voice_continue_s must be between 0 (off) and {CONTINUE_MAX_S:.0f} seconds")
        if not 0 <= self.voice_echo_settle_s <= 5:
            raise ValueError("voice_echo_settle_s must be between 0 (off) and 5 seconds")
        if self.voice_echo_speech_ms < 0:
            raise ValueError("voice_echo_speech_ms must be 0 or more")
        if self.voice_early_stt_ms and self.voice_early_stt_ms < 32:
            raise ValueError("voice_early_stt_ms must be 0 (off) or at least 32 (one VAD window)")
        if self.max_waiting_per_client < 0:
            raise ValueError("max_waiting_per_client must be 0 (no limit) or more")
        if self.max_frame_decodes < 1:
            raise ValueError("max_frame_decodes must be at least 1")
        if self.cache_sweep_s < 1 or self.cache_max_age_s < 1 or self.cache_max_bytes < 0:
            raise ValueError("cache_sweep_s and cache_max_age_s must be at least 1 second, cache_max_bytes >= 0")
        if self.voice_first_phrase_words < 0:
            raise ValueError("voice_first_phrase_words must be 0 (whole sentences) or more")
        if self.voice_max_recording_s <= 0:
            raise ValueError("voice_max_recording_s must be positive")
        if self.voice_history_turns < 0:
            raise ValueError("voice_history_turns must be 0 (every question stands alone) or more")
        if self.voice_keep_audio < 1 or self.voice_max_new_tokens < 1:
            raise ValueError("voice_keep_audio and voice_max_new_tokens must be at least 1")
