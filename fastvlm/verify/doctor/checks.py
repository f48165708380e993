"""Checks that run the models, over engine-like objects (`answer(Request)`, `.vision`, `.lm`, `.config`,
`resolution`, `resolutions()`), so tests can pass engines built on fakes.

- known answers: a red disc -> the answer names red; big printed digits -> the answer contains them;
  two different images, same question -> two different answers;
- vision gate: a candidate encoder (the default runtime, or an int8 file) against the ONNX Runtime f32 one:
  the smallest cosine of the embeddings over the drawn images (an int8 file is held to the converter's own gate,
  `convert.int8.COSINE_GATE`), and whether the greedy answers agree;
- quantization: the chosen GGUF against a BF16 one (`compare_quant`).

Every answer is greedy and at most ANSWER_TOKENS long, so the cost is bounded.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...convert.int8 import COSINE_GATE, min_cosine, nan_min
from ...engine import preprocess
from ...engine.config import GenerationOptions
from ...engine.events import Request, Result
from . import images
from .report import Section

ANSWER_TOKENS = 24
RUNTIME_COSINE_MIN = 0.99  # default vision runtime vs ONNX Runtime f32: smallest cosine over the drawn images
INT8_COSINE_MIN = COSINE_GATE  # int8 vision file vs the f32 one: the converter's gate on the smallest cosine (0.999);
# and identical greedy known answers
QUANT_TOP1_MIN = 0.85  # chosen GGUF vs the BF16 one: next-token agreement at least this...
QUANT_KL_MAX = 0.10  # ...and mean KL(bf16 || chosen) at most this (nats)


@dataclass(frozen=True)
class KnownAnswer:
    name: str
    draw: Callable[[], object]  # () -> PIL image
    question: str
    expect: str  # what a right answer does, in words
    accept: Callable[[str], bool]


def names_red(answer: str) -> bool:
    return re.search(r"\bred\b", answer.lower()) is not None


def has_digits(answer: str, digits: str = images.DIGITS) -> bool:
    return digits in re.sub(r"\D", "", answer)


CASES = (
    KnownAnswer("red disc", images.red_disc, "What color is the circle? Answer with one word.", "names red", names_red),
    KnownAnswer("digits", images.digits, "What number is written in the image? Answer with the number only.",
                f"contains {images.DIGITS}", has_digits),
)
DESCRIBE = "Describe the image in one sentence."
FIX_WRONG = ("the model files are not FastVLM's or were damaged: download them again (python -m fastvlm download), "
             "or reconvert with python -m fastvlm convert; try --exact to rule out reduced precision")


def answer(engine, image, question: str, size: int) -> Result:
    """One greedy answer of at most ANSWER_TOKENS tokens at `size`."""
    opts = GenerationOptions(max_new_tokens=ANSWER_TOKENS, temperature=0.0, seed=0)
    return engine.answer(Request(image, question, options=opts, resolution=size))


def ask(engine, image, question: str, size: int) -> str:
    return answer(engine, image, question, size).text.strip()


def _quote(text: str, n: int = 80) -> str:
    return repr(text if len(text) <= n else text[: n - 1] + "…")


def known_answers(engine, section: Section, sizes: tuple[int, ...]) -> dict[tuple[str, int], str]:
    """Each case at each size: a ✓ or ✗ line per answer; returns the answers by (case, size)."""
    answers = {}
    for size in sizes:
        for case in CASES:
            text = answers[case.name, size] = ask(engine, case.draw(), case.question, size)
            section.add("ok" if case.accept(text) else "fail", f"{case.name} at {size}",
                        f"{_quote(text)} ({case.expect})", FIX_WRONG)
    return answers


def distinct_answers(engine, section: Section, size: int) -> None:
    """The same question about two different images must not get the same answer (an encoder that ignores
    its input, or embeddings that never reach the language model, would)."""
    a = ask(engine, images.red_disc(), DESCRIBE, size)
    b = ask(engine, images.digits(), DESCRIBE, size)
    section.add("ok" if a != b else "fail", f"two images at {size}", f"{_quote(a, 50)} vs {_quote(b, 50)}",
                "the image does not reach the answer: check that vision and llm come from the same model")


def embedding_cosines(reference, candidate, size: int) -> dict[str, float]:
    """Cosine of two encoders' embeddings (N, D), flattened, per drawn image."""
    out = {}
    for name, img in images.drawn_images().items():
        pixels = preprocess.to_pixels(img, size)  # (1, 3, S, S)
        out[name] = min_cosine([reference.encode(pixels)], [candidate.encode(pixels)])
    return out


def with_vision(engine, vision):
    """An engine like `engine` on another vision encoder, sharing its language model. Only safe when the
    engine was loaded with kv_reuse=False (no KV snapshots keyed by an image's content)."""
    if engine.config.kv_reuse:
        raise ValueError("with_vision needs an engine loaded with kv_reuse=False")
    return type(engine)(vision, engine.lm, engine.config)


def vision_gate(reference, candidate, section: Section, label: str, cosine_min: float, must_agree: bool,
                reference_answers: dict[str, str] | None = None, candidate_answers: dict[str, str] | None = None,
                fix: str = "") -> bool:
    """Compare two engines' vision: the smallest cosine over the drawn images (>= cosine_min: one image the
    candidate gets wrong fails it) and the greedy known answers at the reference's default size (identical when
    `must_agree`, else a warning). True: passed."""
    size = reference.resolution
    cos = embedding_cosines(reference.vision, candidate.vision, size)
    worst = nan_min(list(cos.values()))  # NaN: fails below
    per = ", ".join(f"{k} {v:.5f}" for k, v in cos.items())
    ok_cos = worst >= cosine_min
    section.add("ok" if ok_cos else "fail", f"{label}: embeddings at {size}",
                f"min cosine {worst:.5f} (gate >= {cosine_min}; {per})", fix)
    ref = reference_answers or {c.name: ask(reference, c.draw(), c.question, size) for c in CASES}
    got = candidate_answers or {c.name: ask(candidate, c.draw(), c.question, size) for c in CASES}
    differ = [f"{k}: {_quote(ref[k], 40)} vs {_quote(got[k], 40)}" for k in ref if ref[k] != got.get(k)]
    if not differ:
        section.add("ok", f"{label}: greedy answers", f"identical on {', '.join(ref)}")
    else:
        section.add("fail" if must_agree else "warn", f"{label}: greedy answers differ", "; ".join(differ),
                    fix if must_agree else "reduced precision can flip a close token; --exact runs f32 everywhere")
    return ok_cos and (not differ or not must_agree)


def quant_check(quantized: Path, reference: Path, section: Section, threads: int | None = None,
                compare=None) -> None:
    """The chosen GGUF against a BF16 one: next-token agreement and mean KL against the thresholds."""
    if compare is None:
        from ..quant_check import compare_quant as compare
    q = compare(Path(quantized), Path(reference), threads=threads)
    ok = q.top1_agreement >= QUANT_TOP1_MIN and q.mean_kl <= QUANT_KL_MAX
    section.add("ok" if ok else "fail", "quantization", f"{q.summary()} (gate: agreement >= {QUANT_TOP1_MIN:.0%}, "
                f"mean KL <= {QUANT_KL_MAX})",
                "this quantization changes many next tokens: use a finer one (convert --quant q8_0) "
                f"or {reference.name}")
