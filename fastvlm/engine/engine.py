"""The FastVLM engine: one image + question in, a stream of typed events out.

Single flight (`flight.Flight`): one inference at a time across all threads. `stream()` waits for its turn
(or raises `Busy` at once with `wait=0`), `prepare()` only runs when the engine is idle
and gives way to a real request within one prefill chunk, unless that request is for the
image being prepared (then it waits for the prefill it needs); a prepare for a newer image
takes over from the one running (a photo retaken, an upload replaced). The engine keeps no per-user
state; image embeddings and KV snapshots are caches keyed by content.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import replace

import numpy as np

from . import plan as planner
from . import preprocess
from .cancel import CancelToken, on_cancel
from .config import FAST_RESOLUTION, TRAINED_RESOLUTION, EngineConfig, check_resolution
from .decode import AnswerIds, Decode
from .describe import loaded
from .events import Done, Event, InputError, Notice, Request, Result, Stats, all_but_done, collect
from .flight import Claim, Flight
from .kv import LRU, Image
from .lm import Cancelled, LanguageModel
from .prompt import Turn
from .vision import EncodeCancelled, VisionEncoder

log = logging.getLogger(__name__)

OFFERED_RESOLUTIONS = (TRAINED_RESOLUTION, FAST_RESOLUTION)


class Engine:
    continues_answers = True  # a request may carry the words of an answer stopped part way (`answer_so_far`)

    def __init__(self, vision: VisionEncoder, lm: LanguageModel, config: EngineConfig, clock=time.perf_counter):
        self.vision, self.lm, self.config = vision, lm, config
        self._clock = clock
        self._flight = Flight()
        self._embeddings = LRU(config.embedding_cache)
        self._answers = AnswerIds(64)  # recent answers' own token ids: quoting one reuses the KV cache

    @classmethod
    def load(cls, config: EngineConfig, warm_up: bool = True) -> Engine:
        """Load both models, check they belong together, and warm them up."""
        from .lm import LlamaLM
        from .vision_runtimes import load_vision

        lm = LlamaLM.load(config)
        try:
            vision = load_vision(config.vision_path, config.threads, config.vision_runtime, expect_dim=lm.n_embd,
                                 llm_path=config.llm_path, precision=config.vision_precision,
                                 warm_size=config.resolution)
        except Exception:
            lm.close()
            raise
        engine = cls(vision, lm, config)
        if warm_up:
            engine.warm_up()
        return engine

    def warm_up(self) -> None:
        """Get the vision runtime ready for the default resolution, and prefill the system prompt (it stays cached)."""
        size = self.resolution
        warm = getattr(self.vision, "warm_up", None)
        if warm is not None:
            warm(size)
        else:
            self.vision.encode(np.zeros((1, 3, size, size), np.float32))
        no_image = Image("warm-up", np.zeros((1, self.lm.n_embd), np.float32))
        self.lm.prefill(planner.prefix_parts(no_image, self.lm.tokenize)[:1], logits=False)

    @property
    def resolution(self) -> int:
        """The default image size: the configured one, or the only one a fixed-size vision graph takes."""
        spec = getattr(self.vision, "spec", None)
        if spec is None or spec.serves(self.config.resolution):
            return self.config.resolution
        return spec.fixed_size

    def resolutions(self) -> tuple[int, ...]:
        """The offered sizes (1024 trained, 512 fast, and the default) that the loaded vision graph serves."""
        spec = getattr(self.vision, "spec", None)
        sizes = dict.fromkeys((*OFFERED_RESOLUTIONS, self.resolution))
        return tuple(s for s in sizes if spec is None or spec.serves(s))

    def describe(self) -> dict:
        """What is loaded, for a UI header or a /health endpoint."""
        return loaded(self)

    @property
    def busy(self) -> bool:
        return self._flight.busy

    # -- requests -------------------------------------------------------------
    def stream(self, request: Request, wait: float | None = None, cancel: CancelToken | None = None) -> Iterator[Event]:
        """Events for one request. `wait`: seconds to wait for the engine (None: as long as it takes,
        0: raise `Busy` at once). Closing the generator stops decoding and frees the engine; `cancel` also
        stops an encode or prefill in progress (the stream then ends with stop reason "cancelled")."""
        t0 = self._clock()
        size = self.check_resolution(request.resolution)  # a bad size fails before waiting for a turn
        cancel = cancel or CancelToken()
        with self._flight.turn(wait, cancel, request.image, size):
            done = yield from all_but_done(self._events(request, t0, cancel))
        if done is not None:
            yield done  # once the engine is free: after Stop, Gradio may never ask past the last event

    def _events(self, request: Request, t0: float, cancel: CancelToken) -> Iterator[Event]:
        if cancel.cancelled:  # cancelled while waiting for the turn: no work, but still one Done
            yield Done(Stats(total_s=self._clock() - t0, stop_reason="cancelled"))
            return
        try:
            yield from self._run(request, t0, cancel)
        except (Cancelled, EncodeCancelled):
            yield Done(Stats(total_s=self._clock() - t0, stop_reason="cancelled"))

    def answer(self, request: Request, wait: float | None = None, cancel: CancelToken | None = None) -> Result:
        return collect(self.stream(request, wait, cancel))

    def prepare(self, image, resolution: int | None = None, words: str = "", history: tuple[Turn, ...] = (),
                image_with_question: bool = False) -> bool:
        """Encode `image` and prefill system prompt + image while idle. False if an answer runs or waits, or a
        newer prepare took its place: the newest image is the one about to be asked about, so a prepare for
        another image stops the running one within a chunk (or after its encode) and runs next.

        `words`: the question's first words, heard while it is still spoken (the voice tab): prefilled after the
        image, so its answer only prefills the rest. Such a prepare takes over from one for the same image with
        other words (or none), never from one for another image; one with no words, or the same words, leaves
        the running one be, and never drops words already prefilled for that image. Nothing starts, nor takes
        over, while a request waits (one about the image being prepared lets that prepare finish). `history`: the
        conversation's turns before the question (the voice tab's), prefilled between the image and the words, or
        before the image with `image_with_question` (as `Request` has them). `image` None: only what comes before
        the image with `image_with_question` is prefilled, the system prompt and `history` (the voice tab, while an
        answer is spoken: the next question's frame is not known yet); False without `history`."""
        if image is None and not (history and image_with_question):
            return False
        size = self.check_resolution(resolution)
        with self._flight.preparing(Claim(image, size, words, (history, image_with_question))) as stale:
            if stale is None:
                return False
            try:
                img = planner.stand_in(size, self.lm.n_embd) if image is None else self._embed(image, size)[0]
                if stale():
                    return False
                budget = self.lm.n_ctx - self.lm.n_ctx // 4  # what a request with the most new tokens leaves
                parts = planner.prefix_parts(img, self._tokenize, words, history, budget, image_with_question)
                if image is None:  # the stand-in only kept room for the frame: nothing from it on is prefilled
                    parts = planner.before_image(parts)
                self.lm.prefill(parts, should_stop=stale, logits=False)
                return True
            except Cancelled:
                return False

    def _embed(self, image, resolution: int | None,
               cancel: CancelToken | None = None) -> tuple[Image, float, float | None]:
        """The image's embeddings from the cache or the encoder; returns (image, preprocess s, encode s or
        None when the embeddings came from the cache)."""
        size = self.check_resolution(resolution)
        t = self._clock()
        pil = preprocess.load_image(image, self.config.max_image_pixels)
        key = f"{preprocess.image_key(pil)}@{size}"
        emb = self._embeddings.get_fresh(key)
        if emb is not None:
            return Image(key, emb), self._clock() - t, None
        pixels = preprocess.to_pixels(pil, size)  # (1, 3, S, S)
        t_pre = self._clock() - t
        t = self._clock()
        with on_cancel(cancel, getattr(self.vision, "cancel", None)):
            if cancel is not None and cancel.cancelled:  # a Stop before the encode began: the runtime's cancel
                raise EncodeCancelled()  # had nothing in flight to stop, so it is honoured here
            emb = self.vision.encode(pixels)  # (N, D)
        t_enc = self._clock() - t
        self._embeddings.put(key, emb)
        return Image(key, emb), t_pre, t_enc

    def check_resolution(self, resolution: int | None) -> int:
        """The size a request gets: `resolution` (or the default) when the vision graph serves it, else an
        `InputError` before any work."""
        size = resolution or self.resolution
        try:
            check_resolution(size)
        except ValueError as e:
            raise InputError(str(e)) from None
        spec = getattr(self.vision, "spec", None)
        return spec.check_size(size) if spec is not None else size

    def _tokenize(self, text: str, *, special: bool) -> list[int]:
        known = None if special else self._answers.ids(text)
        return known if known is not None else self.lm.tokenize(text, special=special)

    def _run(self, request: Request, t0: float, cancel: CancelToken) -> Iterator[Event]:
        opts = request.options
        img, t_pre, t_enc = self._embed(request.image, request.resolution, cancel)
        budget = self.lm.n_ctx - min(opts.max_new_tokens, self.lm.n_ctx // 4)
        said = self._answer_so_far(request.answer_so_far)
        p = planner.plan(request.question, request.history, img, self._tokenize, budget, said[1],
                         request.image_with_question)
        for message in p.notices:
            yield Notice(message)
        if not self.config.kv_reuse:
            self.lm.reset()
        t = self._clock()
        stats = Stats(preprocess_s=t_pre, encode_s=t_enc or 0.0, prompt_tokens=p.positions,
                      image_tokens=len(img.embeddings), embedding_cached=t_enc is None)
        try:
            with on_cancel(cancel, getattr(self.lm, "interrupt", None)):  # a Stop lands inside a llama.cpp call too
                reused = self.lm.prefill(p.parts, should_stop=lambda: cancel.cancelled)
        except Cancelled:  # the stages done so far stay in the stats: encode_s > 0 says the Stop came in the prefill
            yield Done(replace(stats, prefill_s=self._clock() - t, total_s=self._clock() - t0, stop_reason="cancelled"))
            return
        stats = replace(stats, prefill_s=self._clock() - t, reused_tokens=reused)
        yield from self._decode(request, stats, t0, cancel, said)

    def _answer_so_far(self, text: str) -> tuple[str, tuple[int, ...]]:
        """An answer's words so far and the ids that spell them: the very ones made for it, where known."""
        if not text:
            return "", ()
        return text, tuple(self._answers.ids(text, start=True) or self.lm.tokenize(text, special=False))

    def _decode(self, request: Request, stats: Stats, t0: float, cancel: CancelToken,
                before: tuple[str, tuple[int, ...]]) -> Iterator[Event]:
        run = Decode(self.lm, request.options, cancel, self._clock, before)
        try:
            yield from run.events(stats, t0)
        finally:  # an answer stopped part way too: a continuation of it reuses its positions in the KV cache
            spelled = run.answer.spelled()
            if spelled is not None:
                self._answers.put(*spelled)

    def close(self) -> None:
        with self._flight.lock:
            for part in (self.lm, self.vision):
                close = getattr(part, "close", None)
                if close:
                    close()
