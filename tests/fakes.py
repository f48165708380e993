"""Scripted stand-ins for the two models, for engine tests that need no weights."""

from __future__ import annotations

import threading
import time

import numpy as np

from fastvlm.engine.kv import Tokens, identities

SPECIAL = {"<|im_start|>": 1000, "<|im_end|>": 1001, "<|endoftext|>": 1002}
IM_END, EOT = 1001, 1002


class FakeVision:
    embed_dim = 8

    def __init__(self):
        self.calls = 0

    def encode(self, pixels):
        self.calls += 1
        n = (pixels.shape[2] // 64) * (pixels.shape[3] // 64)
        return np.full((n, self.embed_dim), float(pixels.mean()), np.float32)


class FakeLM:
    """Byte-level tokens; answers with `script` (bytes) then <|im_end|>. `delay` slows each token."""

    n_embd = 8

    def __init__(self, script: bytes = b"Hello!", n_ctx: int = 4096, delay: float = 0.0, end: int = IM_END):
        self.script, self.n_ctx, self.delay, self.end = script, n_ctx, delay, end
        self.prefills: list[list] = []
        self.evaluated = 0  # tokens evaluated during generation
        self.generating = threading.Event()
        self.resets = 0

    def tokenize(self, text: str, *, special: bool) -> list[int]:
        out: list[int] = []
        i = 0
        while i < len(text):
            hit = next((m for m in SPECIAL if special and text.startswith(m, i)), None)
            if hit:
                out.append(SPECIAL[hit])
                i += len(hit)
            else:
                out.extend(text[i].encode())
                i += 1
        return out

    def prefill(self, parts, should_stop=None, logits=True) -> int:
        self.prefills.append(identities(parts))
        for p in parts:
            if should_stop is not None and should_stop():
                from fastvlm.engine.lm import Cancelled

                raise Cancelled()
            if not isinstance(p, Tokens):
                time.sleep(self.delay)
        return 0

    def reset(self) -> None:
        self.resets += 1

    def generate(self, options, seed=0):
        self.generating.set()
        try:
            for tok in [*self.script, self.end]:
                time.sleep(self.delay)
                yield tok
                self.evaluated += 1
        finally:
            self.generating.clear()

    def piece(self, token: int) -> bytes:
        return bytes([token]) if token < 256 else b""

    def stop_reason(self, token: int):
        return {IM_END: "end_of_turn", EOT: "end_of_text"}.get(token)


def record_questions(engine) -> list[str]:
    """Wrap `engine.stream`: the question of every request it is given is appended to the returned list."""
    asked, stream = [], engine.stream

    def recording(request, wait=None, cancel=None):
        asked.append(request.question)
        return stream(request, wait, cancel)

    engine.stream = recording
    return asked
