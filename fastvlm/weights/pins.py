"""Pins of third-party weight files: what was fetched (Hub revision, sha256), kept in a lock file and checked
on every later use, so a file that changed (upstream under the same name, or on this disk) is refused until
the user re-pins it.

A `Candidate` may carry its own `revision` and `sha256` (fastvlm/weights/sources.py); without them, the first
download records what it got in `pins.json` beside the Hugging Face cache, and later lookups and downloads ask
for that revision and that hash. `python -m fastvlm doctor` reports the same checks. Re-pin: delete the file's
entry (or the whole lock file) and start again; the next download is then trusted and recorded.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

from ..engine.events import ModelFileError
from .lockfile import exclusive
from .sources import Candidate

log = logging.getLogger(__name__)

LOCK_NAME = "pins.json"


class PinMismatch(ModelFileError):
    """A pinned file's content is not what was pinned."""


def sha256_of(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def revision_of(path: Path) -> str | None:
    """The commit of a Hugging Face cache file (`.../snapshots/<commit>/<path in repo>`), else None."""
    parts = Path(path).parts
    return parts[parts.index("snapshots") + 1] if "snapshots" in parts[:-1] else None


class Pins:
    """The lock file `path`: `"repo/path"` -> `{"revision", "sha256", "size", "mtime_ns"}` (size and mtime let an
    unchanged file skip hashing)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def entries(self) -> dict[str, dict]:
        try:
            return json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except ValueError as e:
            raise ModelFileError(f"the pin file {self.path} is damaged ({e}): fix or delete it (deleting re-pins "
                                 "every third-party file at its next download)") from None

    def revision(self, c: Candidate) -> str | None:
        """The revision to ask the Hub for: the candidate's own, else the pinned one, else None (the newest)."""
        return c.revision or self.entries().get(str(c), {}).get("revision")

    def verify(self, c: Candidate, file: Path) -> Path:
        """`file` when it matches `c.sha256` or its pin; the first time, the pin is recorded. `PinMismatch` else."""
        entry = self.entries().get(str(c))
        expected = c.sha256 or (entry or {}).get("sha256")
        st = Path(file).stat()
        if entry and entry.get("sha256") == expected and [entry.get("size"), entry.get("mtime_ns")] == [
                st.st_size, st.st_mtime_ns]:
            return file  # verified before and untouched since
        digest = sha256_of(Path(file))
        if expected and digest != expected:
            where = "fastvlm/weights/sources.py" if c.sha256 else str(self.path)
            raise PinMismatch(
                f"{c} is not the file that was pinned: sha256 {digest[:16]}… instead of {expected[:16]}… ({file}). "
                f"It changed upstream or on this disk, so it is refused. If the new file is trusted, re-pin it: "
                f"delete its entry in {where} (or pass the file yourself with --vision/--llm)")
        if entry is None:
            log.info("pinned %s: revision %s, sha256 %s (in %s)", c, revision_of(file) or c.revision, digest, self.path)
        self._record(str(c), {"revision": revision_of(file) or c.revision, "sha256": digest,
                              "size": st.st_size, "mtime_ns": st.st_mtime_ns})
        return file

    def _record(self, key: str, entry: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._locked():
            entries = self.entries()
            entries[key] = entry
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(entries, indent=2, sort_keys=True) + "\n")
            tmp.replace(self.path)

    def _locked(self):
        """Replicas starting together read-modify-write the same file: one at a time."""
        return exclusive(self.path.with_name(self.path.name + ".lock"))
