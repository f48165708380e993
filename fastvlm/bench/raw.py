"""The same work without the engine: bare `session.run` and a bare llama.cpp prefill/decode loop.

It borrows the engine's loaded ONNX session and llama context, so both are measured in one
process on the same weights; the KV cache is cleared first, as a from-scratch program would have it.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable

import numpy as np

from ..engine import plan as planner
from ..engine import prompt, preprocess
from ..engine.kv import Image, Tokens


def bare_vision_call(vision) -> Callable[[np.ndarray], np.ndarray]:
    """The runtime's own call under the engine's encoder: ONNX Runtime's `session.run`, or OpenVINO's compiled
    model for the size (compiled beforehand, as the engine's warm-up does). (1, 3, S, S) -> (1, N, D)."""
    spec = vision.spec
    session = getattr(vision, "_session", None)
    if session is not None:
        return lambda pixels: session.run(None, {spec.input_name: pixels.astype(spec.input_dtype)})[0]
    compiled_for = getattr(vision, "_compiled_for", None)
    if compiled_for is not None:
        return lambda pixels: compiled_for(pixels.shape[2])({0: pixels.astype(spec.input_dtype)})[0]
    raise TypeError(f"no bare call known for the vision runtime {type(vision).__name__}: "
                    "add it to fastvlm.bench.raw.bare_vision_call")


class RawBaseline:
    def __init__(self, engine):
        self.vision = engine.vision
        self.lm = engine.lm
        self._ll = self.lm._ll

    def encode(self, pixels: np.ndarray) -> tuple[np.ndarray, float]:
        call = bare_vision_call(self.vision)
        t = time.perf_counter()
        out = np.asarray(call(pixels))  # (1, N, D)
        return out[0], time.perf_counter() - t

    def _batch(self, ids=None, emb=None, start=0, logits_last=False):
        ll = self._ll
        n = len(ids) if emb is None else len(emb)
        batch = ll.llama_batch_init(n, 0 if emb is None else emb.shape[1], 1)
        if emb is None:
            for i, t in enumerate(ids):
                batch.token[i] = t
        else:
            emb = np.ascontiguousarray(emb, dtype=np.float32)
            ctypes.memmove(batch.embd, emb.ctypes.data, emb.nbytes)
        for i in range(n):
            batch.pos[i], batch.n_seq_id[i], batch.logits[i] = start + i, 1, 0
            batch.seq_id[i][0] = 0
        batch.logits[n - 1] = int(logits_last)
        batch.n_tokens = n
        return batch

    def _decode(self, **kw) -> None:
        batch = self._batch(**kw)
        try:
            if self.lm.compute.run(self._ll.llama_decode, self.lm._ctx, batch) != 0:  # the engine's thread
                raise RuntimeError("llama_decode failed in the raw baseline")
        finally:
            self._ll.llama_batch_free(batch)

    def prefill(self, image_emb: np.ndarray, question: str) -> float:
        """Three-part prefill from an empty KV cache: text before <image>, the vectors, text after."""
        segs = prompt.build(question)
        lists = planner.tokenize_segments(segs, self.lm.tokenize)
        parts = planner.to_parts(lists, Image("raw", image_emb))
        self.lm.reset()
        t = time.perf_counter()
        pos = 0
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            for a in range(0, len(part.ids) if isinstance(part, Tokens) else len(part.embeddings), self.lm.n_batch):
                if isinstance(part, Tokens):
                    chunk = part.ids[a : a + self.lm.n_batch]
                    self._decode(ids=chunk, start=pos, logits_last=last and a + len(chunk) == len(part.ids))
                else:
                    chunk = part.embeddings[a : a + self.lm.n_batch]
                    self._decode(emb=chunk, start=pos)
                pos += len(chunk)
        self._pos = pos
        return time.perf_counter() - t

    def decode(self, n_tokens: int) -> tuple[list[int], float]:
        """Greedy decode of n tokens (no stop check): returns (their ids, seconds after the first)."""
        ll = self._ll
        sampler = ll.llama_sampler_chain_init(ll.llama_sampler_chain_default_params())
        ll.llama_sampler_chain_add(sampler, ll.llama_sampler_init_greedy())
        try:
            tokens = [ll.llama_sampler_sample(sampler, self.lm._ctx, -1)]
            t = time.perf_counter()
            for _ in range(n_tokens - 1):
                self._decode(ids=[tokens[-1]], start=self._pos, logits_last=True)
                self._pos += 1
                tokens.append(ll.llama_sampler_sample(sampler, self.lm._ctx, -1))
            return tokens, time.perf_counter() - t
        finally:
            ll.llama_sampler_free(sampler)
            self.lm.reset()  # the engine's bookkeeping no longer matches the KV cache

    def run(self, image, question: str, size: int, n_decode: int) -> dict[str, float]:
        pixels = preprocess.to_pixels(preprocess.load_image(image), size)
        emb, t_enc = self.encode(pixels)
        t_pre = self.prefill(emb, question)
        tokens, t_dec = self.decode(n_decode)
        return {"encode_s": t_enc, "prefill_s": t_pre, "ttft_s": t_enc + t_pre,
                "tokens_per_s": (len(tokens) - 1) / t_dec if t_dec > 0 else 0.0}
