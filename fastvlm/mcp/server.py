"""The tools of `tools.py` on the engine, served over MCP's streamable HTTP beside the app (same port).

Stateless and JSON-only (no session, no server-sent stream): every POST carries one JSON-RPC message and
gets one answer, which is all a tool that returns a finished answer needs. The request passes the HTTP
API's checks first (API key, body size), the image the API's decoding and limits, and the call the API's
admission (`Gate`: single flight, a bounded wait, then a busy error).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from ..api import images
from ..api.errors import ApiError, log_refusal, to_api_error
from ..api.security import authorize, counted_client, is_loopback, judged_client, read_body
from ..api.settings import ApiSettings
from ..api.streaming import Gate
from ..engine.config import TRAINED_RESOLUTION
from ..engine.events import Request as EngineRequest
from ..engine.events import ResultBuilder
from .settings import McpSettings
from .tools import Limits, ToolError, parse_call, structured_result, tool_specs

log = logging.getLogger(__name__)

PATH = "/mcp"
INSTRUCTIONS = ("A local vision-language model (FastVLM) on this computer's CPU. Send one image per call as a "
                "base64 data URL; ask_image answers a question about it, describe_image describes it.")


# the HTTP request of the tool call being answered: the manager runs the call in a task of its own, which
# inherits this context, so the call can tell when its client has gone
_http_request: contextvars.ContextVar[Request | None] = contextvars.ContextVar("mcp_http_request", default=None)


def tool_error(exc: Exception, retry_after_s: int) -> ApiError:
    """The API's error for a failed tool call (an unexpected one's traceback is logged here, once)."""
    if isinstance(exc, ToolError):
        return ApiError(400, str(exc), code="invalid_arguments")
    return to_api_error(exc, retry_after_s)


def error_text(err: ApiError, retry_after_s: int) -> str:
    """What the agent reads when a call fails: the API's message for the same failure."""
    if err.code == "engine_busy":
        return f"busy, retry in {retry_after_s} s: {err.message}"
    return err.message


def _dns_rebinding(host: str | None, allowed_hosts: tuple[str, ...] = ()) -> TransportSecuritySettings:
    """On loopback, only local Host/Origin headers, or `allowed_hosts` (a reverse proxy's public name): a web page
    cannot reach the tools through DNS rebinding. Off loopback the API key protects the server, and any name may
    reach it. Names are lowercased here and in each request (`_lowercase_names`): host names ignore case, the
    MCP SDK's check does not."""
    if not is_loopback(host):
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    names = ["127.0.0.1", "localhost", "[::1]", *(h.lower() for h in allowed_hosts)]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                     allowed_hosts=names + [f"{n}:*" for n in names],
                                     allowed_origins=[f"{scheme}://{n}{port}" for scheme in ("http", "https")
                                                      for n in names for port in ("", ":*")])


def _lowercase_names(scope: Scope) -> Scope:
    """`scope` with its Host and Origin headers lowercased, as `_dns_rebinding`'s names are."""
    headers = [(k, v.lower() if k in (b"host", b"origin") else v) for k, v in scope["headers"]]
    return {**scope, "headers": headers}


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands out the already-read body once, then the client's own messages."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay():
        return pending.pop() if pending else await receive()

    return replay


class McpServer:
    """`ask_image` and `describe_image` on `engine` at `/mcp`. Needs `lifespan` running (pass it to the app).

    server = McpServer(engine, ApiSettings(), host="127.0.0.1")
    demo.launch(app_kwargs={"routes": server.routes, "lifespan": server.lifespan})
    """

    def __init__(self, engine, api: ApiSettings, settings: McpSettings | None = None, *, host: str | None,
                 gate: Gate | None = None):
        """`gate`: the queue shared with the HTTP API (`build_router`), so `max_waiting` counts both."""
        self.engine, self.api, self.settings = engine, api, settings or McpSettings()
        self._gate = gate or Gate(engine, api)
        self._images = replace(api, allow_remote_image_urls=False)  # never fetch a URL on a tool call's behalf
        self._manager = StreamableHTTPSessionManager(self._build(), json_response=True, stateless=True,
                                                     security_settings=_dns_rebinding(host, api.allowed_hosts),
                                                     max_request_body_size=api.max_body_bytes)

    @property
    def routes(self) -> list[Route]:
        methods = ["GET", "POST", "DELETE"]
        return [Route(PATH, self, methods=methods), Route(PATH + "/", self, methods=methods)]

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any = None) -> AsyncIterator[None]:
        async with self._manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The HTTP endpoint: the API's key and body-size checks, then MCP."""
        request = Request(scope, receive)
        try:
            authorize(request, self.api)
            await read_body(request, self.api.max_body_bytes)
        except ApiError as e:
            log_refusal(judged_client(request, self.api), request.method, request.url.path, e)
            await e.response()(scope, receive, send)
            return
        if request.method == "POST":
            receive = _replay(await request.body(), receive)
        reset = _http_request.set(request)
        try:
            await self._manager.handle_request(_lowercase_names(scope), receive, send)
        finally:
            _http_request.reset(reset)

    def limits(self) -> Limits:
        info = self.engine.describe()
        return Limits(self.api.max_body_bytes, images.max_pixels(self.engine), self.api.queue_wait_s,
                      int(info.get("resolution") or TRAINED_RESOLUTION))

    async def answer(self, name: str, arguments: dict[str, Any]) -> tuple[list[types.TextContent], dict]:
        """One tool call: the answer as text content and as a structured result; raises what went wrong."""
        call = parse_call(name, arguments, self.settings)
        builder, http = ResultBuilder(), _http_request.get()
        client = counted_client(http, self.api) if http is not None else None
        self._gate.check_room(client)  # a busy error before the image is decoded (that can take GBs), not after
        image = await images.decode_image(call.image_url, self._images, images.max_pixels(self.engine), "image",
                                          self._gate.decoding)
        events = await self._gate.open(EngineRequest(image, call.question, (), call.options, call.resolution),
                                       gone=http.is_disconnected if http is not None else None, client=client)
        try:
            async for event in events:
                builder.add(event)
                if http is not None and await http.is_disconnected():
                    log.info("MCP %s: the client went away; answer stopped", name)
                    break
        finally:
            await events.aclose()  # also when the client cancels the call or went away: the engine is freed at once
        result = builder.result()
        return [types.TextContent(type="text", text=result.text)], structured_result(result)

    def _log_refusal(self, tool: str, err: ApiError) -> None:
        """The API's log line for a failed tool call (status: the HTTP status the API would have answered)."""
        http = _http_request.get()
        client = judged_client(http, self.api) if http is not None else "unknown"
        log_refusal(client, "MCP", f"{PATH} tools/call {tool}", err)

    def _build(self) -> Server:
        server: Server = Server(self.settings.server_name, instructions=INSTRUCTIONS)

        @server.list_tools()
        async def list_tools() -> list[types.Tool]:
            return [types.Tool(**spec) for spec in tool_specs(self.limits())]

        @server.call_tool()
        async def call_tool(name: str, arguments: dict[str, Any]):
            try:
                return await self.answer(name, arguments)
            except Exception as e:  # noqa: BLE001 - every failure reaches the agent as a readable tool error
                err = tool_error(e, self.api.retry_after_s)
                self._log_refusal(name, err)
                text = error_text(err, self.api.retry_after_s)
                return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=True)

        return server
