"""`python -m fastvlm bench --journeys`: every tab timed as a person uses it, engine-only (the Space case).

Each journey calls the engine as the UI does: `prepare(image, size)` in a thread on upload or capture,
`stream(Request, wait=...)` on submit, `wait=0` for live frames (`Busy` -> skipped), a `CancelToken` for Stop.

  upload_ask        upload, `typing_s` (2 s) of typing, submit -> first token after submit (the Image tab)
  upload_ask_early  the same, submitted `early_s` (0.3 s) after the upload: prepare has not finished
  snapshot          capture, `snapshot_s` (1 s), press Analyse -> first token after Analyse
  live              `live_s` (60 s) at a `cadence_s` (4 s) tick on a camera that sends a frame every 0.5 s:
                    TTFT per answered tick, answered/skipped, lag = answer complete - frame captured
  voice             spoken questions through the real VAD -> Whisper -> engine -> TTS chain (bench-voice's
                    turn, frame prepared during speech): end of speech -> first sentence's audio ready; WER.
                    The semantic end of turn (the app's default); voice_silence: the same questions, fixed 0.7 s
  turn_pauses       questions with a 0.5 s pause mid-sentence: how many each end-of-turn rule cut there
  stop              Stop (token.cancel()) -> `not engine.busy`, half-way through the encode and the prefill
  cold              a new image asked at once, no prepare (cold TTFT, for the targets)
"""

from __future__ import annotations

import argparse
import logging
import threading
import time
from dataclasses import dataclass, replace

import numpy as np

from ..engine.cancel import CancelToken
from ..engine.config import GenerationOptions
from ..engine.events import Busy, Done, FirstToken, Request
from ..speech.config import SpeechConfig
from .runs import fresh, sample_images

log = logging.getLogger(__name__)
QUESTION = "What is in the picture?"
CAMERA_EVERY_S = 0.5  # the live webcam sends its latest frame this often (ui/settings.py frame_every_s)


@dataclass(frozen=True)
class JourneySettings:
    """How long and how often each journey runs. `quick()` is the CI smoke test's setting."""

    repeats: int = 5  # runs of upload_ask, upload_ask_early, snapshot, cold; stop runs per phase
    typing_s: float = 2.0  # upload -> submit
    early_s: float = 0.3  # upload -> submit while prepare still runs
    snapshot_s: float = 1.0  # capture -> Analyse
    live_s: float = 60.0  # live journey length
    cadence_s: float = 4.0  # live tick (the tab's default)
    max_tokens: int = 32  # answer length for upload/snapshot/cold/stop
    live_max_tokens: int = 48  # ui/settings.py live_max_new_tokens
    voice_runs: int = 5  # spoken questions (bench-voice's QUESTIONS, in turn), each under both end-of-turn rules
    pause_questions: int = 20  # questions with a 0.5 s pause mid-sentence: how many each rule cuts there
    voice_chunk_s: float = 0.04  # microphone frame the voice journeys feed, as the page's line
                                 # (AppSettings.voice_chunk_s)
    voice_preemptive: bool = True  # semantic rule: the answer begun at TurnLikelyEnded (bench-voice --preemptive)
    voice_words_ahead_s: float = SpeechConfig.words_ahead_s  # the question's words heard and prefilled as spoken
    voice_slot_s: float = 12.0  # the browser's voice walk: a question every this many seconds. Each answer sounds
                                # 13 s or more (`media.ReferenceSpeaker`), so at 12 s the next question is spoken
                                # over it; with a longer slot (the report's `talked_over` 0) each is heard to its end
    voice_answer_tokens: int | None = None  # the browser's voice and barge-in walks: tokens each spoken answer
                                            # decodes (None: the first spoken piece, 5; the app's cap is 96)

    @classmethod
    def quick(cls) -> JourneySettings:
        return cls(repeats=2, typing_s=0.3, early_s=0.05, snapshot_s=0.2, live_s=3.0, cadence_s=0.5, max_tokens=8,
                   live_max_tokens=8, voice_runs=1, pause_questions=2, voice_slot_s=8.0)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> JourneySettings:
        """`--quick`'s settings or the full ones, with `--words-ahead-s`, `--voice-slot-s` and
        `--voice-answer-tokens` when given."""
        settings = cls.quick() if getattr(args, "quick", False) else cls()
        given = {"voice_words_ahead_s": getattr(args, "words_ahead_s", None),
                 "voice_slot_s": getattr(args, "voice_slot_s", None),
                 "voice_answer_tokens": getattr(args, "voice_answer_tokens", None)}
        return replace(settings, **{k: v for k, v in given.items() if v is not None})


class Frames:
    """Never-cached pictures: each call is a new upload or camera frame (np.ndarray, as the webcam sends)."""

    def __init__(self, seed: int = 0):
        self._images, self._n = sample_images(seed=seed), 0

    def __call__(self) -> np.ndarray:
        self._n += 1
        return np.array(fresh(self._images[self._n % len(self._images)], self._n))


def _request(image, size: int, max_tokens: int) -> Request:
    return Request(image, QUESTION, options=GenerationOptions(max_new_tokens=max_tokens), resolution=size)


def _first_token_after(engine, request: Request, t_submit: float, wait: float | None = None) -> dict:
    """Stream the answer to its end; seconds from `t_submit` to the first token and to the end."""
    ttft = None
    stats = None
    for event in engine.stream(request, wait=wait):
        if isinstance(event, FirstToken) and ttft is None:
            ttft = time.perf_counter() - t_submit
        elif isinstance(event, Done):
            stats = event.stats
    return {"ttft_s": ttft if ttft is not None else time.perf_counter() - t_submit,
            "end_s": time.perf_counter() - t_submit,
            "encode_s": stats.encode_s, "prefill_s": stats.prefill_s, "reused_tokens": stats.reused_tokens,
            "embedding_cached": stats.embedding_cached}


def prepare_then_ask(engine, frames: Frames, size: int, delay_s: float, max_tokens: int) -> dict:
    """Upload/capture (prepare in a thread, as the UI), `delay_s` later submit: time to first token after submit."""
    image = frames()
    prepared: dict = {}
    t_up = time.perf_counter()
    worker = threading.Thread(target=lambda: prepared.update(ok=engine.prepare(image, size),
                                                              s=time.perf_counter() - t_up), daemon=True)
    worker.start()
    time.sleep(max(0.0, t_up + delay_s - time.perf_counter()))
    row = _first_token_after(engine, _request(image, size, max_tokens), time.perf_counter())
    worker.join()
    return {**row, "prepared": bool(prepared.get("ok")), "prepare_s": prepared.get("s")}


def cold(engine, frames: Frames, size: int, max_tokens: int) -> dict:
    return _first_token_after(engine, _request(frames(), size, max_tokens), time.perf_counter())


def live(engine, frames: Frames, size: int, settings: JourneySettings) -> dict:
    """Ticks every `cadence_s` for `live_s`; each tick answers the latest camera frame with wait=0 in a thread of
    its own (as Gradio runs the tab's timer events), or counts it skipped when the engine is busy."""
    answered: list[dict] = []
    skipped = 0
    lock = threading.Lock()
    workers = []
    t0 = time.perf_counter()

    def tick(frame, t_frame: float, t_tick: float) -> None:
        nonlocal skipped
        try:
            row = _first_token_after(engine, _request(frame, size, settings.live_max_tokens), t_tick, wait=0)
        except Busy:
            with lock:
                skipped += 1
            return
        with lock:
            answered.append({**row, "lag_s": t_tick + row["end_s"] - t_frame,
                             "lag_first_token_s": t_tick + row["ttft_s"] - t_frame})

    ticks = max(1, round(settings.live_s / settings.cadence_s))
    for k in range(ticks):
        time.sleep(max(0.0, t0 + k * settings.cadence_s - time.perf_counter()))
        t_tick = time.perf_counter()
        t_frame = t0 + ((t_tick - t0) // CAMERA_EVERY_S) * CAMERA_EVERY_S  # the camera's latest frame
        workers.append(threading.Thread(target=tick, args=(frames(), t_frame, t_tick), daemon=True))
        workers[-1].start()
    for w in workers:
        w.join()
    return {"offered": ticks, "answered_runs": answered, "skipped": skipped}


def stop(engine, frames: Frames, size: int, at: str, stages: dict, max_tokens: int) -> dict:
    """Stop half-way through the encode (`at="encode"`) or the prefill: seconds from `token.cancel()` to idle.
    `stages`: median encode/prefill seconds of this engine (from the cold runs), to aim the Stop."""
    delay = stages["encode_s"] * 0.5 if at == "encode" else stages["encode_s"] + stages["prefill_s"] * 0.5
    token, done = CancelToken(), {}

    def consume() -> None:
        for event in engine.stream(_request(frames(), size, max_tokens), cancel=token):
            if isinstance(event, Done):
                done["stats"] = event.stats

    worker = threading.Thread(target=consume, daemon=True)
    worker.start()
    while not engine.busy and worker.is_alive():
        time.sleep(0.0005)
    time.sleep(delay)
    t = time.perf_counter()
    token.cancel()
    while engine.busy:
        time.sleep(0.0005)
    to_idle = time.perf_counter() - t
    worker.join()
    stats = done.get("stats")
    cancelled = stats is not None and stats.stop_reason == "cancelled"
    stopped_in = ("encode" if cancelled and stats.encode_s == 0 else
                  "prefill" if cancelled and stats.new_tokens == 0 else "after")
    return {"aimed_at": at, "stopped_in": stopped_in, "to_idle_s": to_idle, "idle": not engine.busy}


def voice(engine, frames: Frames, size: int, settings: JourneySettings, threads: int, audio_dir) -> dict:
    """bench-voice's turn (VAD -> Whisper -> engine -> TTS, frame prepared during speech), offline eSpeak NG
    voice, under each end-of-turn rule in turn for every question (the same load for both); each row adds the
    transcript's word error rate. Then the paused questions: how many each rule took for over at their pause.
    -> {"rows": {rule: rows}, "pauses": turns.cut_off(...)}"""
    from ..speech import word_error_rate
    from ..speech.espeak import find_backend
    from ..speech.turn import RULES
    from . import turns
    from . import voice as vb

    p = argparse.ArgumentParser()
    vb.add_arguments(p)
    args = p.parse_args(["--max-tokens", str(settings.max_tokens), "--tts", "espeak",
                         "--chunk-s", str(settings.voice_chunk_s), "--words-ahead-s", str(settings.voice_words_ahead_s),
                         "--preemptive" if settings.voice_preemptive else "--no-preemptive"])
    config = SpeechConfig(whisper_model=args.whisper_model, threads=threads, end_silence_ms=args.end_silence_ms,
                          speech_pad_ms=args.speech_pad_ms, download=False, audio_dir=audio_dir,
                          words_ahead_s=args.words_ahead_s)
    transcriber, speaker, vad, questions = vb._speech(config, args.tts, args.question_wpm)
    take = vb.turn_takers(vad, transcriber, config, args.early_stt_ms)
    rows: dict[str, list[dict]] = {rule: [] for rule in RULES}
    for i in range(settings.voice_runs):
        audio, end_s, text, _ = questions[i % len(questions)]
        for rule in RULES:
            row = vb._one_turn(engine, transcriber, speaker, take(rule), audio, end_s, frames(), size, args)
            rows[rule].append({**row, "question": text, "wer": word_error_rate(text, row["transcript"])})
    backend = find_backend()
    paused = [turns.speak(backend, pair, args.question_wpm) for pair in turns.PAUSED[: settings.pause_questions]]
    return {"rows": rows, "pauses": turns.cut_off(take, RULES, paused, args.chunk_s)}
