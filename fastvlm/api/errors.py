"""OpenAI-style errors: `{"error": {"message", "type", "param", "code"}}`, for every failure of this API.

FastAPI's exception handlers belong to the whole app (Gradio's, when mounted beside it), so the router
carries its own: `route_class()` wraps each endpoint, checks the key and the body size before anything
is parsed, and turns every error into the OpenAI shape.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable

from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..engine.events import Busy, InputError

log = logging.getLogger(__name__)

_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
          404: "invalid_request_error", 413: "invalid_request_error", 422: "invalid_request_error",
          503: "server_busy"}


class ApiError(Exception):
    """An error the client should see: HTTP status, a message saying what to do, optional param and code."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers or {}

    def body(self) -> dict:
        kind = _TYPES.get(self.status, "server_error")
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)


def busy_error(message: str, retry_after_s: int) -> ApiError:
    return ApiError(503, message, code="engine_busy", headers={"Retry-After": str(retry_after_s)})


def from_validation(exc: RequestValidationError) -> ApiError:
    """Malformed JSON is a 400 (as OpenAI answers), and so are too many messages; a well-formed body of the
    wrong shape is a 422."""
    errors = exc.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        return ApiError(400, "the request body is not valid JSON: check quoting and commas", code="json_invalid")
    # a limit broken says most (a value that is str | list gets an error for each kind it is not)
    first = next((e for e in errors if str(e.get("type", "")).endswith("too_long")), errors[0] if errors else {})
    if first.get("type") == "too_long" and tuple(first.get("loc", ())) == ("body", "messages"):
        ctx = first.get("ctx") or {}
        return ApiError(400, f"{ctx.get('actual_length', 'these')} messages are more than the "
                        f"{ctx.get('max_length')} this server accepts: send only the recent turns",
                        param="messages", code="too_many_messages")
    loc = [str(p) for p in first.get("loc", ()) if p != "body" and not _union_member(p)]
    param = ".".join(loc) or None
    message = f"{param}: {first.get('msg', 'invalid value')}" if param else first.get("msg", "invalid request body")
    if len(errors) > 1:
        message += f" (and {len(errors) - 1} more problem(s))"
    return ApiError(422, message, param=param, code="invalid_value")


def _union_member(part) -> bool:
    """A part of an error's location that names which kind of a union was tried ('str', 'list[ContentPart]')."""
    return isinstance(part, str) and (part in ("str", "int", "float") or "[" in part or part.startswith("constrained"))


def to_api_error(exc: Exception, retry_after_s: int) -> ApiError:
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, RequestValidationError):
        return from_validation(exc)
    if isinstance(exc, Busy):
        return busy_error(str(exc), retry_after_s)
    if isinstance(exc, InputError):  # the engine's refusals of unusable input (other ValueErrors are bugs: a 500)
        return ApiError(400, str(exc), code="invalid_input")
    if isinstance(exc, MultiPartException):
        return ApiError(400, f"the multipart body is malformed ({exc.message})", code="invalid_multipart")
    if isinstance(exc, HTTPException):
        return ApiError(exc.status_code, str(exc.detail), headers=dict(exc.headers or {}))
    log.exception("API request failed")
    return ApiError(500, f"internal error ({type(exc).__name__}); the server log has the details",
                    code="internal_error")


def log_refusal(client: str, method: str, path: str, err: ApiError) -> None:
    """The operator's line for a refused or failed request: client (as judged), method, path, status, reason.
    Never the key, the body or the client's own words (the reason is the error's code)."""
    level = logging.ERROR if err.status >= 500 and err.status != 503 else logging.WARNING
    log.log(level, "refused client=%s %s %s status=%d reason=%s", client, method, path, err.status,
            err.code or _TYPES.get(err.status, "server_error"))


Check = Callable[[Request, str], Awaitable[None]]  # (request, the route's path)
Who = Callable[[Request], str]  # the client as judged, for the log line


def route_class(before: Check, retry_after_s: int, who: Who) -> type[APIRoute]:
    """An `APIRoute` that runs `before(request, path)` (key, body size) first, answers errors OpenAI-style and
    logs each one (`log_refusal`)."""

    class OpenAIRoute(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Awaitable[Response]]:
            handler = super().get_route_handler()

            async def run(request: Request) -> Response:
                try:
                    await before(request, self.path)
                    return await handler(request)
                except Exception as exc:  # noqa: BLE001 - every error leaves as OpenAI-style JSON
                    err = to_api_error(exc, retry_after_s)
                    log_refusal(who(request), request.method, request.url.path, err)
                    return err.response()

            return run

    return OpenAIRoute


def sse_error(exc: Exception) -> str:
    """An error after a stream has started: OpenAI's clients raise on a `data: {"error": ...}` event."""
    return f"data: {json.dumps(to_api_error(exc, 0).body())}\n\n"
