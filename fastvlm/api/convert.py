"""OpenAI chat messages -> the engine's one-image conversation (pure functions, no I/O).

FastVLM's prompt has a fixed system prompt and one image, so:
- `system`/`developer` messages are ignored (the model was trained with "You are a helpful assistant.");
- exactly one `image_url` part, in any user message, is the conversation's image: it stays in the last user
  message when it was sent there after earlier turns (`Request.image_with_question`: the earlier turns come
  before it as text), and goes in the first turn from any other message;
- consecutive messages of one role are joined with newlines, text parts of one message likewise;
- the messages must alternate user/assistant from a user message and end with a user message: the
  finished exchanges become `Turn`s (history), the last user message is the question;
- with `continue_final_message` (vLLM's name) they end with the assistant's answer so far instead, which the
  answer goes on from (`Request.answer_so_far`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..engine.config import GenerationOptions, check_resolution
from ..engine.plan import MAX_TURNS
from ..engine.prompt import Turn
from .errors import ApiError
from .schema import ChatCompletionRequest, ContentPart, ImageURL

_IGNORED_ROLES = {"system", "developer"}


@dataclass(frozen=True)
class ChatInput:
    image_url: str  # a data: URL, or http(s) when the server allows it
    question: str
    history: tuple[Turn, ...]
    options: GenerationOptions
    resolution: int | None
    answer_so_far: str = ""
    image_with_question: bool = False  # the image was sent in the last user message, after earlier turns


def _bad(message: str, param: str | None = None, code: str = "invalid_request") -> ApiError:
    return ApiError(400, message, param=param, code=code)


def url_of(image_url: ImageURL | str | None, param: str) -> str:
    if isinstance(image_url, ImageURL):
        return image_url.url
    if isinstance(image_url, str) and image_url:
        return image_url
    raise _bad("an image_url part needs {'url': 'data:image/...;base64,...'}", param)


def _parts_text(parts: list[ContentPart], role: str, i: int, images: list[tuple[str, str]]) -> str:
    texts: list[str] = []
    for j, part in enumerate(parts):
        param = f"messages[{i}].content[{j}]"
        if part.type == "text":
            texts.append(part.text or "")
        elif part.type == "image_url":
            if role != "user":
                raise _bad(f"only user messages may hold an image, not {role} messages", param)
            images.append((url_of(part.image_url, f"{param}.image_url"), param))
        else:
            raise _bad(f"content part type {part.type!r} is not supported: send 'text' and 'image_url' parts",
                       f"{param}.type", "unsupported_content")
    return "\n".join(texts)


def _runs(body: ChatCompletionRequest, images: list[tuple[str, str]], image_runs: list[int]) -> list[tuple[str, str]]:
    """(role, text) with system messages dropped and consecutive same-role messages joined (each text once:
    linear in the messages); `image_runs` gets the index of the run that holds each of `images`."""
    runs: list[tuple[str, list[str]]] = []
    for i, m in enumerate(body.messages):
        if m.role in _IGNORED_ROLES:
            continue
        if m.role not in ("user", "assistant"):
            raise _bad(f"role {m.role!r} is not supported: use system, user and assistant messages",
                       f"messages[{i}].role")
        content = m.content if isinstance(m.content, list) else [ContentPart(type="text", text=m.content or "")]
        text = _parts_text(content, m.role, i, images)
        if not runs or runs[-1][0] != m.role:
            runs.append((m.role, []))
        image_runs += [len(runs) - 1] * (len(images) - len(image_runs))
        if text:
            runs[-1][1].append(text)
    return [(role, "\n".join(texts)) for role, texts in runs]


def conversation(body: ChatCompletionRequest) -> tuple[str, str, tuple[Turn, ...], str, bool]:
    """(image URL, question, history, answer so far, whether the image is the question's) of the messages, or a
    400 that says what is wrong."""
    images: list[tuple[str, str]] = []
    image_runs: list[int] = []
    runs = _runs(body, images, image_runs)
    so_far = ""
    if body.continue_final_message:
        if not runs or runs[-1][0] != "assistant":
            raise _bad("continue_final_message needs the messages to end with the assistant's answer so far",
                       "messages")
        so_far = runs.pop()[1]
    if not images:
        raise _bad("no image in the messages: add a user content part "
                   "{'type': 'image_url', 'image_url': {'url': 'data:image/jpeg;base64,...'}}", "messages",
                   "image_required")
    if len(images) > 1:
        raise _bad(f"{len(images)} images in the messages, but FastVLM answers about exactly one image per "
                   "conversation: send one", images[1][1], "too_many_images")
    if not runs or runs[0][0] != "user" or runs[-1][0] != "user":
        raise _bad("the messages must start and end with a user message (system messages aside)", "messages")
    if len(runs) // 2 > MAX_TURNS:
        raise _bad(f"the conversation has {len(runs) // 2} earlier turns, more than the {MAX_TURNS} this server "
                   "accepts (the context holds far fewer): send only the recent turns", "messages", "too_many_turns")
    history = tuple(Turn(runs[k][1], runs[k + 1][1]) for k in range(0, len(runs) - 1, 2))
    return images[0][0], runs[-1][1], history, so_far, bool(history) and image_runs[0] == len(runs) - 1


def options(body: ChatCompletionRequest) -> GenerationOptions:
    if body.n != 1:
        raise _bad("n must be 1: one answer per request", "n")
    stop = (body.stop,) if isinstance(body.stop, str) else tuple(body.stop or ())
    given = {
        "max_new_tokens": body.max_completion_tokens or body.max_tokens,
        "temperature": body.temperature, "top_p": body.top_p, "top_k": body.top_k,
        "repeat_penalty": body.repeat_penalty, "seed": body.seed, "stop": tuple(s for s in stop if s),
    }
    try:
        return GenerationOptions(**{k: v for k, v in given.items() if v is not None})
    except ValueError as e:
        raise _bad(str(e), code="invalid_value") from None


def resolution(value: int | None) -> int | None:
    if value is None:
        return None
    try:
        return check_resolution(value)
    except ValueError as e:
        raise _bad(str(e), "resolution", "invalid_value") from None


def chat_input(body: ChatCompletionRequest) -> ChatInput:
    url, question, history, so_far, with_question = conversation(body)
    return ChatInput(url, question, history, options(body), resolution(body.resolution), so_far, with_question)
