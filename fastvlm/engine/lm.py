"""The Qwen2 language model as a GGUF in llama.cpp, fed text tokens and image vectors.

llama-cpp-python's high-level API cannot take raw embeddings, so this drives the low-level
batch API: prefill in chunks (tokens, then image vectors through `batch.embd`, then tokens),
sample with llama.cpp's own sampler chain, and reuse the KV cache across requests. `interrupt()` stops
the llama.cpp call in flight from another thread (its abort callback, read through a `NativeFlag`).
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from .cancel import NativeFlag
from .compute import ComputeThread
from .config import EngineConfig, GenerationOptions
from .events import ModelFileError, StopReason
from .kv import Chunk, Part, Snapshot, SnapshotStore, chunks, common_prefix, identities
from .llamalib import context_params, cpu_variant, import_llama, model_params
from .prompt import encodable

log = logging.getLogger(__name__)

IM_END = "<|im_end|>"
PENALTY_LAST_N = 64  # tokens the repeat penalty looks back on (prompt text included)


class Cancelled(Exception):
    """A prefill was stopped: between chunks because `should_stop()` said so, or inside one by `interrupt()`."""


UNINTERRUPTIBLE_CHUNK = 128  # prefill positions per call where llama.cpp cannot be interrupted (no libc found)
ABORTED = 2  # llama_decode's return code after the abort callback said stop


class LanguageModel(Protocol):
    n_embd: int
    n_ctx: int

    def tokenize(self, text: str, *, special: bool) -> list[int]: ...

    def prefill(self, parts: Sequence[Part], should_stop: Callable[[], bool] | None = None, logits: bool = True) -> int:
        """Make the context hold exactly `parts`; returns how many positions were reused.

        With `logits` the last position is always evaluated, so `generate()` can sample after it. Without, a
        context that holds `parts` and more after them is left as it is (nothing is sampled after a prepare).
        """

    def generate(self, options: GenerationOptions) -> Iterator[int]:
        """Sample after the prefilled prompt; each further `next()` first evaluates the last token."""

    def piece(self, token: int) -> bytes: ...

    def stop_reason(self, token: int) -> StopReason | None: ...


def _check_gguf(path: Path) -> None:
    if not path.is_file():
        raise ModelFileError(f"language model not found: {path} (pass --llm PATH or --models DIR)")
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ModelFileError(f"{path} is not a GGUF file; re-download it or pass the right --llm PATH")


def build_sampler(llama_cpp, vocab_size: int, options: GenerationOptions, seed: int):
    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    add = lambda s: llama_cpp.llama_sampler_chain_add(chain, s)  # noqa: E731
    if options.repeat_penalty != 1.0:
        add(llama_cpp.llama_sampler_init_penalties(vocab_size, PENALTY_LAST_N, options.repeat_penalty, 0.0, 0.0))
    if options.temperature <= 0:
        add(llama_cpp.llama_sampler_init_greedy())
        return chain
    if options.top_k > 0:
        add(llama_cpp.llama_sampler_init_top_k(options.top_k))
    if options.top_p < 1.0:
        add(llama_cpp.llama_sampler_init_top_p(options.top_p, 1))
    add(llama_cpp.llama_sampler_init_temp(options.temperature))
    add(llama_cpp.llama_sampler_init_dist(seed & 0xFFFFFFFF))
    return chain


class LlamaLM:
    """Owns a llama model + context + two reusable batches. Build it with `load()`; `close()` frees it."""

    def __init__(self, llama_cpp, model, ctx, config: EngineConfig):
        self._ll = llama_cpp
        self._model, self._ctx = model, ctx
        self._vocab = llama_cpp.llama_model_get_vocab(model)
        self._mem = llama_cpp.llama_get_memory(ctx)
        self.n_embd = llama_cpp.llama_model_n_embd(model)
        # llama.cpp pads n_ctx and clamps n_batch to the n_ctx asked for: use the sizes it really has (a larger
        # batch than its own trips GGML_ASSERT and aborts the process)
        self.n_ctx = llama_cpp.llama_n_ctx(ctx)
        self.n_batch = min(config.n_batch, llama_cpp.llama_n_batch(ctx), llama_cpp.llama_n_ubatch(ctx))
        self._abort = NativeFlag(llama_cpp.ggml_abort_callback) if NativeFlag.available() else None
        if self._abort is not None:
            llama_cpp.llama_set_abort_callback(ctx, self._abort.callback, self._abort.data)
        # with no way to interrupt a call, prefill in small steps so that a Stop is seen between them
        self._chunk = max(1, config.prefill_chunk if self._abort else min(config.prefill_chunk, UNINTERRUPTIBLE_CHUNK))
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self._vocab)
        self._tok_batch = llama_cpp.llama_batch_init(self.n_batch, 0, 1)
        self._emb_batch = llama_cpp.llama_batch_init(self.n_batch, self.n_embd, 1)
        self._held: list = []  # identities of the positions in the KV cache, in order
        self._snapshots = SnapshotStore(config.kv_snapshots if config.kv_reuse else 0)  # no reuse: none kept
        self._buf = ctypes.create_string_buffer(256)
        self.compute = ComputeThread()  # every llama_decode on one thread: one OpenMP team (engine/compute.py)
        self.name = self._meta("general.name") or Path(config.llm_path).stem
        self.cpu_variant = cpu_variant()  # which llama.cpp CPU backend runs (haswell, zen4, ... or built-in)
        ids = self.tokenize(IM_END, special=True)
        self.im_end = ids[0] if len(ids) == 1 else None
        if self.im_end is None:
            log.warning("%s is not one token in this vocabulary: stopping on end-of-text only", IM_END)

    @classmethod
    def load(cls, config: EngineConfig) -> LlamaLM:
        path = Path(config.llm_path)
        _check_gguf(path)
        logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)  # its C log callback obeys this
        llama_cpp = import_llama()  # a portable build's CPU backend is loaded here, before the first model
        llama_cpp.llama_backend_init()
        model = llama_cpp.llama_model_load_from_file(str(path).encode(), model_params(llama_cpp, config))
        if not model:
            raise ModelFileError(f"llama.cpp could not load {path}: a broken or unsupported GGUF; re-download it")
        trained = llama_cpp.llama_model_n_ctx_train(model)
        if 0 < trained < config.n_ctx:
            llama_cpp.llama_model_free(model)
            raise ValueError(f"n_ctx {config.n_ctx} is more than the {trained} positions {path.name} was trained "
                             f"for: pass --n-ctx {trained} or less")
        ctx = llama_cpp.llama_init_from_model(model, context_params(llama_cpp, config))
        if not ctx:
            llama_cpp.llama_model_free(model)
            raise ModelFileError(f"llama.cpp could not create a context for {path} (n_ctx={config.n_ctx}); lower n_ctx")
        return cls(llama_cpp, model, ctx, config)

    def _meta(self, key: str) -> str:
        buf = ctypes.create_string_buffer(256)
        n = self._ll.llama_model_meta_val_str(self._model, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", "replace") if n >= 0 else ""

    # -- text ---------------------------------------------------------------
    def tokenize(self, text: str, *, special: bool) -> list[int]:
        data = encodable(text).encode("utf-8")  # an earlier answer or an answer so far may hold a surrogate
        n_max = len(data) + 8
        buf = (self._ll.llama_token * n_max)()
        n = self._ll.llama_tokenize(self._vocab, data, len(data), buf, n_max, False, special)
        if n < 0:
            buf = (self._ll.llama_token * -n)()
            n = self._ll.llama_tokenize(self._vocab, data, len(data), buf, -n, False, special)
        return list(buf[:n])

    def piece(self, token: int) -> bytes:
        n = self._ll.llama_token_to_piece(self._vocab, token, self._buf, len(self._buf), 0, False)
        if n < 0:
            self._buf = ctypes.create_string_buffer(-n)
            n = self._ll.llama_token_to_piece(self._vocab, token, self._buf, len(self._buf), 0, False)
        return self._buf.raw[:n]

    def stop_reason(self, token: int) -> StopReason | None:
        if token == self.im_end:
            return "end_of_turn"
        if self._ll.llama_vocab_is_eog(self._vocab, token):
            return "end_of_text"
        return None

    # -- prefill ------------------------------------------------------------
    def prefill(self, parts: Sequence[Part], should_stop: Callable[[], bool] | None = None, logits: bool = True) -> int:
        wanted = identities(parts)
        if not wanted:
            raise ValueError("empty prompt")
        if len(wanted) > self.n_ctx:
            raise ValueError(f"prompt of {len(wanted)} positions exceeds the context of {self.n_ctx}")
        keep = common_prefix(self._held, wanted)
        if not logits and keep == len(wanted):  # held already, maybe with more after it: nothing to sample here,
            return keep  # so what follows stays (a question's words prepared after its image)
        snap = self._snapshots.best(wanted, better_than=keep)
        if snap is not None:
            keep = len(snap.ids) if self._restore(snap) else 0
        if logits:
            keep = min(keep, len(wanted) - 1)  # the last position is evaluated again, for its logits
        keep = self._truncate(keep)
        self._start_work()
        todo = chunks(parts, keep, min(self.n_batch, self._chunk))
        for i, chunk in enumerate(todo):
            if should_stop is not None and should_stop():
                raise Cancelled()
            self._decode(chunk, logits=logits and i == len(todo) - 1)
            if chunk.ends_image:
                self._save_snapshot()
        return keep

    def _truncate(self, keep: int) -> int:
        """The KV cache cut to its first `keep` positions; the number kept (0 where llama.cpp refused the cut and
        the cache was cleared)."""
        if keep < len(self._held):
            if not self._ll.llama_memory_seq_rm(self._mem, 0, keep, -1):
                self.reset()
                return 0
            del self._held[keep:]
        return keep

    def reset(self) -> None:
        """Forget the KV cache contents (not the snapshots)."""
        self._ll.llama_memory_clear(self._mem, True)
        self._held.clear()
        self._start_work()

    def interrupt(self) -> None:
        """From any thread: the llama.cpp call in flight (and any before the next prefill) stops with `Cancelled`."""
        if self._abort is not None:
            self._abort.set()

    def _start_work(self) -> None:
        """New work starts with the flag down (a late `interrupt()` of the last request must not stop it)."""
        if self._abort is not None:
            self._abort.clear()

    def _decode(self, chunk: Chunk, logits: bool) -> None:
        n = len(chunk)
        if chunk.start != len(self._held):
            raise RuntimeError(f"internal: chunk at {chunk.start}, context holds {len(self._held)}")
        batch = self._tok_batch if chunk.embeddings is None else self._emb_batch
        if chunk.embeddings is None:
            for i, t in enumerate(chunk.tokens):
                batch.token[i] = t
        else:
            emb = np.ascontiguousarray(chunk.embeddings, dtype=np.float32)  # (n, D)
            ctypes.memmove(batch.embd, emb.ctypes.data, emb.nbytes)
        for i in range(n):
            batch.pos[i] = chunk.start + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 0
        batch.logits[n - 1] = int(logits)
        batch.n_tokens = n
        rc = self.compute.run(self._ll.llama_decode, self._ctx, batch)
        if rc == ABORTED:
            if not self._ll.llama_memory_seq_rm(self._mem, 0, len(self._held), -1):  # what the stopped call wrote
                self.reset()
            raise Cancelled()
        if rc != 0:
            self.reset()
            raise RuntimeError(f"llama_decode failed (code {rc}) at position {chunk.start} with {n} positions")
        self._held.extend(chunk.identities())

    # -- snapshots ----------------------------------------------------------
    def _save_snapshot(self) -> None:
        ids = tuple(self._held)
        if ids in self._snapshots:
            return
        size = self._ll.llama_state_seq_get_size(self._ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        n = self._ll.llama_state_seq_get_data(self._ctx, buf, size, 0)
        self._snapshots.put(Snapshot(ids, ctypes.string_at(buf, n)))  # one memcpy (slicing made 3.7 M ints: 30 ms)

    def _restore(self, snap: Snapshot) -> bool:
        """Load `snap` into the context; False (context emptied, snapshot dropped) when llama.cpp refuses it:
        the prompt is then prefilled from the start instead of failing this and every later request."""
        self._ll.llama_memory_seq_rm(self._mem, 0, -1, -1)
        data = (ctypes.c_uint8 * len(snap.data)).from_buffer_copy(snap.data)
        if self._ll.llama_state_seq_set_data(self._ctx, data, len(snap.data), 0) == 0:
            log.warning("a KV snapshot (%d positions) could not be restored: dropped, prefilling instead",
                        len(snap.ids))
            self._snapshots.discard(snap)
            self.reset()
            return False
        self._held = list(snap.ids)
        return True

    # -- decode -------------------------------------------------------------
    def generate(self, options: GenerationOptions, seed: int = 0) -> Iterator[int]:
        self._start_work()
        sampler = build_sampler(self._ll, self.n_vocab, options, seed)
        if options.repeat_penalty != 1.0:  # the penalty's window starts in the prompt, as in llama.cpp's server
            for token in [i for i in self._held if isinstance(i, int)][-PENALTY_LAST_N:]:
                self._ll.llama_sampler_accept(sampler, token)
        try:
            while True:
                token = self._ll.llama_sampler_sample(sampler, self._ctx, -1)
                yield token
                if len(self._held) >= self.n_ctx:
                    return
                self._decode(Chunk(len(self._held), tokens=(token,)), logits=True)
        finally:
            self._ll.llama_sampler_free(sampler)

    def close(self) -> None:
        if self._ctx is None:
            return
        self.compute.close()
        self._ll.llama_batch_free(self._tok_batch)
        self._ll.llama_batch_free(self._emb_batch)
        self._ll.llama_free(self._ctx)
        self._ll.llama_model_free(self._model)
        self._ctx = self._model = None
        self._snapshots.clear()
