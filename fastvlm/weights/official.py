"""Apple's own checkpoint (`apple/FastVLM-0.5B`, `-1.5B`, `-7B`) as the source: downloaded with
`huggingface_hub`, converted once without torch (fastvlm.convert.build) into a folder keyed by the repo's
revision, the converter's version and the GGUF type, and reused from then on.

A conversion is written into a temporary folder and renamed into place only when complete, so a
half-written one (a killed process, a full disk) is never used; the next start converts again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from ..engine.events import ModelFileError
from .hub import Hub
from .lockfile import exclusive

log = logging.getLogger(__name__)

DEFAULT_MODEL = "apple/FastVLM-0.5B"
# What a conversion reads: weights (one file or shards + index), config, slow-tokenizer files.
PATTERNS = ["config.json", "*.safetensors", "model.safetensors.index.json", "vocab.json", "merges.txt",
            "tokenizer_config.json", "added_tokens.json", "special_tokens_map.json", "generation_config.json"]
CONVERTER = Path(__file__).resolve().parents[1] / "convert"
# what shapes the two files besides the code: the GGUF writer and llama.cpp's quantizer
CONVERTER_PACKAGES = ("gguf", "llama-cpp-python", "onnx", "numpy")
DONE = "conversion.json"  # written last: its presence marks a complete folder


def converter_sources() -> list[Path]:
    """Every file of the converter package (code, GGUF metadata and chat template, quantization, manifests)."""
    return sorted(p for p in CONVERTER.rglob("*") if p.suffix in (".py", ".json") and "__pycache__" not in p.parts)


def converter_version() -> str:
    """A hash of the converter's files and of the packages that write the outputs: a changed converter, chat
    template or eos, or another gguf / llama-cpp-python, converts again instead of reusing old output."""
    from importlib.metadata import PackageNotFoundError, version

    h = hashlib.sha256()
    for path in converter_sources():
        h.update(path.relative_to(CONVERTER).as_posix().encode() + b"\0" + path.read_bytes())
    for package in CONVERTER_PACKAGES:
        try:
            h.update(f"{package}=={version(package)}".encode())
        except PackageNotFoundError:
            h.update(f"{package} missing".encode())
    return h.hexdigest()[:10]


def converted(repo: str, hub: Hub, quant: str = "auto", download: bool = True, threads: int | None = None,
              report: Callable[[str], None] | None = None, convert: bool = True) -> tuple[Path, Path, str]:
    """(vision.onnx, llm.gguf, where they came from) for the checkpoint `repo`, converting it if needed (and
    `convert`). Raises `ModelFileError` (or `HubUnreachable`) when it cannot be fetched or is not converted and
    may not be, `ValueError` when it cannot be converted."""
    from ..convert.text_gguf import resolve_quant

    say = report or log.info
    quant = resolve_quant(quant)
    snapshot = _snapshot(repo, hub, download)
    out = hub.own_dir / "converted" / repo.replace("/", "--") / f"{snapshot.name[:12]}-{converter_version()}-{quant}"
    origin = f"{repo}@{snapshot.name[:12]} converted to ONNX + {quant.upper()} GGUF"
    if (out / DONE).is_file():
        return out / "vision.onnx", out / "llm.gguf", f"{origin} (cache)"
    if not convert:
        raise ModelFileError(f"{repo} is not converted yet")
    _convert(snapshot, out, quant, threads, say, lock=hub.own_dir / "locks" / f"{out.parent.name}-{out.name}.lock")
    return out / "vision.onnx", out / "llm.gguf", f"{origin} (converted now)"


def _snapshot(repo: str, hub: Hub, download: bool) -> Path:
    snapshot = hub.download_snapshot(repo, PATTERNS, fetch=download, complete=_complete)
    if not (snapshot / "config.json").is_file() or not list(snapshot.glob("*.safetensors")):
        raise ModelFileError(f"{repo} has no config.json + *.safetensors: not a FastVLM checkpoint")
    return snapshot


def _complete(snapshot: Path) -> bool:
    """The checkpoint's config and all its weights: every shard its index names, or its one safetensors file."""
    if not (snapshot / "config.json").is_file():
        return False
    index = snapshot / "model.safetensors.index.json"
    if index.is_file():
        shards = set(json.loads(index.read_text()).get("weight_map", {}).values())
        return bool(shards) and all((snapshot / shard).is_file() for shard in shards)
    return any(snapshot.glob("*.safetensors"))


def _convert(snapshot: Path, out: Path, quant: str, threads: int | None, say: Callable[[str], None],
             lock: Path | None = None) -> None:
    """Convert into `out`, one process at a time per folder (`lock`: the lock file, default beside `out`): a second
    one waits, then takes the first's result (it never deletes a finished conversion another may be loading)."""
    from ..convert.build import convert_checkpoint

    lock = lock or out.with_name(out.name + ".lock")
    for folder in (out.parent, lock.parent):
        folder.mkdir(parents=True, exist_ok=True)
    with exclusive(lock, lambda: say(f"waiting for another conversion into {out}")):
        if (out / DONE).is_file():
            return
        tmp = out.with_name(f"{out.name}.tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        say(f"converting {snapshot.parent.parent.name} (once; about a minute for 0.5B)")
        try:
            convert_checkpoint(snapshot, tmp, quant, threads=threads, progress=say)
            (tmp / DONE).write_text(json.dumps({"checkpoint": str(snapshot), "quant": quant,
                                                "converter": converter_version()}))
            shutil.rmtree(out, ignore_errors=True)  # an incomplete one (no DONE): a killed run of older code
            tmp.replace(out)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
