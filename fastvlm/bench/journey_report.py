"""Running the journeys in order, their summaries against the issue's targets, the printout and the plot."""

from __future__ import annotations

import logging
import statistics
import tempfile
from pathlib import Path

from PIL import Image, ImageDraw

from . import journeys as j
from .stats import summarize
from .voice import TARGET_S as VOICE_TARGET_S

log = logging.getLogger(__name__)

# Targets on a 2-vCPU AVX-512 machine, real-shape models, default settings (issue #13; voice: issue #22). Seconds.
# Each is judged on the statistic it names (median_s, p90_s, lag_s: the median lag); the printout states it.
VOICE_RATIO = 0.65  # the semantic end of turn's first sound, at most this share of the fixed silence rule's
TARGETS = {
    "upload_ask": {"median_s": 0.2},
    "upload_ask_early": {},
    "snapshot": {"median_s": 0.2},
    "live": {"skipped_share": 0.10, "lag_s": 4.0},
    "voice": {"median_s": VOICE_TARGET_S, "over_silence": VOICE_RATIO},  # bench-voice judges its turn on the same
    "voice_silence": {},
    "turn_pauses": {"cut": 1, "never_ended": 0},  # a paused question must end, after its pause
    "stop": {"p90_s": 0.3},  # Stop must be quick every time, not half the time
    "cold": {"median_s": {512: 0.6, 1024: 2.0}},
}
# Through the page (`bench --journeys --browser`, the laptop case of issue #22): the voice's first sound at 512,
# and barge-in (speech over the answer -> its sound stopped)
BROWSER_TARGETS = {**TARGETS, "voice": {"median_s": {512: 1.0}}, "barge_in": {"p90_s": 0.3},
                   "echo": {"stopped": 0, "heard": 0}}  # answers cut off by their own voice, or it taken for a question


def timing(values: list[float]) -> dict:
    """median_s, p90_s, min_s, max_s, n of `values` (the shape of every journey in the report)."""
    s = summarize(values)
    return {"median_s": s["median"], "p90_s": s["p90"], "min_s": s["min"], "max_s": s["max"], "n": s["n"]}


def stop_summary(stops: list[dict]) -> dict:
    """The `stop` journey: Stop -> idle over all runs, and apart for those aimed mid-encode and mid-prefill."""
    return {**timing([r["to_idle_s"] for r in stops]), "runs": stops,
            **{f"mid_{at}": timing([r["to_idle_s"] for r in stops if r["aimed_at"] == at])
               for at in ("encode", "prefill")}}


def run_all(engine, size: int, settings: j.JourneySettings, threads: int, voice: bool = True) -> dict:
    """Every journey once over, in the order a person would meet them; the `journeys` object of the report."""
    frames = j.Frames(seed=size)
    out: dict = {}
    cold = [j.cold(engine, frames, size, settings.max_tokens) for _ in range(settings.repeats + 1)][1:]  # 1 warm-up
    stages = {k: statistics.median(r[k] for r in cold) for k in ("encode_s", "prefill_s")}
    out["cold"] = {**timing([r["ttft_s"] for r in cold]), **stages, "runs": cold}
    for key, delay in (("upload_ask", settings.typing_s), ("upload_ask_early", settings.early_s),
                       ("snapshot", settings.snapshot_s)):
        rows = [j.prepare_then_ask(engine, frames, size, delay, settings.max_tokens) for _ in range(settings.repeats)]
        out[key] = {**timing([r["ttft_s"] for r in rows]), "delay_s": delay, "runs": rows}
        log.info("%s: median %.3f s", key, out[key]["median_s"])
    live = j.live(engine, frames, size, settings)
    answered = live["answered_runs"]
    out["live"] = {**timing([r["ttft_s"] for r in answered] or [float("nan")]), "offered": live["offered"],
                   "answered": len(answered), "skipped": live["skipped"], "cadence_s": settings.cadence_s,
                   "lag_s": statistics.median([r["lag_s"] for r in answered]) if answered else None,
                   "lag_p90_s": summarize([r["lag_s"] for r in answered]).get("p90"), "runs": answered}
    stops = [j.stop(engine, frames, size, at, stages, settings.max_tokens) for at in ("encode", "prefill")
             for _ in range(settings.repeats)]
    out["stop"] = stop_summary(stops)
    if voice:
        with tempfile.TemporaryDirectory(prefix="fastvlm-journey-tts-") as audio_dir:
            spoken = j.voice(engine, frames, size, settings, threads, Path(audio_dir))
        for key, rule in (("voice", "semantic"), ("voice_silence", "silence")):
            rows = spoken["rows"][rule]
            heard = [r["total_s"] for r in rows if not r["cut"]]  # a question cut off has no time to its answer
            out[key] = {**timing(heard or [float("nan")]), "cut": len(rows) - len(heard),
                        "wer": statistics.fmean(r["wer"] for r in rows), "end_of_turn": rule, "runs": rows}
        out["voice"]["over_silence"] = out["voice"]["median_s"] / out["voice_silence"]["median_s"]
        pauses = spoken["pauses"]
        out["turn_pauses"] = {"cut": pauses["semantic"]["cut"], "never_ended": pauses["semantic"]["never_ended"],
                              "of": pauses["semantic"]["of"], "cut_silence": pauses["silence"]["cut"],
                              "never_ended_silence": pauses["silence"]["never_ended"], "by_rule": pauses}
    return out


def verdicts(journeys: dict, size: int, targets: dict = TARGETS) -> dict[str, bool]:
    """Which `targets` the measured journeys meet (a journey without a target, or not run, is left out)."""
    met: dict[str, bool] = {}
    for key, target in targets.items():
        got = journeys.get(key)
        if not got or not target:
            continue
        checks = []
        for name, limit in target.items():
            limit = limit.get(size) if isinstance(limit, dict) else limit
            if limit is None:
                continue
            value = got["skipped"] / max(got["offered"], 1) if name == "skipped_share" else got.get(name)
            checks.append(value is not None and value <= limit)
        if checks:
            met[key] = all(checks)
    return met


def print_journeys(report: dict) -> None:
    m, size = report["machine"], report["resolution"]
    driver = " · through the page in headless Chromium" if report.get("driver") == "browser" else ""
    print(f"journeys @ {size} px{driver} · {report['model'].get('model')} · {report['model'].get('vision_runtime')} · "
          f"{m['cpu']} ({', '.join(m['cpu_features'])}) · {m['threads']} threads · load {report['load_before']:.2f}"
          f"{_stolen(report.get('cpu_steal_share'))}")
    met, targets = report["targets_met"], report.get("targets", TARGETS)
    for key, r in report["journeys"].items():
        extra = ""
        if key == "live":
            extra = f" · answered {r['answered']}/{r['offered']}, skipped {r['skipped']}, lag {r['lag_s'] or 0:.2f} s"
        elif key.startswith("voice"):
            extra = f" · WER {r['wer']:.2f} (no target) · end of turn: {r.get('end_of_turn', 'as the app')}"
            if "over_silence" in r:
                extra += f" · {r['over_silence']:.2f}× the fixed-silence rule"
            if r.get("cut"):
                extra += f" · {r['cut']} cut off before the end of speech (not timed)"
                if r.get("cut_answered_again"):
                    extra += (f", {r['cut_answered_again']} of them answered again {r['cut_again_median_s']:.2f} s "
                              "after the end (median)")
            if r.get("page_share_median_s") is not None:
                extra += f" · the page's share {r['page_share_median_s']:.2f} s"
        verdict = {True: " · meets", False: " · MISSES"}.get(met.get(key), "")
        verdict = f"{verdict} target {target_text(key, size, targets)}" if verdict else ""
        if key.startswith("echo"):
            heard = f", {r['heard']} taken for a question" if "heard" in r else ""  # reports before 2026-12-06
            print(f"{key:>17}: {r['stopped']}/{r['answers']} answers cut off by their own voice{heard} ({r['stops']} "
                  f"stops; echo cancellation {'on' if r['echo_cancellation'] else 'off'}){verdict}")
            continue
        if key == "turn_pauses":
            print(f"{key:>17}: cut at a 0.5 s pause mid-sentence: semantic {r['cut']}/{r['of']}, fixed silence "
                  f"{r['cut_silence']}/{r['of']}; never ended: semantic {r.get('never_ended', 0)}, fixed silence "
                  f"{r.get('never_ended_silence', 0)}{verdict}")
            continue
        print(f"{key:>17}: median {r['median_s']:.3f} s · p90 {r['p90_s']:.3f} s{extra}{verdict}")
    if "raw" in report:
        raw = report["raw"]
        print(f"{'raw floor':>17}: encode {raw['encode_s']:.3f} s + prefill {raw['prefill_s']:.3f} s = TTFT "
              f"{raw['ttft_s']:.3f} s · cold engine/raw {report['journeys']['cold']['median_s'] / raw['ttft_s']:.3f}")


W, ROW, PAD = 900, 34, 160


def _limits(key: str, size: int, targets: dict) -> dict[str, float]:
    """The journey's limits at this resolution, by statistic."""
    out = {}
    for name, limit in targets.get(key, {}).items():
        limit = limit.get(size) if isinstance(limit, dict) else limit
        if limit is not None:
            out[name] = limit
    return out


def target_text(key: str, size: int, targets: dict = TARGETS) -> str:
    """The target with the statistic it is judged on: 'median ≤ 0.2 s', 'p90 ≤ 0.3 s', 'skipped ≤ 10 %, lag ≤ 4.0 s'."""
    def one(name: str, limit: float) -> str:
        if name == "skipped_share":
            return f"skipped ≤ {limit:.0%}"
        if name == "over_silence":
            return f"≤ {limit}× the fixed-silence rule"
        return f"{name.removesuffix('_s')} ≤ {limit} s" if name.endswith("_s") else f"{name} ≤ {limit}"
    return ", ".join(one(name, limit) for name, limit in _limits(key, size, targets).items())


def _target(key: str, resolution: int, targets: dict) -> float | None:
    """The journey's time target in seconds at this resolution, median or p90 (None: no target)."""
    limits = _limits(key, resolution, targets)
    return limits.get("median_s", limits.get("p90_s"))


def draw_journeys(report: dict, path: Path) -> Path:
    """Horizontal bars: median (solid) and p90 (outline) of each journey, the target as a red tick."""
    rows = [(k, r) for k, r in report["journeys"].items()
            if "median_s" in r and r["median_s"] == r["median_s"]]  # timed, and not NaN
    img = Image.new("RGB", (W, 60 + ROW * len(rows) + 20), "white")
    d = ImageDraw.Draw(img)
    m = report["machine"]
    d.text((10, 8), f"{report['model'].get('model')} @ {report['resolution']} px, {m['threads']} threads, "
                    f"{report['model'].get('vision_runtime')} · {m['cpu']}"
                    + (" · through the page in headless Chromium" if report.get("driver") == "browser" else ""),
           fill="black")
    d.text((10, 26), "seconds: median (bar), p90 (outline), target (red)", fill="black")
    limits = {key: _target(key, report["resolution"], report.get("targets", TARGETS)) for key, _ in rows}
    scale = max([0.5] + [r["p90_s"] for _, r in rows] + [t for t in limits.values() if t is not None]) * 1.1

    def px(seconds: float) -> float:
        return PAD + (W - PAD - 60) * seconds / scale

    for i, (key, r) in enumerate(rows):
        y = 50 + i * ROW
        d.text((10, y + 8), key, fill="black")
        d.rectangle((PAD, y + 4, px(r["p90_s"]), y + ROW - 8), outline=(66, 133, 244))
        d.rectangle((PAD, y + 4, px(r["median_s"]), y + ROW - 8), fill=(66, 133, 244))
        d.text((px(r["p90_s"]) + 6, y + 8), f"{r['median_s']:.2f}", fill="black")
        limit = limits[key]
        if limit is not None:
            d.line((px(limit), y, px(limit), y + ROW - 4), fill=(220, 0, 0), width=3)
    path.parent.mkdir(parents=True, exist_ok=True)
    img.save(path)
    return path


def _stolen(share: float | None) -> str:
    """The host's share of this machine's CPU time during the run, where the system says."""
    return "" if share is None else f" · {100 * share:.1f} % of the CPU time stolen by the host"
