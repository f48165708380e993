"""Find the two weight files: explicit paths, a local folder, the Hugging Face cache, or a download.

Per part, in this order: the path given (`--vision` / `--llm`), a folder (`--models DIR`: `vision.onnx` /
`llm.gguf`, else a candidate's own file name), each candidate of the source in the Hugging Face cache,
then each candidate downloaded (a 404 moves on to the next; an unreachable Hub ends the search at once).
`ModelPaths.sources` says where each file came from; the console, the UI header and /health show it.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..engine.events import ModelFileError
from . import official
from .hub import DiskProblem, Hub, HubUnreachable, RepoUnavailable, disk_problem
from .official import DEFAULT_MODEL
from .pins import PinMismatch
from .sources import LOCAL_NAMES, PARTS, SOURCES, Candidate, Source

log = logging.getLogger(__name__)

FLAGS = {"llm": "--llm PATH (or FASTVLM_LLM)", "vision": "--vision PATH (or FASTVLM_VISION)"}


@dataclass(frozen=True)
class ModelPaths:
    vision: Path
    llm: Path
    sources: dict[str, str] = field(default_factory=dict)  # part -> "repo/path (Hugging Face cache)" etc.


def resolve(vision: Path | None = None, llm: Path | None = None, models_dir: Path | None = None,
            download: bool = True, source: str | None = None, hub: Hub | None = None,
            model: str = DEFAULT_MODEL, quant: str = "auto", threads: int | None = None,
            look_only: bool = False, exact: bool = False) -> ModelPaths:
    """Both files, each from the first place that has it; one clear error naming what is missing.

    `source`: "official" (Apple's checkpoint `model`, converted once), "prebuilt" (the published CPU files),
    or None: official, falling back to prebuilt (FastVLM-0.5B only) when the checkpoint cannot be fetched (the
    Hub unreachable, the repo not there) - never when it was fetched and failed to convert (a bug, a full disk:
    an error naming it), and never under `exact` (the prebuilt files are a third party's Q4_K_M).
    `quant` is checked first (an environment default escapes argparse's `choices`).
    `look_only`: files ready now or a `ModelFileError`, with no download, no conversion and no fallback (what a
    full resolve would pick may still be fetched: the app's start-up check, before its background load)."""
    from ..convert.text_gguf import QUANTS

    if quant.lower() not in QUANTS:
        raise ValueError(f"--quant (or FASTVLM_QUANT) must be one of {', '.join(QUANTS)}, got {quant!r}")
    hub = hub or Hub()
    given = [p for p in (vision, llm) if p is not None] or ([models_dir] if models_dir is not None else [])
    if source != "prebuilt" and not given:
        try:
            return _official(model, hub, quant, download and not look_only, threads, convert=not look_only)
        except (HubUnreachable, RepoUnavailable) as e:  # not fetched: the one case the prebuilt files stand in for
            if source == "official" or model != DEFAULT_MODEL or look_only or exact:
                why = " (--exact runs only the official checkpoint, converted to F32)" if exact else ""
                raise ModelFileError(f"{model} could not be fetched: {e}{why}") from e
            log.warning("the official checkpoint %s could not be fetched (%s); using the prebuilt files instead "
                        "(--source prebuilt)", model, e)
            if hub.report:
                hub.report(f"{model} unavailable; using the prebuilt files")
        except (ModelFileError, ValueError, OSError) as e:  # fetched, but not converted: say so, use nothing else
            raise disk_problem(e, hub.own_dir.parent) or ModelFileError(
                f"{model} {'is not ready' if look_only else 'could not be converted'}: {e}") from e
    try:
        return _prebuilt(vision, llm, models_dir, download and not look_only, SOURCES["prebuilt"], hub)
    except OSError as e:  # a full or read-only cache while downloading or linking
        problem = disk_problem(e, hub.own_dir.parent)
        if problem is None:
            raise
        raise problem from e


def _official(model: str, hub: Hub, quant: str, download: bool, threads: int | None, convert: bool) -> ModelPaths:
    vision, llm, origin = official.converted(model, hub, quant, download, threads, hub.report, convert)
    paths = ModelPaths(vision, llm, {"vision": origin, "llm": origin})
    validate(paths)
    log.info("model: %s", origin)
    return paths


def _prebuilt(vision: Path | None, llm: Path | None, models_dir: Path | None, download: bool, src: Source,
              hub: Hub) -> ModelPaths:
    found, origin, missing = {}, {}, []
    for part, explicit in (("vision", vision), ("llm", llm)):
        try:
            found[part], origin[part] = _one(part, explicit, models_dir, download, src, hub)
        except (PinMismatch, DiskProblem):
            raise  # not missing: there and refused (its message says how to re-pin), or no room to write it
        except ModelFileError as e:
            missing.append(str(e))
    if missing:
        raise ModelFileError(
            "FastVLM weights are not available:\n  - " + "\n  - ".join(missing) +
            "\nFix: connect to the internet once so they download into the Hugging Face cache (run "
            "`python -m fastvlm download`), or pass local files "
            f"with {FLAGS['vision']} and {FLAGS['llm']}, or a folder with --models DIR (FASTVLM_MODELS) holding "
            "vision.onnx and llm.gguf. For a test run without real weights: python -m fastvlm synth --out models/synth "
            "and --models models/synth."
        )
    paths = ModelPaths(found["vision"], found["llm"], origin)
    validate(paths)
    for part in PARTS:
        log.info("%s: %s", part, origin[part])
    return paths


def _one(part: str, explicit: Path | None, models_dir: Path | None, download: bool, src: Source,
         hub: Hub) -> tuple[Path, str]:
    if explicit is not None:
        if not Path(explicit).is_file():
            raise ModelFileError(f"{part} file {explicit} does not exist (given by {FLAGS[part]})")
        return Path(explicit), f"{Path(explicit).name} (given)"
    candidates = src.candidates[part]
    if models_dir is not None:
        local = in_folder(Path(models_dir), part, candidates)
        if local is not None:
            return local, f"{local.name} (local folder)"
    found = _first(candidates, hub, fetch=False)
    if found is not None:
        return found[0], f"{found[1]} (Hugging Face cache)"
    reason = "downloads are off (--no-download)"
    if download:
        try:
            found = _first(candidates, hub, fetch=True)
            if found is not None:
                return found[0], f"{found[1]} (downloaded)"
            reason = "the Hub has none of them"
        except HubUnreachable as e:
            reason = str(e)
    where = f"not in {models_dir}, " if models_dir else ""
    names = ", ".join(str(c) for c in candidates)
    raise ModelFileError(f"{part}: {where}none of {names} is in the Hugging Face cache, and {reason}")


def _first(candidates: tuple[Candidate, ...], hub: Hub, fetch: bool) -> tuple[Path, Candidate] | None:
    """The first candidate in the cache (`fetch=False`) or on the Hub, ready to load, and which one it was."""
    for c in candidates:
        got = hub.download(c) if fetch else hub.cached(c)
        usable = _complete(got, c, hub, fetch) if got is not None else None
        if usable is not None:
            return usable, c
    return None


def in_folder(folder: Path, part: str, candidates: tuple[Candidate, ...]) -> Path | None:
    """`vision.onnx` / `llm.gguf`, else the first candidate found by its path or file name; never a guess."""
    for name in (LOCAL_NAMES[part], *(c.path for c in candidates), *(Path(c.path).name for c in candidates)):
        if (folder / name).is_file():
            return folder / name
    return None


def _complete(path: Path, c: Candidate, hub: Hub, fetch: bool) -> Path | None:
    """The graph ready to load: one with its weights in separate files needs them beside it (same repo folder),
    as real files: ONNX Runtime, OpenVINO and onnx refuse weights behind the cache's symbolic links, so such a
    graph is hard-linked (copied across file systems) into a folder of its own next to the cache."""
    names = external_data(path) if path.suffix == ".onnx" else []
    if not names:
        return path
    for name in names:
        if name in ("", ".", "..") or Path(name).name != name or "\\" in name:
            raise ModelFileError(f"{c} names {name!r} as a file of its weights: only a plain file name beside the "
                                 "graph is accepted (never a folder, '..' or an absolute path); this graph is refused")
    files = {path.name: path}
    for name in names:
        beside = Candidate(c.repo, str(Path(c.path).parent / name))
        here = path.parent / name  # already beside the graph: checked against its pin as a download is
        got = hub.pins.verify(beside, here) if here.is_file() else None
        got = got or (hub.download(beside) if fetch else hub.cached(beside))
        if got is None:
            log.warning("%s needs %s, which is not %s", c, beside, "on the Hub" if fetch else "in the cache")
            return None
        files[name] = got
    if not any(p.is_symlink() for p in files.values()):
        return path
    folder = hub.own_dir / "graphs" / c.repo.replace("/", "--") / path.parent.name
    folder.mkdir(parents=True, exist_ok=True)
    for name, src in files.items():
        _link(src.resolve(), folder / name)
    return folder / path.name


def _link(src: Path, dst: Path) -> None:
    if dst.is_file() and dst.stat().st_size == src.stat().st_size and dst.stat().st_ino == src.stat().st_ino:
        return
    tmp = dst.with_name(f"{dst.name}.{os.getpid()}.tmp")  # its own: another replica may be linking it too
    tmp.unlink(missing_ok=True)
    try:
        os.link(src, tmp)
    except OSError:  # another file system: a copy
        shutil.copyfile(src, tmp)
    tmp.replace(dst)


def external_data(path: Path) -> list[str]:
    """The files an ONNX graph keeps its tensors in (empty when they are inside it)."""
    try:
        import onnx
    except ImportError:  # without onnx: assume a self-contained graph; loading says so if it is not
        return []
    model = onnx.load(str(path), load_external_data=False)
    names = {e.value for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL
             for e in t.external_data if e.key == "location"}
    return sorted(names)


def validate(paths: ModelPaths) -> None:
    with open(paths.llm, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ModelFileError(f"{paths.llm} is not a GGUF file (bad magic); delete it and download again")
    if paths.vision.stat().st_size < 64:
        raise ModelFileError(f"{paths.vision} is too small to be an ONNX model; delete it and download again")
