"""An OpenAI-compatible server (another instance of this app, llama-server...) behind the engine's interface.

`RemoteEngine` offers what the UI uses of `Engine`: `stream()` yielding the same typed events, `answer()`,
`prepare()`, `describe()`, `busy`, `close()`. Answers stream over httpx (Server-Sent Events); TTFT and
totals are measured here, on the client. Against this app's own API the server's stage timings (the
`timings` extension) and notices come along too.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import fields, replace
from pathlib import Path

import httpx
from PIL import Image as PILImage

from .engine import preprocess
from .engine.config import TRAINED_RESOLUTION
from .engine.events import Busy, Done, Event, FirstToken, InputError, Notice, Request, Result, Stats, TextDelta, collect
from .engine.prompt import Turn, image_turn

log = logging.getLogger(__name__)

_REASONS = {"length": "max_tokens", "stop": "end_of_turn"}
_STAT_FIELDS = {f.name for f in fields(Stats)}


class RemoteError(RuntimeError):
    """The server cannot be reached, refused the key or failed; the message names the URL and the fix."""


def _file_bytes(image) -> bytes | None:
    if isinstance(image, (str, os.PathLike)):
        if not os.path.isfile(image):
            preprocess.load_image(image)  # raises the InputError that says what is wrong with the path
        return Path(image).read_bytes()
    return bytes(image) if isinstance(image, (bytes, bytearray, memoryview)) else None


def _mime(data: bytes) -> str | None:
    try:
        with PILImage.open(io.BytesIO(data)) as im:
            mime = PILImage.MIME.get(im.format or "", "")
    except Exception:  # noqa: BLE001 - not an image PIL knows: decoding below says why
        return None
    return mime if mime.startswith("image/") else None


def image_data_url(image, image_format: str = "PNG") -> str:
    """`image` as a data URL: encoded files and bytes go as they are, pixels as PNG (lossless: the server
    sees what a local engine would) or JPEG (smaller, for webcam frames over slow links)."""
    data = _file_bytes(image)
    if data is not None:
        mime = _mime(data)
        if mime:
            return f"data:{mime};base64,{base64.b64encode(data).decode()}"
        image = data
    pil = preprocess.load_image(image)  # raises InputError for unusable input, as the engine would
    buf = io.BytesIO()
    pil.save(buf, image_format, **({"quality": 90} if image_format.upper() == "JPEG" else {}))
    return f"data:image/{image_format.lower()};base64,{base64.b64encode(buf.getvalue()).decode()}"


def _sse_data(lines: Iterator[str]) -> Iterator[str]:
    for line in lines:
        if line.startswith("data:"):
            yield line[5:].strip()


class RemoteEngine:
    """Drives a remote `/v1/chat/completions`. `base_url`: the server's root, with or without `/v1`."""

    def __init__(self, base_url: str, api_key: str | None = None, *, model: str | None = None,
                 image_format: str = "PNG", timeout_s: float = 300.0, clock=time.perf_counter):
        root = base_url.rstrip("/")
        self.base_url = root.removesuffix("/v1")
        self.model, self.image_format, self._clock = model, image_format, clock
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(base_url=self.base_url, headers=headers,
                                  timeout=httpx.Timeout(timeout_s, connect=10.0))
        self._active = 0
        self._guard = threading.Lock()
        self._prepare_supported = True
        # `answer_so_far` goes as the assistant's last message with `continue_final_message`, which only a server
        # that names that extension in its /health understands (`connect` asks)
        self.continues_answers = False

    @classmethod
    def connect(cls, base_url: str, api_key: str | None = None, **kw) -> RemoteEngine:
        """A `RemoteEngine` whose server answered `GET /v1/models` (and whose model is known)."""
        engine = cls(base_url, api_key, **kw)
        try:
            ids = [m["id"] for m in engine._get("/v1/models").get("data", [])]
        except Exception:
            engine.close()
            raise
        if engine.model is None:
            engine.model = ids[0] if ids else None
        engine.continues_answers = "continue_final_message" in engine._extensions()
        return engine

    def _extensions(self) -> list[str]:
        """The extensions this server's /health names ([] when it has none: another kind of server)."""
        try:
            health = self._get("/health")
        except (RemoteError, Busy, ValueError):  # InputError and bad JSON are ValueErrors
            return []
        extensions = health.get("extensions") if isinstance(health, dict) else None
        return extensions if isinstance(extensions, list) else []

    # -- requests -------------------------------------------------------------
    def stream(self, request: Request, wait: float | None = None, cancel=None) -> Iterator[Event]:
        """Events for one request, as `Engine.stream` yields them. `wait`: seconds the server may queue the
        request (None: the server's own limit; 0: `Busy` at once if busy). Closing the generator closes the
        HTTP response, which frees the server's engine (`cancel` is not sent over HTTP: the closed response stops
        the server's answer within one step)."""
        t0 = self._clock()
        if wait == 0 and self.busy:
            raise Busy("this client is still receiving another answer")
        body = {**self._body(request), **({"queue_wait_s": wait} if wait is not None else {})}
        with self._guard:
            self._active += 1
        try:
            with self._http.stream("POST", "/v1/chat/completions", json=body) as resp:
                if resp.status_code != 200:
                    resp.read()
                    raise self._error(resp)
                yield from self._events(resp, t0)
        except httpx.HTTPError as e:
            raise self._unreachable(e) from e
        finally:
            with self._guard:
                self._active -= 1

    def _events(self, resp: httpx.Response, t0: float) -> Iterator[Event]:
        t_first, finish, usage, server = None, "stop", {}, {}
        deltas = 0
        for data in _sse_data(resp.iter_lines()):
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            if "error" in chunk:
                raise RemoteError(f"{self.base_url} failed while answering: {chunk['error'].get('message')}")
            if chunk.get("notice"):
                yield Notice(chunk["notice"])
            usage = chunk.get("usage") or usage
            server = chunk.get("timings") or server
            for choice in chunk.get("choices", ())[:1]:
                text = (choice.get("delta") or {}).get("content")
                if text:
                    if t_first is None:
                        t_first = self._clock()
                        yield FirstToken(t_first - t0)
                    deltas += 1
                    yield TextDelta(text)
                finish = choice.get("finish_reason") or finish
        t_end = self._clock()
        if t_first is None:
            t_first = t_end
            yield FirstToken(t_end - t0)
        yield Done(self._stats(server, usage, finish, deltas, ttft=t_first - t0, decode=t_end - t_first,
                               total=t_end - t0))

    @staticmethod
    def _stats(server: dict, usage: dict, finish: str, deltas: int, *, ttft: float, decode: float,
               total: float) -> Stats:
        """What usage and finish_reason tell, overlaid with this app's `timings` extension where sent."""
        base = Stats(prompt_tokens=usage.get("prompt_tokens", 0), new_tokens=usage.get("completion_tokens", deltas),
                     stop_reason=_REASONS.get(finish, "end_of_turn"))
        base = replace(base, **{k: v for k, v in server.items() if k in _STAT_FIELDS})
        return replace(base, ttft_s=ttft, decode_s=decode, total_s=total)

    def answer(self, request: Request, wait: float | None = None) -> Result:
        return collect(self.stream(request, wait))

    def _body(self, request: Request) -> dict:
        if request.answer_so_far and not self.continues_answers:
            raise InputError(f"{self.base_url} cannot go on from an answer so far (its /health names no "
                             "continue_final_message extension)")
        url = image_data_url(request.image, self.image_format)
        messages: list[dict] = []
        turns = [*((t.question, t.answer) for t in request.history), (request.question, None)]
        at = image_turn(len(turns), request.image_with_question)  # the message that holds the image
        for i, (question, answer) in enumerate(turns):
            text = {"type": "text", "text": question}
            content = [{"type": "image_url", "image_url": {"url": url}}, text] if i == at else [text]
            messages.append({"role": "user", "content": content})
            if answer is not None:
                messages.append({"role": "assistant", "content": answer})
        if request.answer_so_far:
            messages.append({"role": "assistant", "content": request.answer_so_far})
        o = request.options
        body = {"messages": messages, "stream": True, "stream_options": {"include_usage": True},
                "max_tokens": o.max_new_tokens, "temperature": o.temperature, "top_p": o.top_p, "seed": o.seed,
                "stop": list(o.stop) or None, "top_k": o.top_k, "repeat_penalty": o.repeat_penalty,
                "resolution": request.resolution, "continue_final_message": bool(request.answer_so_far) or None}
        if self.model:
            body["model"] = self.model
        return {k: v for k, v in body.items() if v is not None}

    # -- the rest of the engine's interface -----------------------------------
    def prepare(self, image, resolution: int | None = None, words: str = "", history: tuple[Turn, ...] = (),
                image_with_question: bool = False) -> bool:
        """Ask the server to encode `image` while idle (`POST /v1/prepare`, this app's extension);
        False when it is busy, lacks the extension, or fails (preparing only saves time). The extension takes
        no question, so a prepare with `words` is not sent (it would only send the image again), nor one without
        an image (the turns alone), and `history` is not prefilled there (the image is still encoded ahead)."""
        if not self._prepare_supported or words or image is None:
            return False
        body = {"image_url": {"url": image_data_url(image, self.image_format)}, "resolution": resolution}
        try:
            resp = self._http.post("/v1/prepare", json=body)
        except httpx.HTTPError as e:
            log.debug("prepare on %s failed: %s", self.base_url, e)
            return False
        if resp.status_code in (404, 405):
            self._prepare_supported = False
        try:
            return resp.status_code == 200 and bool(resp.json().get("prepared"))
        except ValueError:
            return False

    def describe(self) -> dict:
        """The server's `/health` engine description, plus `backend` (the URL) and this client's `busy`."""
        try:
            info = dict(self._get("/health").get("engine", {}))
        except (RemoteError, Busy, ValueError) as e:  # InputError and bad JSON are ValueErrors
            info = {"model": self.model or "", "synthetic": False, "vision": "", "llm": "",
                    "resolution": TRAINED_RESOLUTION, "threads": None, "n_ctx": None, "error": str(e)}
        return {**info, "backend": self.base_url, "busy": self.busy}

    @property
    def busy(self) -> bool:
        """True while this client streams an answer (other clients of the server are not counted)."""
        return self._active > 0

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RemoteEngine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- HTTP -----------------------------------------------------------------
    def _get(self, path: str) -> dict:
        try:
            resp = self._http.get(path)
        except httpx.HTTPError as e:
            raise self._unreachable(e) from e
        if resp.status_code != 200:
            raise self._error(resp)
        return resp.json()

    def _unreachable(self, e: httpx.HTTPError) -> RemoteError:
        return RemoteError(f"lost or could not reach {self.base_url} ({type(e).__name__}: {e}): is the server "
                           "running, and is the --backend URL right?")

    def _error(self, resp: httpx.Response) -> Exception:
        try:
            message = resp.json()["error"]["message"]
        except Exception:  # noqa: BLE001 - not OpenAI-shaped: show the start of the body
            message = resp.text[:200] or resp.reason_phrase
        if resp.status_code == 503:
            return Busy(message)
        if resp.status_code in (400, 413, 422):
            return InputError(message)
        if resp.status_code in (401, 403):
            return RemoteError(f"{self.base_url} refused the request ({message}): check the API key")
        return RemoteError(f"{self.base_url} answered HTTP {resp.status_code}: {message}")
