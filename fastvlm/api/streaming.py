"""The blocking engine driven from the event loop: admission (single flight, bounded queue), one `next()`
per worker-thread hop, and responses that close the engine's generator however they end."""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import anyio
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from ..engine.cancel import CancelToken
from ..engine.events import Done, Event, Notice, ResultBuilder, Stats, TextDelta
from ..engine.events import Request as EngineRequest
from .errors import busy_error, sse_error
from .schema import Completion, finish_reason, timings
from .security import is_loopback
from .settings import ApiSettings

log = logging.getLogger(__name__)
GONE_POLL_S = 0.1  # how often a request that has not started answering asks whether its client is still there


class EngineEvents:
    """Async iteration over `engine.stream()`. The generator runs in worker threads, never two steps at once
    (a cancelled step finishes before the task unwinds), and `aclose()` closes it, freeing the engine."""

    def __init__(self, events: Iterator[Event], limiter: anyio.CapacityLimiter, on_close: Callable[[], None],
                 cancel: CancelToken | None = None):
        self._events, self._limiter, self._on_close = events, limiter, on_close
        self._cancel = cancel  # stops an encode or prefill in progress when the client goes away
        self._ahead: list[Event] = []
        self._closed = False

    async def _step(self) -> Event | None:
        return await anyio.to_thread.run_sync(next, self._events, None, limiter=self._limiter)

    async def start(self, gone: Callable[[], Awaitable[bool]] | None = None) -> None:
        """Take the first event now (the queue wait, encode and prefill come before it): raises `Busy` after the
        queue wait, `InputError` for a bad image. Meanwhile `gone()` is asked every GONE_POLL_S, and the request
        is cancelled when it says the client left - or when this task is cancelled (an MCP call the client
        cancels) - so a client that gives up costs no encode and no prefill."""
        taken = False

        async def watch() -> None:
            try:
                while gone is None or not await gone():
                    await anyio.sleep(GONE_POLL_S)
                log.info("the client went away before its answer began: stopped")
                self._cancel.cancel()
            except anyio.get_cancelled_exc_class():
                if not taken:
                    self._cancel.cancel()
                raise

        first, error = None, None
        async with anyio.create_task_group() as tg:
            if self._cancel is not None:
                tg.start_soon(watch)
            try:
                first = await self._step()
            except Exception as e:  # noqa: BLE001 - raised below, outside the task group (which would wrap it)
                error = e
            taken = True
            tg.cancel_scope.cancel()
        if error is not None:
            raise error
        if first is not None:
            self._ahead.append(first)

    def __aiter__(self) -> EngineEvents:
        return self

    async def __anext__(self) -> Event:
        event = self._ahead.pop() if self._ahead else await self._step()
        if event is None:
            raise StopAsyncIteration
        return event

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._cancel is not None:
            self._cancel.cancel()  # the step in flight (encode, prefill, a token) ends at once
        try:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._events.close, limiter=self._limiter)
        finally:
            self._on_close()


class Gate:
    """Admission of API requests: one runs, up to `max_waiting` wait (`queue_wait_s` at most), more get a 503;
    one client (`security.counted_client`; this machine's not counted) has at most `max_per_client` of them."""

    def __init__(self, engine, settings: ApiSettings):
        self.engine, self.settings = engine, settings
        self._limiter = anyio.CapacityLimiter(settings.max_waiting + 1)
        self.decoding = anyio.CapacityLimiter(settings.max_decoding)  # the threads that decode images
        self._admitted = 0  # changed only on the event loop, so check-and-increment is atomic
        self._by_client: Counter[str] = Counter()  # the same, for each client that has a share

    def check_room(self, client: str | None = None) -> None:
        """A 503 now if a request would not be admitted (before its image is decoded, which costs memory)."""
        if self._admitted > self.settings.max_waiting:
            raise busy_error(f"{self._admitted} requests are already running or waiting: try again shortly",
                             self.settings.retry_after_s)
        if self._counted(client) and self._by_client[client] >= self.settings.max_per_client:
            raise busy_error(f"this client already has {self._by_client[client]} requests running or waiting, "
                             "as many as one client may, so that others get a turn: send the next when one "
                             "has finished", self.settings.retry_after_s)

    def _counted(self, client: str | None) -> bool:
        return bool(client and self.settings.max_per_client and not is_loopback(client))

    def _admit(self, client: str | None) -> Callable[[], None]:
        """Admits a request (or raises `Busy`); returns what gives its place back."""
        self.check_room(client)
        self._admitted += 1
        counted = self._counted(client)
        if counted:
            self._by_client[client] += 1

        def release() -> None:
            self._admitted -= 1
            if counted:
                self._by_client[client] -= 1
                if not self._by_client[client]:
                    del self._by_client[client]

        return release

    async def open(self, request: EngineRequest, wait: float | None = None,
                   gone: Callable[[], Awaitable[bool]] | None = None, client: str | None = None) -> EngineEvents:
        """The engine's events for `request`, once it has its turn (waiting at most `queue_wait_s`, or `wait`
        if shorter) and the first event is there; `Busy` (a 503) otherwise. `gone()`: whether the client left
        (then the wait, encode or prefill stops, and the events end with stop reason "cancelled"). `client`: who
        asks (`security.counted_client`), for `max_per_client`."""
        release = self._admit(client)
        wait = self.settings.queue_wait_s if wait is None else min(wait, self.settings.queue_wait_s)
        cancel = CancelToken()
        events = EngineEvents(self.engine.stream(request, wait=wait, cancel=cancel), self._limiter, release, cancel)
        try:
            await events.start(gone)
        except BaseException:
            await events.aclose()
            raise
        return events

    async def prepare(self, image, resolution: int | None, client: str | None = None) -> bool:
        release = self._admit(client)
        try:
            return await anyio.to_thread.run_sync(self.engine.prepare, image, resolution, limiter=self._limiter)
        finally:
            release()


class EngineResponse(StreamingResponse):
    """A streaming response that closes the engine's generator when it ends, fails or the client leaves."""

    def __init__(self, body: AsyncIterator[str], events: EngineEvents, media_type: str,
                 headers: dict[str, str] | None = None):
        super().__init__(body, media_type=media_type, headers=headers)
        self._events = events

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self._events.aclose()


def _data(obj: dict) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


async def sse(events: EngineEvents, completion: Completion, include_usage: bool) -> AsyncIterator[str]:
    """OpenAI's stream: a role chunk, content chunks, a chunk with `finish_reason`, usage if asked, [DONE]."""
    yield _data(completion.chunk({"role": "assistant", "content": ""}))
    try:
        async for event in events:
            if isinstance(event, TextDelta):
                yield _data(completion.chunk({"content": event.text}))
            elif isinstance(event, Notice):
                yield _data(completion.chunk({}, notice=event.message))  # extension
            elif isinstance(event, Done):
                stats = event.stats
                yield _data(completion.chunk({}, finish_reason(stats.stop_reason), timings=timings(stats)))
                if include_usage:
                    yield _data(completion.usage_chunk(stats))
    except Exception as e:  # noqa: BLE001 - headers are sent: report in-band, as OpenAI does (and log)
        yield sse_error(e)
        return
    yield "data: [DONE]\n\n"


async def plain_text(events: EngineEvents) -> AsyncIterator[str]:
    """The answer's text alone (`/predict`); an error after the start ends the text early and is logged."""
    try:
        async for event in events:
            if isinstance(event, TextDelta):
                yield event.text
    except Exception:  # plain text has no way to carry an error
        log.exception("streaming a /predict answer failed")


async def collect(events: EngineEvents, request: Request) -> tuple[str, Stats, list[str]] | None:
    """Drain the events (None if the client went away: the caller's `aclose()` then frees the engine)."""
    builder = ResultBuilder()
    async for event in events:
        builder.add(event)
        if await request.is_disconnected():
            return None
    result = builder.result()
    return result.text, result.stats, list(result.notices)
