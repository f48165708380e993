"""The MCP tools as data and pure functions: what an agent sees (names, descriptions, schemas), how its
arguments become an engine request, and how an answer becomes a tool result. No I/O, no MCP package.

Two tools, deliberately: `ask_image(image, question, resolution)` and `describe_image(image, resolution)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, get_args

from ..engine.config import GenerationOptions, check_resolution
from ..engine.events import Result, StopReason
from ..engine.preprocess import FORMATS_HINT
from ..engine.prompt import clean_user_text
from .settings import McpSettings

ASK_IMAGE, DESCRIBE_IMAGE = "ask_image", "describe_image"

_IMAGE_FORM = "a base64 data URL, e.g. 'data:image/png;base64,iVBORw0KGgo...' (" + FORMATS_HINT + ")"
_IMAGE_HELP = (
    "The image inline as " + _IMAGE_FORM + ". Exactly one image per call. Remote http(s) URLs and file paths are "
    "refused: read or download the image yourself and send its bytes. At most {mb} MB per request and {mp} "
    "megapixels."
)
_RESOLUTION_HELP = (
    "Optional image size the model sees: 1024 (its trained size, reads fine text; default {default}) or 512 "
    "(about 3x faster, fine text suffers). A multiple of 64 from 64 to 1024."
)
_COMMON = (
    "FastVLM-0.5B runs locally on this computer's CPU: one request at a time (a call waits its turn for up to "
    "{wait:g} s, then fails with 'busy, retry'); an answer takes seconds, not minutes. It has no memory between calls: "
    "repeat any context in the question. Answers may be wrong: verify what matters."
)
ASK_DESCRIPTION = (
    "Answer one question about one image (a screenshot, photo, chart, document) with a local vision-language "
    "model. Returns the answer text; the structured result also gives the time to first token (ttft_s) and "
    "token counts. Ask short, concrete questions ('What error does this dialog show?', 'How many people are "
    "in the photo?'). " + _COMMON
)
DESCRIBE_DESCRIPTION = (
    "Describe one image (a screenshot, photo, chart, document) in a paragraph with a local vision-language "
    "model; use ask_image for a specific question. " + _COMMON
)


class ToolError(ValueError):
    """A tool call the agent must change: the message says what to send instead."""


@dataclass(frozen=True)
class Limits:
    """What the tool descriptions promise: the API's limits and the engine's resolution."""

    max_body_bytes: int
    max_image_pixels: int
    queue_wait_s: float
    resolution: int


@dataclass(frozen=True)
class ToolCall:
    """One validated tool call: the image's URL (not yet decoded), the question and the options."""

    image_url: str
    question: str
    resolution: int | None
    options: GenerationOptions


def tool_specs(limits: Limits) -> list[dict[str, Any]]:
    """`name`, `title`, `description`, `inputSchema`, `outputSchema` of each tool, for `mcp.types.Tool(**spec)`."""
    image = {"type": "string", "description": _IMAGE_HELP.format(
        mb=limits.max_body_bytes // 1_000_000, mp=limits.max_image_pixels // 1_000_000)}
    resolution = {"type": "integer", "minimum": 64, "maximum": 1024, "multipleOf": 64,
                  "description": _RESOLUTION_HELP.format(default=limits.resolution)}
    question = {"type": "string", "minLength": 1, "description": "The question about the image, in plain language."}
    common = {"wait": limits.queue_wait_s}
    return [
        {"name": ASK_IMAGE, "title": "Ask about an image", "description": ASK_DESCRIPTION.format(**common),
         "inputSchema": _object({"image": image, "question": question, "resolution": resolution},
                                ["image", "question"]),
         "outputSchema": OUTPUT_SCHEMA},
        {"name": DESCRIBE_IMAGE, "title": "Describe an image", "description": DESCRIBE_DESCRIPTION.format(**common),
         "inputSchema": _object({"image": image, "resolution": resolution}, ["image"]),
         "outputSchema": OUTPUT_SCHEMA},
    ]


def _object(properties: dict, required: list[str]) -> dict:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


OUTPUT_SCHEMA = _object({
    "answer": {"type": "string", "description": "the model's answer"},
    "ttft_s": {"type": "number", "description": "seconds from the start of the answer to its first token"},
    "total_s": {"type": "number", "description": "seconds the whole answer took (waiting in line excluded)"},
    "new_tokens": {"type": "integer"},
    "stop_reason": {"type": "string", "enum": list(get_args(StopReason)),
                    "description": "why the answer ended: " + ", ".join(get_args(StopReason))},
    "notices": {"type": "array", "items": {"type": "string"}, "description": "warnings about the answer"},
}, ["answer", "ttft_s"])


def parse_call(name: str, arguments: dict[str, Any], settings: McpSettings) -> ToolCall:
    """The call's image URL, question and options, or a `ToolError` saying what to send."""
    if name not in (ASK_IMAGE, DESCRIBE_IMAGE):
        raise ToolError(f"there is no tool {name!r} here: use {ASK_IMAGE} or {DESCRIBE_IMAGE}")
    image = arguments.get("image")
    if not isinstance(image, str) or not image.strip():
        raise ToolError("'image' is missing: send the image inline as " + _IMAGE_FORM)
    if name == DESCRIBE_IMAGE:
        question = settings.describe_question
    else:
        question = clean_user_text(str(arguments.get("question") or ""))
        if not question:
            raise ToolError("'question' is empty: ask something about the image, or call describe_image")
    return ToolCall(image, question, _resolution(arguments.get("resolution")),
                    GenerationOptions(max_new_tokens=settings.max_new_tokens))


def _resolution(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"'resolution' must be an integer such as 1024 or 512, got {value!r}")
    try:
        return check_resolution(value)
    except ValueError as e:
        raise ToolError(str(e)) from None


def structured_result(result: Result) -> dict[str, Any]:
    """The answer and its timings, as `OUTPUT_SCHEMA` describes."""
    stats = result.stats
    return {"answer": result.text, "ttft_s": round(stats.ttft_s, 4), "total_s": round(stats.total_s, 4),
            "new_tokens": stats.new_tokens, "stop_reason": stats.stop_reason, "notices": list(result.notices)}
