"""`python -m fastvlm bench`: TTFT and decode speed, against a bare baseline in the same process."""

from __future__ import annotations

import argparse
import logging
import statistics
import time
from dataclasses import asdict
from pathlib import Path

from .acoustics import ROOMS
from .plot import draw
from . import runs
from .runs import DEFAULT_PROMPTS, find_images, sample_images, timed_runs
from .stats import host_clock, machine_info, positive_int, stolen_since, summarize, write_report

log = logging.getLogger(__name__)
METRICS = ("preprocess_s", "encode_s", "prefill_s", "ttft_s", "decode_tokens_per_s", "total_s", "tokens")
JOURNEYS_IGNORE = {"images": [], "prompts": None, "soak": 0, "follow_up": False, "prepared": False}
RAW_FLOOR = {"num_runs": 5, "warmup_runs": 1, "max_tokens": 32}  # with --journeys: the --raw floor's runs only
MIN_VOICE_SLOT_S = 8.0  # --quick's: a question (up to 2.5 s after its 0.5 s lead-in) and its answer's first sound


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--images", type=Path, nargs="*", default=[], help="image files or folders (default: generated)")
    p.add_argument("--prompts", type=Path, help="text file, one prompt per line")
    p.add_argument("--num-runs", type=positive_int, default=RAW_FLOOR["num_runs"])
    p.add_argument("--warmup-runs", type=int, default=RAW_FLOOR["warmup_runs"])
    p.add_argument("--max-tokens", type=int, default=RAW_FLOOR["max_tokens"])
    p.add_argument("--follow-up", action="store_true", help="ask a second question on each image")
    p.add_argument("--prepared", action="store_true", help="also time questions on an image prepared ahead")
    p.add_argument("--raw", action="store_true", help="time bare session.run + llama.cpp loops; print ratios")
    p.add_argument("--soak", type=int, default=0, metavar="N", help="then run N mixed requests; report RSS, temp files")
    p.add_argument("--journeys", action="store_true",
                   help="time each tab as a person uses it (upload->ask, snapshot, live, voice, stop), engine-only")
    p.add_argument("--quick", action="store_true", help="with --journeys: short runs, few repeats (CI smoke test)")
    p.add_argument("--no-voice", action="store_true", help="with --journeys: leave out the voice journey")
    p.add_argument("--words-ahead-s", type=float, default=None, metavar="S",
                   help="with --journeys: hear a question's words every S s while it is spoken and prefill them "
                        "(e.g. 0.8; default: the app's, SpeechConfig.words_ahead_s, 0: off)")
    p.add_argument("--browser", action="store_true",
                   help="with --journeys: walk them through the real page in headless Chromium on this machine "
                        "(the laptop case; needs playwright and /usr/bin/chromium)")
    p.add_argument("--voice-slot-s", type=float, default=None, metavar="S",
                   help="with --journeys --browser: the voice walk asks a question every S s (default 12: over the "
                        "answer before it, which sounds 13 s or more; longer: each answer heard to its end first, as "
                        "the report's talked_over 0 shows)")
    p.add_argument("--voice-answer-tokens", type=positive_int, default=None, metavar="N",
                   help="with --journeys --browser: each spoken answer decodes N tokens (default: its first spoken "
                        "piece, 5 tokens, as random weights never end a phrase; the app's cap is 96), so a question "
                        "asked over an answer meets its decode")
    p.add_argument("--echo", type=int, default=0, metavar="N",
                   help="with --journeys --browser: N answers played with the page's speaker looped into its "
                        "microphone and nobody speaking; counts those barge-in cut off (needs PulseAudio)")
    p.add_argument("--echo-room", nargs="?", const="office", choices=sorted(ROOMS), metavar="ROOM",
                   help="with --echo: the answers reach the microphone through a modelled loudspeaker in a room "
                        "instead of straight: office (the default: 0.4 s of reverberation), reverberant (0.8 s) "
                        "or harsh (0.8 s, the echo as loud as the sound played, clipping); "
                        "bench.acoustics.ROOMS")
    p.add_argument("--questions", choices=("espeak", "people"), default="espeak",
                   help="with --journeys --browser: who asks the voice and barge-in walks' questions into the fake "
                        "microphone (people: bench-turns' recordings, downloaded by pip if missing)")
    p.add_argument("--compare-vision", type=Path, nargs="+", metavar="ONNX",
                   help="time these vision graphs against the first, in turns, on ONNX Runtime and OpenVINO at "
                        "--resolution (default 512 and 1024); needs no language model")
    p.add_argument("--report-json", type=Path)
    p.add_argument("--plot", type=Path, help="PNG of the TTFT distribution and stage breakdown (journeys: their bars)")


def journeys_conflict(args: argparse.Namespace) -> str | None:
    """The flags --journeys would ignore, said in one line (None: none given)."""
    ignored = dict(JOURNEYS_IGNORE) | ({} if args.raw and not args.browser else RAW_FLOOR)
    given = [f"--{k.replace('_', '-')}" for k, default in ignored.items() if getattr(args, k) != default]
    if not given:
        return None
    why = "" if args.raw and not args.browser else \
        " (--num-runs, --warmup-runs, --max-tokens: only with --raw, for its engine-only runs)"
    return f"--journeys times each tab with its own settings (--quick for short runs): drop {', '.join(given)}{why}"


def _refused(args: argparse.Namespace) -> str | None:
    """Why these flags cannot go together (and what to add), or None."""
    if args.browser and not args.journeys:
        return "--browser walks the journeys: add --journeys"
    if args.journeys and (conflict := journeys_conflict(args)):
        return conflict
    if args.echo and not args.browser:
        return "--echo is a walk through the page: add --journeys --browser"
    if args.echo_room and not args.echo:
        return "--echo-room is how the echo walk's answers reach the microphone: add --echo N"
    if args.voice_slot_s is not None and not args.browser:
        return "--voice-slot-s paces the page's voice walk: add --journeys --browser"
    if args.voice_slot_s is not None and args.voice_slot_s < MIN_VOICE_SLOT_S:
        return f"--voice-slot-s {args.voice_slot_s:g} is too short for a question and its answer: give at least " \
               f"{MIN_VOICE_SLOT_S:g}"
    if args.voice_answer_tokens is not None and not args.browser:
        return "--voice-answer-tokens is how long the page's spoken answers run: add --journeys --browser"
    if args.questions != "espeak" and not args.browser:
        return ("--questions chooses who speaks into the page's microphone: add --journeys --browser "
                "(engine-only: bench-voice --questions people)")
    return None


def run(args: argparse.Namespace, engine_factory) -> int:
    if refused := _refused(args):
        log.error("%s", refused)
        return 2
    if args.compare_vision:
        return run_compare_vision(args)
    if args.journeys:
        return run_journeys(args, engine_factory)
    try:
        images, prompts = _inputs(args)
    except ValueError as e:
        log.error("%s", e)
        return 2
    t = time.perf_counter()
    engine = engine_factory(args)
    load_s = time.perf_counter() - t
    size = args.resolution or engine.resolution
    try:
        records = timed_runs(engine, images, prompts, runs=args.num_runs, warmup=args.warmup_runs, size=size,
                             max_tokens=args.max_tokens, follow_up=args.follow_up, prepared=args.prepared)
        rows = [asdict(r) for r in records]
        report = {"machine": machine_info(args.threads), "model": engine.describe(), "resolution": size,
                  "load_and_warm_up_s": load_s, "runs": rows, "summary": _summaries(rows)}
        if args.raw:
            report["raw"] = _raw(engine, images, prompts, args, size)
            report["ratios"] = _ratios(report["summary"].get("cold", {}), report["raw"])
        if args.soak:
            from .soak import soak

            report["soak"] = {**asdict(s := soak(engine, [load for load in _loaded(images)], args.soak, size)),
                              "rss_growth": s.rss_growth}
    finally:
        engine.close()
    _print(report)
    if args.report_json:
        write_report(args.report_json, report)
    if args.plot:
        draw(rows, args.plot, f"{report['model']['model']} @ {size}, {args.threads} threads")
    return 0


def _inputs(args: argparse.Namespace) -> tuple[list, list[str]]:
    """--images and --prompts, read before the model loads; a ValueError names the flag and the fix."""
    missing = [str(p) for p in args.images if not p.exists()]
    if missing:
        raise ValueError(f"--images: no such file or folder: {', '.join(missing)}")
    images = find_images(args.images) if args.images else sample_images()
    if not images:
        raise ValueError(f"--images: no image files ({', '.join(sorted(runs.IMAGE_SUFFIXES))}) in "
                         f"{', '.join(map(str, args.images))}; name image files or a folder holding some")
    if args.prompts and not args.prompts.is_file():
        raise ValueError(f"--prompts: no such file: {args.prompts} (a text file, one prompt per line)")
    prompts = args.prompts.read_text().split("\n") if args.prompts else list(DEFAULT_PROMPTS)
    return images, [p for p in prompts if p.strip()] or list(DEFAULT_PROMPTS)


def _loaded(images):
    from ..engine.preprocess import load_image

    return [load_image(i) for i in images]


def _summaries(rows: list[dict]) -> dict:
    kinds = sorted({r["kind"] for r in rows})
    return {k: {m: summarize([r[m] for r in rows if r["kind"] == k]) for m in METRICS} for k in kinds}


def _raw(engine, images, prompts, args, size) -> dict:
    from .raw import RawBaseline

    raw = RawBaseline(engine)
    runs = [raw.run(images[i % len(images)], prompts[i % len(prompts)], size, args.max_tokens)
            for i in range(args.warmup_runs + args.num_runs)][args.warmup_runs:]
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def _ratios(cold: dict, raw: dict) -> dict:
    if not cold:
        return {}
    return {"ttft_engine_over_raw": cold["ttft_s"]["median"] / raw["ttft_s"],
            "decode_engine_over_raw": cold["decode_tokens_per_s"]["median"] / raw["tokens_per_s"]}


def _print(report: dict) -> None:
    print(f"model {report['model']['model']} @ {report['resolution']} · "
          f"load+warm-up {report['load_and_warm_up_s']:.2f} s")
    for kind, s in report["summary"].items():
        ttft, dec = s["ttft_s"], s["decode_tokens_per_s"]
        print(f"{kind:>10}: TTFT median {ttft['median'] * 1000:.0f} ms (p90 {ttft['p90'] * 1000:.0f}, min "
              f"{ttft['min'] * 1000:.0f}) · encode {s['encode_s']['median'] * 1000:.0f} ms · prefill "
              f"{s['prefill_s']['median'] * 1000:.0f} ms · decode {dec['median']:.1f} tok/s")
    if "raw" in report:
        raw, r = report["raw"], report["ratios"]
        print(f"       raw: TTFT {raw['ttft_s'] * 1000:.0f} ms (encode {raw['encode_s'] * 1000:.0f}, prefill "
              f"{raw['prefill_s'] * 1000:.0f}) · decode {raw['tokens_per_s']:.1f} tok/s")
        print(f"    ratios: TTFT engine/raw {r.get('ttft_engine_over_raw', 0):.3f} · decode engine/raw "
              f"{r.get('decode_engine_over_raw', 0):.3f}")
    if "soak" in report:
        s = report["soak"]
        print(f"      soak: {s['requests']} requests, RSS {s['rss_start_mib']:.0f} -> {s['rss_end_mib']:.0f} MiB "
              f"({s['rss_growth'] * 100:+.1f} %), peak {s['peak_rss_mib']:.0f} MiB, temp files left: "
              f"{len(s['temp_files_left'])}")


def run_journeys(args: argparse.Namespace, engine_factory) -> int:
    """`bench --journeys`: the report's `journeys` object (see fastvlm.bench.journeys), targets met, raw floor."""
    import os

    from .journey_report import TARGETS, draw_journeys, print_journeys, run_all, verdicts
    from .journeys import JourneySettings

    if args.browser:
        from .browser.run import run

        return run(args, engine_factory)
    settings = JourneySettings.from_args(args)
    engine = engine_factory(args)
    size = args.resolution or engine.resolution
    report = {"machine": machine_info(args.threads), "model": engine.describe(), "resolution": size,
              "settings": asdict(settings), "load_before": os.getloadavg()[0]}
    host = host_clock()
    try:
        report["journeys"] = run_all(engine, size, settings, args.threads, voice=not args.no_voice)
        if args.raw:
            report["raw"] = _raw(engine, sample_images(), list(DEFAULT_PROMPTS), args, size)
    finally:
        engine.close()
    report["load_after"] = os.getloadavg()[0]
    report.update(stolen_since(host))
    report["targets"], report["targets_met"] = TARGETS, verdicts(report["journeys"], size)
    print_journeys(report)
    if args.report_json:
        write_report(args.report_json, report)
    if args.plot:
        draw_journeys(report, args.plot)
    return 0


def run_compare_vision(args: argparse.Namespace) -> int:
    """`bench --compare-vision A B ...`: encode times of the graphs, in turns, per runtime and size."""
    from .vision_compare import compare, print_rows

    missing = [str(g) for g in args.compare_vision if not g.is_file()]
    if missing:
        raise SystemExit(f"--compare-vision: no such file: {', '.join(missing)}")
    sizes = (args.resolution,) if args.resolution else (512, 1024)
    report = {"machine": machine_info(args.threads), "vision_compare": compare(
        args.compare_vision, sizes, args.threads, max(args.num_runs, 1))}
    m = report["machine"]
    print(f"{m['cpu']} ({', '.join(m['cpu_features'])}) · {args.threads} threads")
    print_rows(report["vision_compare"])
    if args.report_json:
        write_report(args.report_json, report)
    return 0
