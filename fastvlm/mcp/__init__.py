"""The app as an MCP server: two tools (`ask_image`, `describe_image`) on the engine, over streamable HTTP
at `/mcp` beside the UI and the OpenAI-compatible API (see README, "Agents (MCP)").

`tools` (names, descriptions, schemas, argument checks) and `settings` need only the standard library;
`server` needs the `mcp` package (requirements.txt). Nothing here loads a model.
"""

from .settings import McpSettings
from .tools import ASK_IMAGE, DESCRIBE_IMAGE, ToolError

__all__ = ["ASK_IMAGE", "DESCRIBE_IMAGE", "McpSettings", "ToolError"]
