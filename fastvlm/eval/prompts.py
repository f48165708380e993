"""Each task's prompt, as data, following LLaVA's evaluation scripts (which FastVLM's authors reuse).

- POPE, GQA: the question + "\\nAnswer the question using a single word or phrase."
  (LLaVA-1.5 `llava_pope_test.jsonl`, `llava_gqa_testdev_balanced.jsonl`).
- TextVQA: the same short-answer suffix, LLaVA style, but *without* LLaVA-1.5's
  "Reference OCR token: ..." line: the model reads the text from the image itself,
  as FastVLM's own TextVQA numbers do.
- OCRBench: the bare question (OCRBench's own evaluation adds nothing).

A question that already ends with the suffix (e.g. copied from LLaVA's files) gets no second copy.
The chat template around the prompt is the engine's business (`fastvlm.engine.prompt`).
"""

from __future__ import annotations

from dataclasses import dataclass

SHORT_ANSWER = "\nAnswer the question using a single word or phrase."


@dataclass(frozen=True)
class TaskPrompt:
    suffix: str  # appended to the question
    max_new_tokens: int  # default answer budget; the answers are short, greedy decoding stops early


PROMPTS: dict[str, TaskPrompt] = {
    "pope": TaskPrompt(SHORT_ANSWER, max_new_tokens=16),
    "gqa": TaskPrompt(SHORT_ANSWER, max_new_tokens=16),
    "textvqa": TaskPrompt(SHORT_ANSWER, max_new_tokens=32),
    "ocrbench": TaskPrompt("", max_new_tokens=128),
}


def build_prompt(task: str, question: str) -> str:
    """The text sent as the user's question for `task`."""
    suffix = PROMPTS[task].suffix
    question = question.strip()
    if suffix and question.endswith(suffix.strip()):
        return question
    return question + suffix
