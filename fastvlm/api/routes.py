"""The API's endpoints on one `APIRouter`, to mount beside the Gradio app (same process, port and engine).

`POST /v1/chat/completions` (OpenAI), `GET /v1/models`, `POST /v1/prepare` (extension), `POST /predict`
(multipart, plain-text stream), `GET /health`. Every endpoint except `/health` checks the API key and, on a
loopback bind, the Host and Origin headers.
"""

from __future__ import annotations

import os
import re
import time

import anyio
from fastapi import APIRouter, FastAPI
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..engine import preprocess
from ..engine.config import GenerationOptions
from ..engine.events import Request as EngineRequest
from . import convert, images
from .errors import ApiError, route_class
from .schema import ChatCompletionRequest, Completion, PrepareRequest
from .security import authorize, check_bind, check_host, counted_client, is_loopback, judged_client, read_body
from .settings import ApiSettings
from .streaming import EngineResponse, Gate, collect, plain_text, sse

_NO_BUFFERING = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_POSITIVE = re.compile(r"0*[1-9][0-9]{0,8}")  # ASCII digits only (str.isdigit takes "²"), at most 999,999,999


def build_router(engine, settings: ApiSettings, host: str | None = None, gate: Gate | None = None) -> APIRouter:
    """All endpoints, bound to `engine` (an `Engine`, or anything with its `stream`/`prepare`/`describe`).
    `host`: the address the server listens on; on loopback, Host/Origin must name this machine (`check_host`).
    `gate`: the queue to share with other ways in (the MCP tools), so `max_waiting` counts them all."""
    local = is_loopback(host)

    async def before(request: Request, path: str) -> None:
        if path != "/health":
            if local:
                check_host(request, settings)
            authorize(request, settings)
        await read_body(request, settings.max_body_bytes)

    router = APIRouter(route_class=route_class(before, settings.retry_after_s, lambda r: judged_client(r, settings)),
                       tags=["fastvlm api"])
    api = _Endpoints(engine, settings, gate or Gate(engine, settings))
    router.add_api_route("/v1/chat/completions", api.chat_completions, methods=["POST"])
    router.add_api_route("/v1/prepare", api.prepare, methods=["POST"])
    router.add_api_route("/predict", api.predict, methods=["POST"])
    router.add_api_route("/v1/models", api.models, methods=["GET"])
    router.add_api_route("/v1/models/{model_id}", api.model, methods=["GET"])
    router.add_api_route("/health", api.health, methods=["GET"])
    return router


class _Endpoints:
    """The handlers, bound to one engine (behind its `Gate`) and the API's settings."""

    def __init__(self, engine, settings: ApiSettings, gate: Gate):
        self.engine, self.settings, self.gate = engine, settings, gate
        self.started = time.time()
        self.max_pixels = images.max_pixels(engine)

    def continues(self) -> bool:  # asked each time: a background load's engine may answer differently once loaded
        return bool(getattr(self.engine, "continues_answers", False))

    def check_model(self, model: str | None) -> None:
        if model not in (None, self.settings.model_id):
            raise ApiError(404, f"the model {model!r} does not exist here: use {self.settings.model_id!r} "
                           "(GET /v1/models lists it)", param="model", code="model_not_found")

    def client(self, request: Request) -> str | None:
        return counted_client(request, self.settings)

    async def decode(self, url: str, client: str | None, param: str = "image_url"):
        """A 400 before queueing; a 503 before decoding when the queue (or `client`'s share) is full (decoding
        can take GBs)."""
        self.gate.check_room(client)
        return await images.decode_image(url, self.settings, self.max_pixels, param, self.gate.decoding)

    async def chat_completions(self, body: ChatCompletionRequest, request: Request) -> Response:
        self.check_model(body.model)
        chat = convert.chat_input(body)
        if chat.answer_so_far and not self.continues():
            raise ApiError(400, "this server's engine cannot go on from an answer so far (it is itself a client of "
                           "another server)", param="continue_final_message", code="unsupported")
        client = self.client(request)
        image = await self.decode(chat.image_url, client)
        engine_request = EngineRequest(image, chat.question, chat.history, chat.options, chat.resolution,
                                       chat.answer_so_far, chat.image_with_question)
        events = await self.gate.open(engine_request, body.queue_wait_s, gone=request.is_disconnected, client=client)
        completion = Completion(self.settings.model_id)
        if body.stream:
            include_usage = bool(body.stream_options and body.stream_options.include_usage)
            return EngineResponse(sse(events, completion, include_usage), events, "text/event-stream",
                                  _NO_BUFFERING)
        try:
            result = await collect(events, request)
        finally:
            await events.aclose()
        if result is None:
            return Response(status_code=499)  # the client left; nobody reads this
        return JSONResponse(completion.message(*result))

    async def prepare(self, body: PrepareRequest, request: Request) -> dict:
        """Extension: encode the image and prefill it while the engine is idle (False if it is busy)."""
        client = self.client(request)
        image = await self.decode(convert.url_of(body.image_url, "image_url"), client)
        return {"prepared": await self.gate.prepare(image, convert.resolution(body.resolution), client)}

    async def predict(self, request: Request) -> Response:
        """The older CPU pipeline's endpoint: multipart `image` (+ `prompt`, `max_tokens`) -> plain text."""
        async with request.form() as form:
            upload, prompt = form.get("image"), str(form.get("prompt") or "")
            if not isinstance(upload, UploadFile):
                raise ApiError(400, "send the image as the multipart file field 'image' (curl -F image=@photo.jpg)",
                               param="image", code="image_required")
            max_tokens = str(form.get("max_tokens") or GenerationOptions.max_new_tokens)
            if not _POSITIVE.fullmatch(max_tokens):
                raise ApiError(400, "max_tokens must be a positive integer", param="max_tokens")
            data = await upload.read()
        client = self.client(request)
        self.gate.check_room(client)
        image = await anyio.to_thread.run_sync(preprocess.load_image, data, self.max_pixels,
                                               limiter=self.gate.decoding)
        req = EngineRequest(image, prompt, options=GenerationOptions(max_new_tokens=int(max_tokens)))
        events = await self.gate.open(req, gone=request.is_disconnected, client=client)
        return EngineResponse(plain_text(events), events, "text/plain; charset=utf-8", _NO_BUFFERING)

    async def models(self) -> dict:
        return {"object": "list", "data": [_model_card(self.settings.model_id, self.started)]}

    async def model(self, model_id: str) -> dict:
        self.check_model(model_id)
        return _model_card(model_id, self.started)

    async def health(self) -> dict:
        """Liveness, what is loaded (file names, not paths) and whether the engine is answering now."""
        info = {k: _without_paths(v) for k, v in self.engine.describe().items()}
        for key in ("vision", "llm"):
            if key in info:
                info[key] = os.path.basename(str(info[key]))
        extensions = ["prepare", *(["continue_final_message"] if self.continues() else [])]
        return {"status": "ok", "model_id": self.settings.model_id, "engine": info, "extensions": extensions,
                "state": "busy" if info.get("busy") else "idle",
                "uptime_s": round(time.time() - self.started, 1)}


_ABSOLUTE_PATH = re.compile(r"(?<![\w:/.~-])(?:~|[A-Za-z]:)?[\\/](?:[^\\/\s'\"(),;]+[\\/])*([^\\/\s'\"(),;]*)")


def _without_paths(value):
    """`value` with absolute paths cut to their last part (`/root/.cache/x/llm.gguf` -> `llm.gguf`): /health needs
    no key, and where this machine keeps its files is none of a caller's business."""
    return _ABSOLUTE_PATH.sub(lambda m: m.group(1), value) if isinstance(value, str) else value


def _model_card(model_id: str, created: float) -> dict:
    return {"id": model_id, "object": "model", "created": int(created), "owned_by": "fastvlm"}


def mount_api(app: FastAPI, engine, settings: ApiSettings, *, host: str | None, share: bool = False) -> FastAPI:
    """Check the bind (see `check_bind`) and add the API's routes to `app`; returns `app`."""
    check_bind(host, settings, share)  # a share link needs a key, and arrives under the link's name
    app.include_router(build_router(engine, settings, None if share else host))
    return app
