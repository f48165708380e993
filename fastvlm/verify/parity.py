"""Does our engine compute what FastVLM computes? transformers vs ONNX + GGUF + our prompt and splice.

`run_parity` builds random-weight FastVLMs (`random_model`), converts them with the converter, and runs
each case through transformers and our `Engine` on the same pixels (`preprocess.to_pixels`) and token ids:
- strict (F32 GGUF, f32 KV cache, flash attention off): identical greedy tokens, first-step logits within 1e-3;
- default (F16 GGUF, f16 KV cache, flash attention auto, as the app runs): teacher-forced logits within 0.1;
- fast (default + the automatic vision runtime: OpenVINO in bf16 where available): its logits are reported,
  not judged (a tiny random model amplifies the bf16 vision error ~30x, far more than a trained one).
In every mode the image embeddings' cosine with torch must be >= 0.999 (a wrong or foreign vision.onnx fails
even where the logits are not judged).
It also checks that two different images give different answers (else the check proves nothing) and that
the checkpoint's Hugging Face tokenizer gives the same ids as the engine (llama.cpp on the GGUF) for the whole
prompt: the one the run fed, and prompts of questions with what plain ASCII does not show (`TOKENIZER_QUESTIONS`).
`check_converted` runs the default mode on a real checkpoint and its converted files.
"""

from __future__ import annotations

import logging
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from fastvlm.engine import preprocess, prompt
from fastvlm.engine.config import EngineConfig
from fastvlm.engine.kv import Tokens
from fastvlm.engine.plan import tokenize_segments

from ..convert._deps import require
from ..convert.int8 import sample_images
from .compare import CaseResult, Probe, run_case
from .reference import reference_config

log = logging.getLogger(__name__)

QUESTION = "Describe the image."
TOKENIZER_QUESTIONS = (  # typed text the run's question does not show: decomposed accents, CJK, emoji, NBSP, digits
    "Is this cafe\u0301 open? \u732b\u304c\u597d\u304d \U0001f642",
    "Wie viel kostet 12,50\u00a0\u20ac?\n\tDon't  WE'LL \u0661\u0662",
)
STRICT_LOGITS, DEFAULT_LOGITS = 1e-3, 0.1
# check_converted on Q8_0 / BF16 files: a gross-error gate (measured <= 0.55 on random weights, a wrong model 6-8;
# trained weights were never measured here, so it leaves room for their larger logits)
QUANT_LOGITS = 3.0
CONVERTED_LOGITS = {"f32": DEFAULT_LOGITS, "f16": DEFAULT_LOGITS, "bf16": QUANT_LOGITS, "q8_0": QUANT_LOGITS}
MODES = {  # GGUF type, f32 KV cache, flash attention, vision runtime
    "strict": ("f32", True, False, "onnxruntime"),
    "default": ("f16", False, None, "onnxruntime"),
    "fast": ("f16", False, None, "auto"),  # auto: OpenVINO (bf16 where the CPU has it) when installed
}
COSINE_GATE = 0.999  # every mode: image embeddings' cosine with torch (f32 ONNX: 1.00000; bf16: >= 0.9996)
RESOLUTION = {"tiny": 256, "full-vision": 512, "0.5b": 1024}


@dataclass(frozen=True)
class ParityReport:
    shape: str
    resolution: int
    new_tokens: int
    cases: tuple[CaseResult, ...]
    images_matter: bool | None  # the reference answers differ between the two images (None: not judged)
    tokenizer_agrees: bool  # HF tokenizer ids == the engine's for the whole prompt, each question
    gates: dict = field(default_factory=lambda: {"strict": STRICT_LOGITS, "default": DEFAULT_LOGITS})
    seconds: float = 0.0

    def failures(self) -> list[str]:
        out = []
        if self.images_matter is False:
            out.append("two different images gave the same answer: the image has no effect")
        if not self.tokenizer_agrees:
            out.append("the Hugging Face tokenizer and the engine (llama.cpp) tokenize a prompt differently")
        for c in self.cases:
            where = f"{c.mode} seed {c.seed} {c.image}"
            if c.mode == "strict":
                if c.agreed < self.new_tokens:
                    out.append(f"{where}: tokens agree for {c.agreed} of {self.new_tokens}")
                if not c.first_logits_diff <= self.gates["strict"]:  # `not <=`: NaN fails
                    out.append(f"{where}: first-step logits differ by {c.first_logits_diff:.2e}")
            elif c.mode in self.gates and not c.forced_logits_diff <= self.gates[c.mode]:
                out.append(f"{where}: teacher-forced logits differ by {c.forced_logits_diff:.3f}")
            if not c.vision_cosine >= COSINE_GATE:  # every mode, whatever the GGUF; NaN fails
                out.append(f"{where}: image embeddings' cosine {c.vision_cosine:.5f} < {COSINE_GATE}")
        return out

    @property
    def passed(self) -> bool:
        return not self.failures()

    def summary(self) -> str:
        lines = [f"parity {self.shape} @ {self.resolution}px, {self.new_tokens} new tokens, {self.seconds:.1f}s"]
        for c in self.cases:
            lines.append(f"  {c.mode:8} seed {c.seed} {c.image:6}: tokens {c.agreed}/{len(c.reference_tokens)}, "
                         f"first logits {c.first_logits_diff:.1e}, forced logits {c.forced_logits_diff:.1e} "
                         f"(top-1 {c.forced_top1_agree:.0%}), vision {c.vision_diff:.1e} "
                         f"cos {c.vision_cosine:.5f} [{c.vision_runtime}], "
                         f"margin {c.min_margin:.2g}")
        modes = {c.mode for c in self.cases}
        judged = ", ".join(f"{m} <= {g:g}" for m, g in self.gates.items() if m in modes) or "none"
        lines.append(f"  images matter: {self.images_matter}; tokenizer agrees: {self.tokenizer_agrees}; "
                     f"logits gates: {judged}; vision cosine >= {COSINE_GATE}")
        fails = self.failures()
        lines.append("PASS" if not fails else "FAIL\n  " + "\n  ".join(fails))
        return "\n".join(lines)


@contextmanager
def open_engine(vision: Path, llm: Path, resolution: int, kv_f32: bool, flash_attn: bool | None, threads: int,
                runtime: str = "onnxruntime"):
    """An `Engine` on the files with its language model wrapped in a recording `Probe`."""
    from fastvlm.engine.engine import Engine
    from fastvlm.engine.lm import LlamaLM
    from fastvlm.engine.vision_runtimes import load_vision

    config = EngineConfig(vision_path=vision, llm_path=llm, resolution=resolution, threads=threads, n_ctx=2048,
                          kv_f32=kv_f32, flash_attn=flash_attn)
    lm = LlamaLM.load(config)
    try:
        probe = Probe(lm)
        encoder = load_vision(vision, threads, runtime, expect_dim=lm.n_embd, llm_path=llm)
        yield Engine(encoder, probe, config), probe
    finally:
        lm.close()


def _cases(model, files: dict[str, Path], vision: Path, mode: str, resolution: int, seed: int, n: int,
           image_token_id: int, threads: int, quant: str | None = None) -> tuple[list[CaseResult], dict]:
    """Both sample images in one mode; also the engine's prompt ids for each question (for `tokenizer_agrees`)."""
    q, kv_f32, flash, runtime = MODES[mode]
    out = []
    with open_engine(vision, files[quant or q], resolution, kv_f32, flash, threads, runtime) as (engine, probe):
        for name, img in sample_images().items():
            pixels = preprocess.to_pixels(img, resolution)  # (1, 3, S, S), what the engine feeds ONNX
            out.append(run_case(model, engine, probe, img, name, QUESTION, n, mode, seed, image_token_id, pixels))
        fed = [list(p.ids) for p in probe.parts if isinstance(p, Tokens)]  # what the last case's prefill was given
        return out, {QUESTION: fed} | {text: prompt_ids(text, probe.tokenize) for text in TOKENIZER_QUESTIONS}


def prompt_ids(question: str, tokenize) -> list[list[int]]:
    """The engine's ids before and after the image for `question`, as `plan` tokenizes the prompt's segments."""
    lists = tokenize_segments(prompt.build(question), tokenize)
    image = lists.index(None)
    return [sum(lists[:image], []), sum(lists[image + 1:], [])]


def reference_text(question: str) -> tuple[str, str]:
    """The ChatML prompt around `<image>` with the question as the user typed it (the reference cleans nothing)."""
    return (f"{prompt.IM_START}system\n{prompt.SYSTEM}{prompt.IM_END}\n{prompt.IM_START}user\n",
            f"\n{question}{prompt.IM_END}\n{prompt.IM_START}assistant\n")


def tokenizer_agrees(checkpoint: Path, ids: dict[str, list[list[int]]]) -> bool:
    """The checkpoint's own tokenizer on each question's prompt, before and after the image == the engine's ids."""
    transformers = require("transformers")
    tok = transformers.AutoTokenizer.from_pretrained(str(checkpoint))
    agree = True
    for question, got in ids.items():
        want = [tok.encode(t, add_special_tokens=False) for t in reference_text(question)]
        if want != got:
            log.warning("tokenizer: %r gives %s in the engine, %s in the checkpoint's tokenizer", question, got, want)
            agree = False
    return agree


def run_parity(shape: str = "tiny", seeds: tuple[int, ...] = (0,), modes: tuple[str, ...] = tuple(MODES),
               new_tokens: int = 16, resolution: int | None = None, threads: int = 2,
               work_dir: Path | None = None) -> ParityReport:
    """Build, convert and compare random FastVLMs of `shape`, one per seed."""
    from ..convert.build import convert_quants
    from ..synth import random_model

    t0 = time.perf_counter()
    size = resolution or RESOLUTION[shape]
    cases: list[CaseResult] = []
    matter, tok_ok = True, True
    with tempfile.TemporaryDirectory(prefix="fastvlm-parity-") as tmp:
        root = Path(work_dir or tmp)
        for seed in seeds:
            model, vocab = random_model.build(shape, seed)
            ckpt = random_model.save(model, vocab, root / f"{shape}-{seed}" / "checkpoint")
            quants = tuple(dict.fromkeys(MODES[m][0] for m in modes))
            vision, llms = convert_quants(ckpt, root / f"{shape}-{seed}" / "out", quants, threads)
            image_id = model.config.image_token_id
            for mode in modes:
                got, ids = _cases(model, llms, vision, mode, size, seed, new_tokens, image_id, threads)
                cases += got
                matter &= len({c.reference_tokens for c in got}) == len(got)
            tok_ok &= tokenizer_agrees(ckpt, ids)
            del model
    report = ParityReport(shape, size, new_tokens, tuple(cases), matter, tok_ok, seconds=time.perf_counter() - t0)
    log.debug("%s", report.summary())
    return report


def check_converted(checkpoint: Path, vision: Path, llm: Path, quant: str, resolution: int, new_tokens: int = 16,
                    threads: int = 2) -> ParityReport:
    """The default-mode parity of a real checkpoint against its converted files. The image embeddings' cosine
    is gated whatever the GGUF type (vision.onnx is f32); the teacher-forced logits within 0.1 for F32/F16
    files and within 3.0 for BF16/Q8_0 ones (`--quant auto`'s picks); for 4-bit ones they are reported only."""
    from ..convert.checkpoint import open_checkpoint
    from .reference import load_reference_model

    t0 = time.perf_counter()
    ckpt = open_checkpoint(checkpoint)
    model = load_reference_model(ckpt)
    image_id = reference_config(ckpt).image_token_id
    cases, ids = _cases(model, {quant: Path(llm)}, Path(vision), "default", resolution, 0, new_tokens, image_id,
                        threads, quant=quant)
    tok_ok = tokenizer_agrees(ckpt.path, ids)
    gates = {"strict": STRICT_LOGITS} | ({"default": CONVERTED_LOGITS[quant]} if quant in CONVERTED_LOGITS else {})
    # a trained model may well say the same 16 tokens about two abstract pictures: not judged here
    return ParityReport(f"{ckpt.path.name} ({quant})", resolution, new_tokens, tuple(cases), None, tok_ok, gates,
                        time.perf_counter() - t0)
