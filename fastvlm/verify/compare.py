"""One parity case: the same pixels and token ids through transformers and through our engine.

The engine side is the real `Engine` (its prompt plan, ONNX encoder, embedding splice, llama.cpp prefill
and greedy sampler) with its language model wrapped by `Probe`, which records the parts prefilled, the
tokens generated and the logits each was sampled from. Reading those logits uses `llama_logits`, which
reaches into `LlamaLM`'s llama context: test-only access, nothing in the product does this.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from fastvlm.engine.config import GenerationOptions
from fastvlm.engine.engine import Engine
from fastvlm.engine.events import Request
from fastvlm.engine.kv import Image, Part, Tokens

from ..convert._deps import require


def llama_logits(lm) -> np.ndarray:
    """Test-only: a copy of the logits llama.cpp computed for the last evaluated position of `lm` (a LlamaLM)."""
    ptr = lm._ll.llama_get_logits_ith(lm._ctx, -1)
    return np.ctypeslib.as_array(ptr, shape=(lm.n_vocab,)).copy()  # (V,)


class Probe:
    """A LanguageModel that forwards to a `LlamaLM` and records what the engine asked of it."""

    def __init__(self, lm):
        self.lm = lm
        self.parts: tuple[Part, ...] = ()
        self.tokens: list[int] = []
        self.logits: list[np.ndarray] = []

    def __getattr__(self, name):
        return getattr(self.lm, name)

    def prefill(self, parts: Sequence[Part], should_stop=None, logits: bool = True) -> int:
        self.parts = tuple(parts)
        return self.lm.prefill(parts, should_stop, logits)

    def generate(self, options: GenerationOptions, seed: int = 0) -> Iterator[int]:
        self.tokens, self.logits = [], []
        inner = self.lm.generate(options, seed)
        try:
            for token in inner:
                self.logits.append(llama_logits(self.lm))  # what `token` was sampled from
                self.tokens.append(token)
                yield token
        finally:
            inner.close()

    def forced_logits(self, parts: Sequence[Part], continuation: Sequence[int]) -> list[np.ndarray]:
        """Teacher forcing: logits after `parts` + each prefix of `continuation` (KV reused between steps)."""
        out = []
        for k in range(len(continuation)):
            extra = (Tokens(tuple(continuation[:k])),) if k else ()
            self.lm.prefill((*parts, *extra))
            out.append(llama_logits(self.lm))
        return out


def reference_ids(parts: Sequence[Part], image_token_id: int) -> list[int]:
    """The engine's prompt as transformers input_ids: each image vector position holds the image token."""
    ids: list[int] = []
    for p in parts:
        ids += list(p.ids) if isinstance(p, Tokens) else [image_token_id] * len(p.embeddings)
    return ids


def reference_greedy(model, ids: list[int], pixels: np.ndarray,
                     n: int) -> tuple[list[int], list[np.ndarray], np.ndarray]:
    """Greedy decoding with transformers: (tokens, logits per step, image features (N, D))."""
    torch = require("torch")
    with torch.no_grad():
        image = model.model.get_image_features(pixel_values=torch.from_numpy(pixels))  # pooler_output (1, N, D)
        out = model(input_ids=torch.tensor([ids]), mm_encoder_outputs={"image": image}, use_cache=True)
        past, step_logits = out.past_key_values, [out.logits[0, -1].numpy().copy()]
        tokens = [int(step_logits[0].argmax())]
        for _ in range(n - 1):
            out = model(input_ids=torch.tensor([[tokens[-1]]]), past_key_values=past, use_cache=True)
            past = out.past_key_values
            step_logits.append(out.logits[0, -1].numpy().copy())
            tokens.append(int(step_logits[-1].argmax()))
    return tokens, step_logits, image.pooler_output[0].numpy()


@dataclass(frozen=True)
class CaseResult:
    """One image and one question through both implementations."""

    mode: str  # "strict" | "default"
    seed: int
    image: str
    reference_tokens: tuple[int, ...]
    engine_tokens: tuple[int, ...]
    first_logits_diff: float  # max |engine - transformers| of the first step's logits
    forced_logits_diff: float  # max over all steps, llama.cpp teacher-forced on the transformers tokens
    forced_top1_agree: float  # share of teacher-forced steps with the same argmax
    vision_diff: float  # max |ONNX embeddings - torch image features|
    vision_cosine: float  # cosine of the flattened embeddings with the torch image features
    min_margin: float  # smallest top-1 minus top-2 logit gap of the reference (near 0: a coin flip)
    vision_runtime: str = ""  # e.g. "OnnxVision", "OpenVinoVision bf16"

    @property
    def agreed(self) -> int:
        n = 0
        for a, b in zip(self.reference_tokens, self.engine_tokens):
            if a != b:
                break
            n += 1
        return n


def run_case(model, engine: Engine, probe: Probe, image, name: str, question: str, n: int, mode: str, seed: int,
             image_token_id: int, pixels: np.ndarray) -> CaseResult:
    """Our engine answers; transformers answers on the same ids and pixels; compare."""
    opts = GenerationOptions(max_new_tokens=n, temperature=0.0, seed=0)
    engine.answer(Request(image, question, options=opts))
    parts = probe.parts
    emb = next(p.embeddings for p in parts if isinstance(p, Image))  # (N, D) from ONNX Runtime
    ref_tokens, ref_logits, feats = reference_greedy(model, reference_ids(parts, image_token_id), pixels, n)
    forced = probe.forced_logits(parts, ref_tokens)
    top2 = [np.sort(lg)[-2:] for lg in ref_logits]
    return CaseResult(
        mode, seed, name, tuple(ref_tokens), tuple(probe.tokens),
        first_logits_diff=float(np.abs(probe.logits[0] - ref_logits[0]).max()),
        forced_logits_diff=float(np.max([np.abs(a - b).max() for a, b in zip(forced, ref_logits)])),  # NaN stays
        forced_top1_agree=float(np.mean([a.argmax() == b.argmax() for a, b in zip(forced, ref_logits)])),
        vision_diff=float(np.abs(emb - feats).max()),
        vision_cosine=float(np.dot(emb.ravel(), feats.ravel()) / (np.linalg.norm(emb) * np.linalg.norm(feats))),
        min_margin=float(min(t[1] - t[0] for t in top2)),
        vision_runtime=" ".join([type(engine.vision).__name__, getattr(engine.vision, "precision", "")]).strip(),
    )
