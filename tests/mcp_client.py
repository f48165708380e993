"""The official `mcp` Python client over streamable HTTP, as an agent would connect (shared by MCP tests)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


@asynccontextmanager
async def session(url: str, key: str | None = None, headers: dict[str, str] | None = None
                  ) -> AsyncIterator[ClientSession]:
    """An initialized MCP session with the server at `url` (e.g. http://127.0.0.1:7860/mcp); `headers` go with
    every request (X-Forwarded-For, as a proxy would add)."""
    headers = {**(headers or {}), **({"Authorization": f"Bearer {key}"} if key else {})}
    async with httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(60, read=120)) as http, \
            streamable_http_client(url, http_client=http) as (read, write, _), ClientSession(read, write) as s:
        await s.initialize()
        yield s


def run(url: str, work: Callable[[ClientSession], Awaitable[Any]], key: str | None = None,
        headers: dict[str, str] | None = None) -> Any:
    """`work(session)` on a fresh session, from synchronous test code."""

    async def main():
        async with session(url, key, headers) as s:
            return await work(s)

    return asyncio.run(main())


def text(result) -> str:
    """The text of a tool result's content (the answer, or the error message when `isError`)."""
    return "".join(getattr(c, "text", "") for c in result.content)
