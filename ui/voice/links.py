"""Every person's voice line in one app (ui/voice/link.py is one line): the tokens the page's Start issues and the
WebSocket route they open, `/voice/link`."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from fastvlm.api.security import counted_client
from fastvlm.api.settings import ApiSettings

from ..settings import AppSettings
from .link import BUSY, HELLO_S, NO_HELLO, PATH, REPLACED, UNKNOWN, LinkLimits, VoiceLink, crowded
from .session import VoiceSession

if TYPE_CHECKING:
    from starlette.websockets import WebSocket

log = logging.getLogger(__name__)


class VoiceLinks:
    """Every person's voice line in one app: tokens issued by the page's Start, the WebSocket route they open."""

    def __init__(self, settings: AppSettings, limits: LinkLimits | None = None,
                 prepare: Callable[..., None] | None = None, api: ApiSettings | None = None) -> None:
        """`prepare(session, start_s, words="")`: encode and prefill the frame of a question that has begun, and
        its words heard so far (`VoiceLink`). `api`: its `trusted_proxies` and `forwarded_header` say who a line's
        client is (`client`), as they do for the API."""
        self.settings = settings
        self.limits = limits or LinkLimits()
        self.api = api or ApiSettings()
        self.prepare = prepare
        self._sessions: OrderedDict[str, VoiceSession] = OrderedDict()
        self._open: dict[str, VoiceLink] = {}
        self._lock = threading.Lock()

    def issue(self, session: VoiceSession) -> str:
        """A new token for `session`'s line (its older token stops working)."""
        token = secrets.token_urlsafe(24)
        with self._lock:
            if session.link_token:
                self._sessions.pop(session.link_token, None)
            self._sessions[token] = session
            session.line_refused = None
            idle = [t for t in self._sessions if t not in self._open]
            while len(self._sessions) > self.limits.max_tokens and idle:
                forgotten = self._sessions.pop(idle.pop(0))
                forgotten.line_refused = UNKNOWN[1]  # its line, if the page opens it now, is refused: say why
        session.link_token = token
        return token

    def revoke(self, token: str | None) -> None:
        """The session ended: its token no longer opens a line, and an open line closes at its next frame."""
        with self._lock:
            self._sessions.pop(token or "", None)
            link = self._open.pop(token or "", None)
        if link is not None:
            link.close()

    def session(self, token: str) -> VoiceSession | None:
        with self._lock:
            return self._sessions.get(token)

    @property
    def open_lines(self) -> int:
        return len(self._open)

    def client(self, websocket: WebSocket) -> str | None:
        """Whom a line counts against for `max_lines_per_client` (`counted_client`: as the API's requests; None,
        not counted, for loopback: one person's tabs on this machine)."""
        return counted_client(websocket, self.api)

    def _crowded(self, client: str | None, token: str) -> tuple[int, str] | None:
        """Under the lock: the refusal when `client` already has its most lines open (the line `token` opened
        before is replaced, so it does not count); a line stops counting as it leaves `_open`."""
        if client is None:
            return None
        cap = self.limits.max_lines_per_client
        lines = sum(1 for t, link in self._open.items() if t != token and link.client == client)
        return crowded(cap) if lines >= cap else None

    def route(self):
        from starlette.routing import WebSocketRoute

        return WebSocketRoute(PATH, self.serve)

    async def serve(self, websocket: WebSocket) -> None:
        """One page's line: its first message is the hello, `{"type": "hello", "token": ..., "rate": ...}` (the
        token is not in the URL, so it stays out of proxies' access logs); then PCM frames."""
        await websocket.accept()
        token, hello = await _hello(websocket)
        client = self.client(websocket)
        with self._lock:
            session = self._sessions.get(token or "")
            refused = (NO_HELLO if token is None else UNKNOWN if session is None
                       else BUSY if len(self._open) >= self.limits.max_lines else self._crowded(client, token))
            if refused is None:
                loop, out = asyncio.get_running_loop(), asyncio.Queue()
                post = functools.partial(loop.call_soon_threadsafe, out.put_nowait)
                link = VoiceLink(session, self.settings, post, self.prepare, client)
                refused = link.hello(hello)
            if refused is None:
                old, self._open[token] = self._open.get(token), link
        if refused is not None:
            log.info("voice line refused: %s", refused[1])
            if session is not None:
                session.line_refused = refused[1]  # said by the microphone check after Start (the page cannot)
            await websocket.close(*refused)
            return
        if old is not None:
            old.close()
        session.link = link
        writer = asyncio.create_task(_write(websocket, out))
        try:
            await self._read(websocket, link)
        finally:
            writer.cancel()
            link.close()
            with self._lock:
                if self._open.get(token) is link:
                    del self._open[token]
            if session.link is link:
                session.link = None

    async def _read(self, websocket: WebSocket, link: VoiceLink) -> None:
        """Reads the page's messages as they come; each frame is stamped on arrival and heard in order by
        `_hear`, so a frame that waits while the one before is heard keeps its own time (a question's end is
        when it reached the server, not when a busy server got to it: the page's readout counts from there)."""
        frames: asyncio.Queue = asyncio.Queue(self.limits.max_queued_frames)
        hearer = asyncio.create_task(_hear(link, frames))
        try:
            while not link.closed:
                message = await websocket.receive()
                now = time.monotonic()
                if message["type"] == "websocket.disconnect":
                    return
                data, text = message.get("bytes"), message.get("text")
                refused = link.told(text, now) if text is not None else link.check(data or b"", self.limits, now)
                if refused is not None:
                    log.info("voice line closed: %s", refused[1])
                    await websocket.close(*refused)
                    return
                if data:
                    await frames.put((data, now))  # full: the socket waits, and the page with it
            await websocket.close(*REPLACED)
        finally:
            hearer.cancel()


async def _hear(link: VoiceLink, frames: asyncio.Queue) -> None:
    """Runs while a line is open: hears its frames one at a time, in order, each at the time it arrived."""
    from anyio import to_thread

    while True:
        data, arrived = await frames.get()
        try:
            await to_thread.run_sync(link.hear, data, arrived)
        except Exception:  # as a frame the detector cannot use: logged and dropped, the line goes on (a dead
            log.exception("a microphone frame could not be heard")  # hearer would leave its queue full for good)


async def _hello(websocket: WebSocket) -> tuple[str | None, dict]:
    """The page's first message: (its token, the message), or (None, {}) when it is not a hello with a token."""
    try:
        received = await asyncio.wait_for(websocket.receive(), HELLO_S)
    except asyncio.TimeoutError:
        return None, {}
    try:
        message = json.loads(received.get("text") or "")
        token = message.get("token")
    except (ValueError, AttributeError):
        return None, {}
    return (token, message) if isinstance(token, str) and token else (None, {})


async def _write(websocket: WebSocket, out: asyncio.Queue) -> None:
    """Runs while a line is open: sends what its link posted, in order."""
    while True:
        message = await out.get()
        if isinstance(message, bytes):
            await websocket.send_bytes(message)
        else:
            await websocket.send_text(json.dumps(message))
