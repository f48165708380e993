"""What a quantization costs: a GGUF against a reference GGUF (the BF16 one) on fixed teacher-forced prompts.

Both files read the same token ids (ChatML conversations, text only); at every position the next-token
distributions are compared: top-1 agreement and KL(reference || quantized), in float64. One model is
loaded at a time. Only llama-cpp-python and numpy are needed (what `doctor` has).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np


log = logging.getLogger(__name__)

_SYSTEM = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
PROMPTS = tuple(_SYSTEM + f"<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n{a}" for q, a in (
    ("What is in the picture?", "The picture shows a small brown dog sitting on a green lawn in front of a house."),
    ("Read the sign.", "The sign says: Welcome to the park. Please keep the grass clean."),
    ("How many people are there?", "There are two people sitting at a desk, looking at a computer screen."),
    ("Describe the colors.", "The main colors are white, yellow, green and silver, with a blue sky."),
    ("What is the chart about?", "The chart shows the number of visitors for each month of the year."),
    ("Is it day or night?", "It is evening: the sky is dark orange and the street lights are on."),
))


@dataclass(frozen=True)
class QuantCheck:
    quantized: Path
    reference: Path
    positions: int  # next-token distributions compared
    top1_agreement: float  # share of positions with the same most likely token
    mean_kl: float  # mean KL(reference || quantized), nats
    max_kl: float

    def summary(self) -> str:
        return (f"{self.quantized.name} vs {self.reference.name}: next token agrees at {self.top1_agreement:.1%} of "
                f"{self.positions} positions, KL mean {self.mean_kl:.4f} max {self.max_kl:.3f} nats")


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    x -= x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def teacher_forced_logits(gguf: Path, prompts: Sequence[str], threads: int | None = None,
                          token_ids: list[list[int]] | None = None) -> tuple[list[list[int]], list[np.ndarray]]:
    """(token ids per prompt, logits (T, V) per prompt) from llama.cpp on `gguf`. `token_ids` re-uses another
    file's tokenization so both compare the same positions."""
    from ..engine.llamalib import import_llama  # a portable build's CPU backend loaded first

    llm = import_llama().Llama(model_path=str(gguf), n_ctx=512, n_threads=threads, logits_all=True, verbose=False)
    try:
        ids = token_ids or [llm.tokenize(p.encode(), add_bos=False, special=True) for p in prompts]
        out = []
        for toks in ids:
            llm.reset()
            llm.eval(toks)
            out.append(np.array(llm.scores[: len(toks)], dtype=np.float32))  # (T, V)
        return ids, out
    finally:
        llm.close()


def compare_quant(quantized: Path, reference: Path, prompts: Sequence[str] = PROMPTS,
                  threads: int | None = None) -> QuantCheck:
    """Next-token agreement and mean KL of `quantized` against `reference` (e.g. llm-q8_0.gguf vs the BF16 file)."""
    ids, ref = teacher_forced_logits(Path(reference), prompts, threads)
    _, got = teacher_forced_logits(Path(quantized), prompts, threads, token_ids=ids)
    agree, kls = [], []
    for r, q in zip(ref, got):
        if r.shape != q.shape:
            raise ValueError(f"{quantized} and {reference} have different vocabularies ({q.shape[1]} vs {r.shape[1]})")
        lr, lq = _log_softmax(r), _log_softmax(q)
        kls.append((np.exp(lr) * (lr - lq)).sum(axis=-1))  # (T,)
        agree.append(r.argmax(-1) == q.argmax(-1))
    kl = np.concatenate(kls)
    check = QuantCheck(Path(quantized), Path(reference), int(kl.size), float(np.concatenate(agree).mean()),
                       float(kl.mean()), float(kl.max()))
    log.info("%s", check.summary())
    return check
