"""Where FastVLM's CPU files are published: per part, an ordered list of exact (repo, path) candidates.

The first candidate that exists is used, in a local folder, in the Hugging Face cache or on the Hub;
there is no "the only .onnx file" guessing anywhere. Correct or extend the lists here, nowhere else.

What each list holds (from the published model pages; nothing here could be opened from the offline
machine this was written on):
- vision: onnx-community's transformers.js export (dynamic size, projector included; the plain fp32
  name is inferred from its folder's naming, the fp16 one is listed), then a third-party export that
  takes 1024×1024 only.
- llm: third-party Q4_K_M GGUFs of FastVLM-0.5B's Qwen2.
"""

from __future__ import annotations

from dataclasses import dataclass

LOCAL_NAMES = {"vision": "vision.onnx", "llm": "llm.gguf"}  # what `synth` and `convert` write into a folder
PARTS = ("vision", "llm")


@dataclass(frozen=True)
class Candidate:
    repo: str  # a Hugging Face model repo id
    path: str  # the exact file path inside it
    revision: str | None = None  # a commit (or tag) to fetch; None: the newest, then pinned at first download
    sha256: str | None = None  # the file's expected hash; None: whatever the first download got (pins.json)

    def __str__(self) -> str:
        return f"{self.repo}/{self.path}"


@dataclass(frozen=True)
class Source:
    """A named set of candidates per part (`--source NAME`)."""

    name: str
    about: str
    candidates: dict[str, tuple[Candidate, ...]]


PREBUILT = Source(
    "prebuilt",
    "published CPU files (ONNX vision encoder + Q4_K_M GGUF), third-party exports of FastVLM-0.5B",
    {
        "vision": (
            Candidate("onnx-community/FastVLM-0.5B-ONNX", "onnx/vision_encoder.onnx"),
            Candidate("onnx-community/FastVLM-0.5B-ONNX", "onnx/vision_encoder_fp16.onnx"),
            Candidate("musk12/apple-fastvlm-vision-encoder-1024", "vision_encoder_fp32.onnx"),
        ),
        "llm": (
            Candidate("musk12/apple-fastvlm-cpu-inference-models", "fastvlm_qwen2_Q4_K_M.gguf"),
            Candidate("musk12/apple-fastvlm-qwen2-q4-gguf", "fastvlm_qwen2_q4km.gguf"),
        ),
    },
)

SOURCES = {s.name: s for s in (PREBUILT,)}
