"""The Hugging Face Hub, through `huggingface_hub` only: its cache, its downloads (progress bars, resume),
and its idea of being offline (`HF_HUB_OFFLINE`, `HF_ENDPOINT`, proxies from the environment).

`Hub` answers per exact file: where it is in the cache, or where it is after a download. A file the Hub
does not have (404) lets the caller try the next candidate; a Hub that cannot be reached at all is
remembered, so a machine without internet gets its answer after one quick failed request, not one
per candidate.
"""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..engine.events import ModelFileError
from .pins import LOCK_NAME, Pins
from .sources import Candidate

log = logging.getLogger(__name__)

ETAG_TIMEOUT_S = 5.0  # how long the first request may wait for an answer before we call the Hub unreachable


class HubUnreachable(ConnectionError):
    """The Hub (or the `HF_ENDPOINT` mirror) did not answer, or offline mode is on."""


class DiskProblem(ModelFileError):
    """The weights could not be written: the disk is full, read-only, or not this user's to write."""


# the errors that say the disk, not the file, is the problem
DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}
ROOM_NEEDED = "about 3 GB for Apple's checkpoint and its conversion"


def disk_problem(e: BaseException, folder: Path) -> DiskProblem | None:
    """A `DiskProblem` naming `folder` and the fix when `e` (or what caused it) is a full or unwritable disk."""
    while e is not None and not (isinstance(e, OSError) and e.errno in DISK_ERRNOS):
        e = e.__cause__ or e.__context__
    if e is None:
        return None
    return DiskProblem(f"the model files could not be written to {folder} ({e.strerror or e}). Fix: free space "
                       f"there ({ROOM_NEEDED}) or make it writable, or point HF_HOME at a writable disk with room")


class RepoUnavailable(ModelFileError):
    """A repo that cannot be had: the Hub says it has no such repo (or it is gated, or the Hub failed), or it is not
    in the cache while downloads are off."""


@dataclass
class Hub:
    """`endpoint`/`cache_dir` None: huggingface_hub's own defaults (HF_ENDPOINT, HF_HOME / HF_HUB_CACHE)."""

    endpoint: str | None = None
    cache_dir: Path | None = None
    report: Callable[[str], None] | None = None  # told "downloading <file>" before each download (UI header)
    unreachable: str | None = field(default=None, init=False)  # why the Hub could not be reached, once seen

    @property
    def is_offline(self) -> bool:
        from huggingface_hub import constants

        return constants.is_offline_mode()

    @property
    def own_dir(self) -> Path:
        """This project's folder beside the Hugging Face cache (conversions, linked graph folders)."""
        if self.cache_dir is not None:
            return Path(self.cache_dir).parent / "fastvlm"
        from huggingface_hub import constants

        return Path(constants.HF_HOME) / "fastvlm"

    @property
    def pins(self) -> Pins:
        """What third-party files were fetched (revision, sha256): checked on every use (`pins.py`)."""
        return Pins(self.own_dir / LOCK_NAME)

    def cached(self, c: Candidate) -> Path | None:
        """The file from the cache (its pinned revision, checked against its pin), without any request."""
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(c.repo, c.path, cache_dir=self.cache_dir, revision=self.pins.revision(c))
        return self.pins.verify(c, Path(found)) if isinstance(found, str) else None

    def download(self, c: Candidate) -> Path | None:
        """The file after a download (resumed when a partial one is there) of its pinned revision, checked against
        its pin (recorded now if it had none); None when the Hub says it has no such repo or file (or needs a
        login); `HubUnreachable` when there is no Hub to ask."""
        import huggingface_hub as hf
        from huggingface_hub import errors

        self._check_online(str(c))
        try:
            self._say_downloading(str(c))
            got = Path(hf.hf_hub_download(c.repo, c.path, cache_dir=self.cache_dir, endpoint=self.endpoint,
                                          revision=self.pins.revision(c), etag_timeout=ETAG_TIMEOUT_S))
        except (errors.RepositoryNotFoundError, errors.RevisionNotFoundError, errors.RemoteEntryNotFoundError) as e:
            log.info("%s is not on the Hub (%s)", c, type(e).__name__)
            return None
        except errors.LocalEntryNotFoundError as e:  # raised when the Hub could not be reached
            raise self._unreachable(e) from e
        except errors.HfHubHTTPError as e:  # 5xx, 429 after retries, a proxy's error page
            log.warning("downloading %s failed: %s", c, e)
            return None
        return self.pins.verify(c, got)

    def download_snapshot(self, repo: str, patterns: list[str], fetch: bool = True,
                          complete: Callable[[Path], bool] | None = None) -> Path:
        """The files of `repo` matching `patterns`, as a snapshot folder: from the cache when it holds them all
        (`complete(folder)`, when given), else (with `fetch`) from the Hub, which fetches what the cache lacks;
        `RepoUnavailable` when it cannot be had (not cached and not to be fetched, or not on the Hub). A cached
        folder may hold only some files: one file fetched by another tool, or a download that was stopped."""
        import huggingface_hub as hf
        from huggingface_hub import errors

        try:
            cached = Path(hf.snapshot_download(repo, allow_patterns=patterns, cache_dir=self.cache_dir,
                                               endpoint=self.endpoint, local_files_only=True))
            if not fetch or complete is None or complete(cached):
                return cached
            log.info("%s is only partly in the cache: fetching the rest", repo)
        except errors.LocalEntryNotFoundError:
            if not fetch:
                raise RepoUnavailable(f"{repo} is not in the Hugging Face cache") from None
        self._check_online(f"{repo} is not in the cache")
        self._say_downloading(repo)
        try:
            return Path(hf.snapshot_download(repo, allow_patterns=patterns, cache_dir=self.cache_dir,
                                             endpoint=self.endpoint, etag_timeout=ETAG_TIMEOUT_S))
        except errors.LocalEntryNotFoundError as e:
            raise self._unreachable(e) from e
        except errors.HfHubHTTPError as e:  # no such repo, gated, or the Hub's own error after retries
            raise RepoUnavailable(f"{repo} cannot be downloaded: {type(e).__name__}: {str(e)[:200]}") from e

    def _say_downloading(self, what: str) -> None:
        if self.report:  # the app's background load logs what it is told
            self.report(f"downloading {what}")
        else:
            log.info("downloading %s (once; it then stays in the Hugging Face cache)", what)

    def _check_online(self, what: str) -> None:
        """`HubUnreachable` at once when offline mode is on or the Hub already failed to answer."""
        if self.is_offline:
            raise HubUnreachable(f"offline mode is on (HF_HUB_OFFLINE=1): {what}")
        if self.unreachable:
            raise HubUnreachable(self.unreachable)

    def _unreachable(self, e: BaseException) -> HubUnreachable:
        """Remember that the Hub did not answer (later candidates fail at once) and say why."""
        self.unreachable = f"the Hugging Face Hub could not be reached ({_root_cause(e)})"
        return HubUnreachable(self.unreachable)


def _root_cause(e: BaseException) -> str:
    while e.__cause__ is not None or e.__context__ is not None:
        e = e.__cause__ or e.__context__
    return f"{type(e).__name__}: {e}"[:200]
