"""The OpenAI chat-completions wire format: request models (lenient: unknown fields are ignored) and
response/chunk builders. Fields marked *extension* are not OpenAI's."""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..engine.events import Stats, StopReason
from ..engine.plan import MAX_TURNS

# messages one request may hold: every turn the engine accepts (MAX_TURNS, two messages each, and the question),
# with room for system messages and split runs; validation stops at the first message beyond it (a 400)
MAX_MESSAGES = 4 * MAX_TURNS
MAX_PARTS = 64  # content parts in one message (text and images)
MAX_STOP = 4  # stop strings, OpenAI's limit: each is looked for after every token, while the engine is held
MAX_STOP_CHARS = 64
StopString = Annotated[str, Field(max_length=MAX_STOP_CHARS)]

FinishReason = Literal["stop", "length"]
_FINISH: dict[str, FinishReason] = {"end_of_turn": "stop", "end_of_text": "stop", "stop_string": "stop",
                                    "cancelled": "stop", "max_tokens": "length", "context_full": "length"}


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ImageURL(_Lenient):
    url: str
    detail: str | None = None  # accepted and ignored: the engine has one resolution per request


class ContentPart(_Lenient):
    type: str
    text: str | None = None
    image_url: ImageURL | str | None = None


class Message(_Lenient):
    role: str
    content: str | Annotated[list[ContentPart], Field(max_length=MAX_PARTS)] | None = None


class StreamOptions(_Lenient):
    include_usage: bool = False


class ChatCompletionRequest(_Lenient):
    model: str | None = None  # absent: this server's model
    messages: list[Message] = Field(min_length=1, max_length=MAX_MESSAGES)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)  # OpenAI's newer name; wins over max_tokens
    temperature: float | None = Field(None, ge=0, allow_inf_nan=False)  # absent: the engine's default (greedy)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=0)  # extension (llama.cpp's)
    repeat_penalty: float | None = Field(None, gt=0, allow_inf_nan=False)  # extension (llama.cpp's)
    seed: int | None = None
    stop: StopString | Annotated[list[StopString], Field(max_length=MAX_STOP)] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(1, ge=1)
    resolution: int | None = None  # extension: image size for this request (multiple of 64)
    queue_wait_s: float | None = Field(None, ge=0)  # extension: wait at most this long for the engine (0: never)
    continue_final_message: bool = False  # extension (vLLM's name): the last message is the assistant's answer
    # so far; the answer goes on from it and the response holds only what follows


class PrepareRequest(_Lenient):
    """Body of the `/v1/prepare` extension: encode an image while the engine is idle."""

    image_url: ImageURL | str
    resolution: int | None = None


def finish_reason(reason: StopReason) -> FinishReason:
    return _FINISH[reason]


def usage(stats: Stats) -> dict:
    return {"prompt_tokens": stats.prompt_tokens, "completion_tokens": stats.new_tokens,
            "total_tokens": stats.prompt_tokens + stats.new_tokens}


def timings(stats: Stats) -> dict:
    """Extension: the engine's own per-stage timings and counts (as llama-server's `timings`)."""
    return {**asdict(stats), "tokens_per_s": stats.tokens_per_s}


class Completion:
    """Ids and builders for one response: a `chat.completion` or a stream of `chat.completion.chunk`s."""

    def __init__(self, model: str):
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = model

    def _head(self, obj: str) -> dict:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model,
                "system_fingerprint": None}

    def message(self, text: str, stats: Stats, notices: list[str]) -> dict:
        choice = {"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                  "finish_reason": finish_reason(stats.stop_reason)}
        return {**self._head("chat.completion"), "choices": [choice], "usage": usage(stats),
                "timings": timings(stats), "notices": notices}

    def chunk(self, delta: dict, finish: FinishReason | None = None, **extra) -> dict:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return {**self._head("chat.completion.chunk"), "choices": [choice], **extra}

    def usage_chunk(self, stats: Stats) -> dict:
        """The last chunk when `stream_options.include_usage`: no choices, only usage."""
        return {**self._head("chat.completion.chunk"), "choices": [], "usage": usage(stats)}
