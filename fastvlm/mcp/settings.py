"""How the MCP tools answer. Only `app.py` maps flags and environment onto `McpSettings`; who may call
and how much they may send (key, body size, queue wait) are the HTTP API's `ApiSettings`, shared."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class McpSettings:
    """Settings of the MCP server (`/mcp`, streamable HTTP)."""

    max_new_tokens: int = 256  # the longest answer a tool call gets
    describe_question: str = "Describe the image in detail."  # what describe_image asks
    server_name: str = "fastvlm"  # the name MCP clients show for this server

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")
        if not self.describe_question.strip():
            raise ValueError("describe_question is empty: give the question describe_image asks")
