"""`python -m fastvlm bench-voice`: from the end of a spoken question to the first audible answer, stage by stage.

Each run does what the Voice + camera tab does. A question spoken by eSpeak NG (2-3 s) and 2.5 s of silence go
to a `TurnTaker` (`--end-of-turn`, fastvlm/speech/turn.py) in real time, one `--chunk-s` chunk per `--chunk-s`
seconds as a streaming microphone sends them. On `SpeechOnset` (the first 32 ms of speech) a fresh camera frame
is prepared (encoded + prefilled) in a thread while the question goes on; when the turn ends, its transcript
(begun at the pause that ended it) is taken, the answer streams, and its first spoken piece is synthesized in a
thread while decoding goes on.
Stages (medians over the kept runs):

  VAD tail   true end of speech -> the turn known to be over. silence: `--end-silence-ms` plus up to a chunk;
             semantic: a 120 ms pause, Whisper on the speech so far and the judge's verdict, up to a chunk;
             with --preemptive the 550 ms that confirm it (turn_confirm_silence_ms), the answer made meanwhile
  STT        waiting for Whisper after that. Transcribing starts at the pause that ends the question (silence
             rule: its first `--early-stt-ms` pause), so only the rest is waited for (`stt_compute_s`: its length)
  TTFT       the engine's time to first token (the image work was done during speech). `--preemptive`
             (semantic rule): the answer is begun at `TurnLikelyEnded`, while the silence that confirms the
             end still runs, and played at `TurnEnded`; a `TurnResumed` cancels it
  sentence   first token -> the first spoken piece complete: a phrase or a sentence (`--first-phrase-words`,
             as the app). Random weights never end either: the piece is cut at `--sentence-tokens`, by default
             the token at which the app's chunker releases it on `REFERENCE_ANSWER` (5: "You are holding")
  TTS        synthesizing the first sentence; a piece cut at that default is spoken as the reference's words
             (random weights say "w75540 w75540 ...", which eSpeak NG reads out as numbers: 30-50 ms, not 2-3)
  total      true end of speech -> the first sentence's audio file is ready to play and the turn is over
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import statistics
import threading
import time
from pathlib import Path

import numpy as np

from ..engine.cancel import CancelToken
from ..engine.config import GenerationOptions
from ..engine.events import Done, FirstToken, Request, TextDelta
from .first_piece import REFERENCE_ANSWER, first_piece, first_piece_tokens  # noqa: F401 (named here too)
from .people import recordings
from .runs import fresh, sample_images
from .stats import machine_info, positive_int, summarize, write_report
from .turns import CUT_S

log = logging.getLogger(__name__)
QUESTIONS = ("What am I holding in my right hand?", "Can you read the text on this page?",
             "What color is the shirt I am wearing?", "Is there anything unusual on the table?",
             "How many people can you see behind me?")  # fmt: skip
STAGES = ("vad_tail_s", "stt_s", "ttft_s", "sentence_s", "tts_s", "total_s")
TARGET_S = {512: 0.8, 1024: 1.0}  # end of speech -> first sound, median, per size: the voice journey's (issue #22)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--resolutions", type=int, nargs="+", default=[1024, 512])
    p.add_argument("--num-runs", type=positive_int, default=5)
    p.add_argument("--warmup-runs", type=int, default=1)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--sentence-tokens", type=int, default=None,
                   help="cut the first spoken piece at this many tokens (default: first_piece_tokens())")
    p.add_argument("--first-phrase-words", type=int, default=3,
                   help="the first spoken piece may be a phrase of this many words (0: a sentence), as the app")
    p.add_argument("--chunk-s", type=float, default=0.25,
                   help="microphone chunk length (the tab's voice line sends 0.04 s frames)")
    p.add_argument("--end-of-turn", choices=("semantic", "silence"), default="semantic",
                   help="semantic: a judge at 120 ms pauses (as the app); silence: --end-silence-ms")
    p.add_argument("--turn-judge", choices=("transcript", "smart-turn"), default="transcript")
    p.add_argument("--end-silence-ms", type=int, default=700, help="silence that ends a question (silence rule)")
    p.add_argument("--speech-pad-ms", type=int, default=400, help="audio kept around the speech (as app.py)")
    p.add_argument("--early-stt-ms", type=int, default=300, help="start transcribing at a pause this long (0: off)")
    p.add_argument("--preemptive", action=argparse.BooleanOptionalAction, default=True,
                   help="semantic rule: begin the answer when the judge says finished, play it once the turn ends")
    p.add_argument("--words-ahead-s", type=float, default=0.0,
                   help="once the frame is prepared, hear the question's words every this many s of it and prefill "
                        "them (e.g. 0.8; 0: off, the app's default: SpeechConfig.words_ahead_s)")
    p.add_argument("--whisper-model", default="tiny.en")
    p.add_argument("--question-wpm", type=int, default=140, help="eSpeak NG rate: 140 makes 2.2-2.5 s questions")
    p.add_argument("--questions", choices=("espeak", "people"), default="espeak",
                   help="people: the 9 questions people ask in bench-turns' recordings (downloaded by pip if missing)")
    p.add_argument("--tts", choices=("fallback", "espeak"), default="fallback",
                   help="fallback: edge-tts, then eSpeak NG (as the app); espeak: offline only")
    p.add_argument("--max-load", type=float, default=1.5, help="wait until the 1-minute load is below this")
    p.add_argument("--wait-quiet", type=float, default=300, help="seconds to wait for a quiet machine per size")
    p.add_argument("--report-json", type=Path)


def run(args: argparse.Namespace, engine_factory) -> int:
    from ..speech import SpeechConfig

    config = SpeechConfig(whisper_model=args.whisper_model, threads=args.threads, end_silence_ms=args.end_silence_ms,
                          speech_pad_ms=args.speech_pad_ms, end_of_turn=args.end_of_turn, turn_judge=args.turn_judge,
                          words_ahead_s=args.words_ahead_s)
    try:
        transcriber, speaker, vad, questions = _speech(config, args.tts, args.question_wpm, args.questions)
    except recordings.PeopleMissing as e:  # offline, and the recordings never downloaded
        log.error("%s", e)
        return 2
    take_turns = turn_takers(vad, transcriber, config, args.early_stt_ms)
    engine = engine_factory(args)
    images = sample_images()
    report = {"machine": machine_info(args.threads), "model": engine.describe(),
              "target_s": {str(k): v for k, v in TARGET_S.items()},
              "questions_s": [round(q[1] - q[3], 2) for q in questions], "by_resolution": {}}
    try:
        for size in args.resolutions:
            load_before = _wait_quiet(args.max_load, args.wait_quiet)
            rows = []
            for i in range(args.warmup_runs + args.num_runs):
                audio, end_s, text, _ = questions[i % len(questions)]
                frame = np.array(fresh(images[i % len(images)], i + 100 * size))  # never cached
                row = _one_turn(engine, transcriber, speaker, take_turns(args.end_of_turn), audio, end_s, frame,
                                size, args)
                row["question"] = text
                if i >= args.warmup_runs:
                    rows.append(row)
                log.info("%d px run %d: %s", size, i, {k: round(v, 3) for k, v in row.items() if k in STAGES})
            heard = [r for r in rows if not r["cut"]]  # a question cut off has no time to its answer
            report["by_resolution"][str(size)] = {
                "load_before": load_before, "load_after": os.getloadavg()[0], "runs": rows,
                "cut": len(rows) - len(heard), "summary": {k: summarize([r[k] for r in heard]) for k in STAGES}}
    finally:
        engine.close()
    if args.report_json:  # first: the measurements are kept whatever the printout does
        write_report(args.report_json, report)
    _print(report)
    return 0


def _speech(config, tts: str, wpm: int, source: str = "espeak"):
    """Whisper, Silero VAD, the speaker, and the questions as (16 kHz audio, end of speech s, text, start s):
    eSpeak NG's, or people's (`source="people"`)."""
    from ..speech import EspeakSpeaker, FallbackSpeaker, WhisperTranscriber, silero_vad, to_mono_16k
    from ..speech.espeak import find_backend

    if source == "people":
        recordings.fetch()  # before any model loads: offline and never downloaded is one line (PeopleMissing)
    transcriber = WhisperTranscriber.load(config)
    speaker = FallbackSpeaker.load(config) if tts == "fallback" else EspeakSpeaker.load(config)
    if source == "people":
        return transcriber, speaker, silero_vad(), recordings.questions()
    backend = find_backend()
    lead, tail = np.zeros(8_000, np.float32), np.zeros(40_000, np.float32)  # 0.5 s before, 2.5 s after
    questions = []
    for text in QUESTIONS:
        spoken = to_mono_16k(backend.sample_rate, backend.synthesize(text, config.espeak_voice, wpm))
        loud = np.flatnonzero(np.abs(spoken) > 0.02)  # (k,) where the voice is: its true start and end
        start_s, end_s = (lead.size + loud[0]) / 16_000, (lead.size + loud[-1] + 1) / 16_000
        questions.append((np.concatenate([lead, spoken, tail]), end_s, text, start_s))
    return transcriber, speaker, silero_vad(), questions


def turn_takers(vad, transcriber, config, early_stt_ms: int):
    """rule -> a new `TurnTaker` for one question (the judge, a model for smart-turn, is loaded once)."""
    from ..speech import TurnTaker, load_judge

    judge = load_judge(config.turn_judge)
    return lambda rule: TurnTaker(vad, transcriber, config, judge, rule, early_stt_ms, likely_events=True, onsets=True)


def _one_turn(engine, transcriber, speaker, taker, audio, end_s, frame, size, args) -> dict:
    """Play `audio` into the turn taker in real time, then answer the question as the tab does; the stage times."""
    from ..speech import HeardSoFar, SpeechOnset
    from ..speech.turn import TurnLikelyEnded, TurnResumed
    from .turns import hear_turn  # looked up at each call: tests stand in for it

    prepared: dict = {}
    early: dict = {"cancelled": 0}  # the answer begun at TurnLikelyEnded (--preemptive)
    ahead: list[dict] = []  # the question's words heard and prefilled while it was spoken

    def on_event(event) -> None:
        if isinstance(event, SpeechOnset) and not prepared:  # prepare the frame while the person talks
            prepared["from_s"] = event.at_s
            then = functools.partial(taker.want_words, event.at_s)  # as the app: words ahead once the frame is ready
            threading.Thread(target=_prepare, args=(engine, frame, size, prepared, "", then), daemon=True).start()
        elif isinstance(event, HeardSoFar):
            ahead.append({"words": event.words})
            threading.Thread(target=_prepare, args=(engine, frame, size, ahead[-1], event.words), daemon=True).start()
        elif isinstance(event, TurnLikelyEnded) and args.preemptive:
            early.update(end_s=event.end_s, token=CancelToken(), row={})
            early["thread"] = threading.Thread(target=_answer_early, args=(engine, speaker, event, frame, size, args,
                                                                          early["token"], early["row"]))
            early["thread"].start()
        elif isinstance(event, TurnResumed) and early.get("end_s") == event.end_s:
            early["token"].cancel()
            early["cancelled"] += 1
            early.pop("end_s")

    t0 = time.perf_counter()
    ended, at = hear_turn(taker, audio, args.chunk_s, on_event=on_event)
    t_end = t0 + at
    if ended is None:
        raise RuntimeError("the turn taker never heard the end of the question")
    spoken_end = t0 + end_s
    transcript, stt_s, answer = _answer_at_end(engine, transcriber, speaker, ended, t_end, early, frame, size, args)
    row = {"vad_tail_s": float(t_end - spoken_end), "stt_s": stt_s, "stt_compute_s": transcript.elapsed_s,
           "early_stt_used": ended.transcript is not None, "ended_by": ended.by,
           "verdict": ended.verdict.reason if ended.verdict else None, "transcript": transcript.text,
           "cut": bool(ended.end_s < end_s - CUT_S),  # the turn ended at a pause before the question's end
           "preemptive": early.get("end_s") == ended.end_s, "preemptive_cancelled": early["cancelled"], **answer,
           "total_s": float(max(answer["done_at"], t_end) - spoken_end)}  # heard when ready and the turn is over
    row["prepared_before_end"] = prepared.get("done_at", float("inf")) <= t_end
    row["prepare_s"] = prepared.get("elapsed_s")
    row["words_ahead"] = [{**a, "done_before_end": a.get("done_at", float("inf")) <= t_end} for a in ahead]
    return row


def _answer_at_end(engine, transcriber, speaker, ended, t_end: float, early: dict, frame, size, args):
    """(transcript, s waited for it after the end, the answer's times) for the question `ended`: the answer begun
    at its pause if there was one, else one made now from the transcript."""
    if early.get("end_s") == ended.end_s:  # the answer begun at the pause is the one to play
        early["thread"].join()
        row = early["row"]
        transcript = row.pop("transcript")
        return transcript, max(0.0, row.pop("heard_at") - t_end), row
    transcript = ended.transcript.result() if ended.transcript is not None else transcriber.transcribe(ended.audio)
    stt_s = time.perf_counter() - t_end
    return transcript, stt_s, _answer(engine, speaker, transcript.text or "What is this?", frame, size, args)


def _answer_early(engine, speaker, likely, frame, size, args, token, out: dict) -> None:
    """The answer to the question that `likely` (a TurnLikelyEnded) says is finished, begun before the end."""
    transcript = likely.transcript.result()
    out.update(transcript=transcript, heard_at=time.perf_counter())
    out.update(_answer(engine, speaker, transcript.text or "What is this?", frame, size, args, token))


def _prepare(engine, frame, size, out: dict, words: str = "", then=None) -> None:
    """The frame (and `words`) prepared and timed into `out`; `then()` once it was."""
    t = time.perf_counter()
    out["ok"] = engine.prepare(frame, size, words=words)
    out["done_at"], out["elapsed_s"] = time.perf_counter(), time.perf_counter() - t
    if out["ok"] and then is not None:
        then()


def _answer(engine, speaker, question, frame, size, args, cancel=None) -> dict:
    """Stream the answer; speak the first sentence in a thread as soon as it is complete; `done_at`: its audio
    is ready."""
    from ..speech import SentenceChunker

    chunker, text, tokens, spoken = SentenceChunker(first_phrase_words=args.first_phrase_words), "", 0, {}
    cap, said = (args.sentence_tokens, None) if args.sentence_tokens else first_piece(args.first_phrase_words)
    t_first = t_sentence = None
    worker = None
    request = Request(frame, question, options=GenerationOptions(max_new_tokens=args.max_tokens), resolution=size)
    stats = None
    for event in engine.stream(request, cancel=cancel):
        if isinstance(event, FirstToken):
            ttft, t_first = event.ttft_s, time.perf_counter()
        elif isinstance(event, TextDelta):
            tokens += 1
            text += event.text
            sentences = chunker.feed(event.text)
            if worker is None and (sentences or tokens >= cap):
                t_sentence = time.perf_counter()
                piece = sentences[0] if sentences else said or text
                worker = threading.Thread(target=_speak, args=(speaker, piece, spoken))
                worker.start()
        elif isinstance(event, Done):
            stats = event.stats
    if worker is None and cancel is not None and cancel.cancelled:  # a preemptive answer not wanted after all
        return {"cancelled": True}
    if worker is None:  # a short answer: the whole of it is the first sentence
        t_sentence = time.perf_counter()
        worker = threading.Thread(target=_speak, args=(speaker, text or "Nothing.", spoken))
        worker.start()
    worker.join()
    return {"ttft_s": ttft, "sentence_s": t_sentence - (t_first or t_sentence), "tts_s": spoken["elapsed_s"],
            "done_at": spoken["done_at"], "voice": spoken["engine"],
            "encode_s": stats.encode_s if stats else None, "prefill_s": stats.prefill_s if stats else None,
            "reused_tokens": stats.reused_tokens if stats else None}


def _speak(speaker, sentence: str, out: dict) -> None:
    t = time.perf_counter()
    speech = speaker.synthesize(sentence)
    out["done_at"], out["elapsed_s"], out["engine"] = time.perf_counter(), time.perf_counter() - t, speech.engine
    speech.delete()


def _wait_quiet(max_load: float, wait_s: float) -> float:
    """Wait (up to `wait_s`) until the 1-minute load average is below `max_load`; the load when measuring starts."""
    deadline = time.monotonic() + wait_s
    while (load := os.getloadavg()[0]) >= max_load and time.monotonic() < deadline:
        time.sleep(5)
    if load >= max_load:
        log.warning("the machine never got quiet: load %.2f >= %.2f; measuring anyway", load, max_load)
    return load


def _print(report: dict) -> None:
    m = report["model"]
    print(f"voice: {m.get('model')} · {report['machine'].get('threads', '?')} threads · questions "
          f"{', '.join(f'{s:.1f}' for s in report['questions_s'])} s · target "
          f"{', '.join(f'≤ {t} s @{k}' for k, t in report['target_s'].items())}")
    for size, r in report["by_resolution"].items():
        if not r["summary"]["total_s"]:
            print(f"{size:>5} px: every question was cut off before its end ({len(r['runs'])})")
            continue
        s = {k: r["summary"][k]["median"] for k in STAGES}
        voices = sorted({row["voice"] for row in r["runs"]})
        ahead = sum(bool(row["prepared_before_end"]) for row in r["runs"])
        early = sum(bool(row["early_stt_used"]) for row in r["runs"])
        target = report["target_s"].get(size)
        verdict = f"no target at {size} px" if target is None else \
            f"{'meets' if s['total_s'] <= target else 'misses'} the {target} s target"
        print(f"{size:>5} px: VAD tail {s['vad_tail_s'] * 1000:.0f} ms · STT {s['stt_s'] * 1000:.0f} ms · TTFT "
              f"{s['ttft_s'] * 1000:.0f} ms · sentence {s['sentence_s'] * 1000:.0f} ms · TTS {s['tts_s'] * 1000:.0f}"
              f" ms ({'/'.join(voices)}) -> total {s['total_s']:.2f} s median ({verdict}; p90 "
              f"{r['summary']['total_s']['p90']:.2f} s) · image prepared during speech {ahead}/{len(r['runs'])} · "
              f"early transcript used {early}/{len(r['runs'])} · cut off {r.get('cut', 0)} (untimed) · "
              f"load {r['load_before']:.2f} -> {r['load_after']:.2f}")
        four = statistics.median(sum(row[k] for k in ("vad_tail_s", "stt_s", "ttft_s", "tts_s"))
                                 for row in r["runs"] if not row.get("cut"))  # reports before stop 60: no cut
        print(f"        VAD tail + STT + TTFT + TTS (a first sentence complete at its first token): {four:.2f} s")
