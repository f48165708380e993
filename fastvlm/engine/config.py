"""Configuration dataclasses. Only `app.py` and the CLI map flags and environment onto these."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

TRAINED_RESOLUTION = 1024
FAST_RESOLUTION = 512
PATCH = 64  # FastViTHD downsamples by 64: (S/64)^2 image tokens
MIN_N_CTX = 512  # positions: 256 image vectors at 1024, the prompt, and room for an answer
MAX_RESOLUTION = 1024  # the trained size; larger costs O(S^2) in time and memory and was never trained


def physical_cores() -> int:
    """Physical cores (hyper-threads share one core's arithmetic units, so they rarely help here)."""
    try:
        import psutil

        n = psutil.cpu_count(logical=False)
    except ImportError:  # psutil is a dependency, but stay usable without it
        n = None
    return max(1, n or os.cpu_count() or 1)


def check_resolution(size: int) -> int:
    if not PATCH <= size <= MAX_RESOLUTION or size % PATCH:
        raise ValueError(f"resolution must be a multiple of {PATCH} from {PATCH} to {MAX_RESOLUTION} "
                         f"(1024 trained, 512 fast), got {size}")
    return size


@dataclass(frozen=True)
class GenerationOptions:
    """How to sample one answer. Defaults give greedy, reproducible answers."""

    max_new_tokens: int = 256
    temperature: float = 0.0  # 0 = greedy
    top_k: int = 40  # used only when temperature > 0; 0 disables
    top_p: float = 1.0  # used only when temperature > 0; 1 disables
    repeat_penalty: float = 1.0  # 1 disables
    seed: int | None = None  # None: a fresh seed per request
    stop: tuple[str, ...] = ()  # extra stop strings, matched on the decoded text

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be at least 1")
        if self.temperature < 0:
            raise ValueError("temperature must be >= 0")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")


@dataclass(frozen=True)
class EngineConfig:
    """Everything the engine needs to load and run."""

    vision_path: Path  # ONNX: pixel_values (1,3,H,W) float32 -> (1,N,D) float32
    llm_path: Path  # GGUF: Qwen2 language model, embedding size D
    resolution: int = TRAINED_RESOLUTION  # default image size S; requests may override
    threads: int = field(default_factory=physical_cores)
    n_ctx: int = 4096  # context length in positions (image positions count)
    n_batch: int = 512  # largest llama.cpp batch; longer prefills are split
    prefill_chunk: int = 512  # positions per llama.cpp call in a prefill (and <= n_batch): a Stop interrupts the
    # call in flight; a request that arrives during a prepare waits for it (128 where llama.cpp can't be interrupted)
    embedding_cache: int = 8  # image embeddings kept (LRU)
    kv_snapshots: int = 4  # per-image KV snapshots kept (LRU), ~3 MiB each at 256 image tokens
    kv_reuse: bool = True  # keep the KV cache between requests and prefill only what changed
    max_image_pixels: int = 64_000_000  # larger images are refused (decompression bombs)
    flash_attn: bool | None = None  # None: llama.cpp decides
    kv_f32: bool = False  # f32 KV cache (strict parity); default f16
    vision_runtime: str = "auto"  # "auto": OpenVINO when the `openvino` package is installed, else ONNX Runtime
    vision_precision: str = "auto"  # OpenVINO only: "auto" (bf16 where the CPU reports BF16), "f32", "bf16"
    extra_buffers: bool = True  # llama.cpp's extra weight buffers (AMX tiles, repacked Q4_0): the app turns them off
    # where llama.cpp's AMX path crashes on this CPU (fastvlm.amx's probe decides, before the first load)
    llama_notice: str = ""  # one line about llama.cpp on this CPU (e.g. "AMX off ... fix: ..."), shown with the model
    sources: dict[str, str] = field(default_factory=dict)  # "vision"/"llm" -> where the file came from (shown)

    def __post_init__(self) -> None:
        check_resolution(self.resolution)
        if self.threads < 1:
            raise ValueError("threads must be at least 1")
        if self.n_ctx < MIN_N_CTX:
            raise ValueError(f"n_ctx must be at least {MIN_N_CTX} (the image alone takes "
                             f"{(TRAINED_RESOLUTION // PATCH) ** 2} "
                             f"positions at {TRAINED_RESOLUTION}, then the prompt and the answer), got {self.n_ctx}: "
                             f"pass --n-ctx {MIN_N_CTX} or more")
        if self.n_batch < 1:
            raise ValueError(f"n_batch must be at least 1, got {self.n_batch}")
