"""Timed engine runs: cold (a new image each run), after `prepare`, and follow-up questions."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from ..engine.config import GenerationOptions
from ..engine.events import Request, Result, Turn
from ..engine.preprocess import load_image

log = logging.getLogger(__name__)

IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif", ".tif", ".tiff"}
DEFAULT_PROMPTS = ("Describe the image.", "What is in the picture?", "Is there any text visible?")


@dataclass(frozen=True)
class RunRecord:
    kind: str  # cold | prepared | follow_up
    preprocess_s: float
    encode_s: float
    prefill_s: float
    ttft_s: float
    decode_tokens_per_s: float
    total_s: float
    tokens: int
    prompt_tokens: int
    reused_tokens: int
    embedding_cached: bool = False  # the image embedding came from the engine's cache (never, for a cold run)

    @classmethod
    def of(cls, kind: str, r: Result) -> RunRecord:
        s = r.stats
        return cls(kind, s.preprocess_s, s.encode_s, s.prefill_s, s.ttft_s, s.tokens_per_s, s.total_s,
                   s.new_tokens, s.prompt_tokens, s.reused_tokens, s.embedding_cached)


def find_images(sources: list[Path]) -> list[Path]:
    found: list[Path] = []
    for src in sources:
        if src.is_dir():
            found += sorted(p for p in src.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
        else:
            found.append(src)
    return found


def sample_images(n: int = 3, seed: int = 0) -> list[Image.Image]:
    """Photo-sized (4:3) pictures with smooth structure, for runs without an --images argument."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:480, 0:640] / 640.0
    out = []
    for _ in range(n):
        f = rng.uniform(2, 9, 3)
        rgb = [(np.sin(xx * f[c] * 3.1 + yy * f[(c + 1) % 3] * 2.3) + 1) * 127.5 for c in range(3)]
        out.append(Image.fromarray(np.stack(rgb, -1).astype(np.uint8)))
    return out


PREPARED_RUNS = 2**31  # fresh() numbers of the prepared images: a range apart from the cold runs


def fresh(image: Image.Image, run: int) -> Image.Image:
    """The same picture with its first four values set to `run` (32 bits, little-endian), so each run number
    gives another image and no cache knows it: every run is a cold run."""
    arr = np.array(image)
    flat = arr.reshape(-1)  # a view: np.array's copy is contiguous
    stamp = np.frombuffer(int(run).to_bytes(4, "little"), np.uint8)
    n = min(stamp.size, flat.size)
    flat[:n] = stamp[:n]
    return Image.fromarray(arr)


def timed_runs(engine, images, prompts, *, runs: int, warmup: int, size: int, max_tokens: int,
               follow_up: bool, prepared: bool) -> list[RunRecord]:
    opts = GenerationOptions(max_new_tokens=max_tokens)
    records: list[RunRecord] = []
    for i in range(warmup + runs):
        img = fresh(load_image(images[i % len(images)]), i)
        q = prompts[i % len(prompts)]
        keep = i >= warmup
        first = engine.answer(Request(img, q, options=opts, resolution=size))
        if keep:
            records.append(RunRecord.of("cold", first))
        if follow_up:
            r = engine.answer(Request(img, "Tell me more.", history=(Turn(q, first.text),), options=opts,
                                      resolution=size))
            keep and records.append(RunRecord.of("follow_up", r))
        if prepared:
            img2 = fresh(img, PREPARED_RUNS + i)
            engine.prepare(img2, size)
            r = engine.answer(Request(img2, q, options=opts, resolution=size))
            keep and records.append(RunRecord.of("prepared", r))
        log.info("run %d/%d: ttft %.3f s", i + 1, warmup + runs, first.stats.ttft_s)
    return records
