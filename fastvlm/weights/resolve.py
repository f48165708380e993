"""Find the two weight files: explicit paths, a local folder, the Hugging Face cache, or a download.

The published FastVLM-0.5B CPU files are named in `SOURCES`. Those names come from the original
CPU pipeline's write-up and could not be checked from an offline machine: correct them here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from .events import ModelFileError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Source:
    repo: str
    filename: str | None  # None: the repo's only file ending in `suffix`
    suffix: str
    local_name: str  # the name looked for in a local models folder (what `fastvlm synth` writes)


SOURCES = {
    "llm": Source("musk12/apple-fastvlm-qwen2-q4-gguf", "fastvlm_qwen2_q4km.gguf", ".gguf", "llm.gguf"),
    "vision": Source("musk12/apple-fastvlm-vision-encoder-1024", None, ".onnx", "vision.onnx"),
}
FLAGS = {"llm": "--llm PATH (or FASTVLM_LLM)", "vision": "--vision PATH (or FASTVLM_VISION)"}


@dataclass(frozen=True)
class ModelPaths:
    vision: Path
    llm: Path


def resolve(vision: Path | None = None, llm: Path | None = None, models_dir: Path | None = None,
            download: bool = True) -> ModelPaths:
    """Both files, each from the first place that has it; one clear error naming what is missing."""
    found, missing = {}, []
    for kind, explicit in (("vision", vision), ("llm", llm)):
        try:
            found[kind] = _one(kind, explicit, models_dir, download)
        except ModelFileError as e:
            missing.append(str(e))
    if missing:
        raise ModelFileError(
            "FastVLM weights are not available:\n  - " + "\n  - ".join(missing) +
            "\nFix: connect to the internet once so they download into the Hugging Face cache, or pass local files "
            f"with {FLAGS['vision']} and {FLAGS['llm']}, or a folder with --models DIR (FASTVLM_MODELS) holding "
            "vision.onnx and llm.gguf. For a test run without real weights: python -m fastvlm synth --out models/synth "
            "and --models models/synth."
        )
    paths = ModelPaths(found["vision"], found["llm"])
    validate(paths)
    return paths


def _one(kind: str, explicit: Path | None, models_dir: Path | None, download: bool) -> Path:
    src = SOURCES[kind]
    if explicit is not None:
        if not Path(explicit).is_file():
            raise ModelFileError(f"{kind} file {explicit} does not exist (given by {FLAGS[kind]})")
        return Path(explicit)
    if models_dir is not None:
        local = _in_folder(Path(models_dir), src)
        if local is not None:
            return local
    cached = _from_hub(src, local_only=True)
    if cached is not None:
        return cached
    if download:
        fetched = _from_hub(src, local_only=False)
        if fetched is not None:
            return fetched
    where = f"not in {models_dir}, " if models_dir else ""
    return _raise(f"{kind}: {where}not in the Hugging Face cache, and the download of {src.repo} "
                  f"({src.filename or '*' + src.suffix}) failed or was off")


def _raise(message: str) -> Path:
    raise ModelFileError(message)


def _in_folder(folder: Path, src: Source) -> Path | None:
    named = folder / src.local_name
    if named.is_file():
        return named
    if src.filename and (folder / src.filename).is_file():
        return folder / src.filename
    matches = sorted(folder.glob("*" + src.suffix)) if folder.is_dir() else []
    return matches[0] if len(matches) == 1 else None


def hub_reachable(timeout: float = 3.0) -> bool:
    """A quick look before downloading: offline, huggingface_hub would retry for most of a minute."""
    import os
    import socket
    from urllib.parse import urlparse

    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        return False
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        socket.create_connection((host, 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _from_hub(src: Source, local_only: bool) -> Path | None:
    import huggingface_hub as hub

    if not local_only and not hub_reachable():
        log.info("the Hugging Face Hub cannot be reached: not downloading %s", src.repo)
        return None
    try:
        filename = src.filename
        if filename is None:
            if local_only:
                return _cached_by_suffix(src)
            candidates = [f for f in hub.list_repo_files(src.repo) if f.endswith(src.suffix)]
            if len(candidates) != 1:
                log.warning("%s holds %d %s files; expected one", src.repo, len(candidates), src.suffix)
                return None
            filename = candidates[0]
        if not local_only:
            log.info("downloading %s from %s (once; then it is in the Hugging Face cache)", filename, src.repo)
        return Path(hub.hf_hub_download(src.repo, filename, local_files_only=local_only))
    except Exception as e:  # offline, missing repo, no permission: all mean "not from here"
        log.debug("%s/%s not available (%s)", src.repo, src.filename, e)
        return None


def _cached_by_suffix(src: Source) -> Path | None:
    from huggingface_hub import scan_cache_dir

    try:
        for repo in scan_cache_dir().repos:
            if repo.repo_id == src.repo:
                files = [f.file_path for rev in repo.revisions for f in rev.files if f.file_name.endswith(src.suffix)]
                return Path(files[0]) if files else None
    except Exception:  # no cache folder yet
        return None
    return None


def validate(paths: ModelPaths) -> None:
    with open(paths.llm, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ModelFileError(f"{paths.llm} is not a GGUF file (bad magic); delete it and download again")
    if paths.vision.stat().st_size < 64:
        raise ModelFileError(f"{paths.vision} is too small to be an ONNX model; delete it and download again")
