"""fastvlm.weights.resolve: the look-only mode (the app's start-up check takes files that are ready, nothing else);
the official source's fallback to the prebuilt files only when the checkpoint cannot be fetched."""

from __future__ import annotations

import errno
import importlib

import pytest

from fastvlm.convert.checkpoint import CheckpointError
from fastvlm.engine.events import ModelFileError
from fastvlm.weights import Hub, HubUnreachable, resolve
from fastvlm.weights.hub import DiskProblem, RepoUnavailable

resolve_module = importlib.import_module("fastvlm.weights.resolve")  # the package re-exports the function


def test_look_only_neither_downloads_converts_nor_falls_back(monkeypatch):
    calls = []

    def converted(repo, hub, quant, download, threads, report, convert):
        calls.append((download, convert))
        raise ModelFileError(f"{repo} is not converted yet")

    monkeypatch.setattr(resolve_module.official, "converted", converted)
    monkeypatch.setattr(resolve_module, "_prebuilt", lambda *a: pytest.fail("fell back to the prebuilt files"))
    with pytest.raises(ModelFileError, match="not converted yet"):
        resolve(look_only=True, hub=Hub())
    assert calls == [(False, False)]


# -- the official source falls back only when the checkpoint cannot be fetched (issue #20 item 5) ----------------
PREBUILT = object()


def _official_raises(monkeypatch, error: BaseException) -> list:
    calls = []

    def converted(repo, hub, quant, download, threads, report, convert):
        calls.append(quant)
        raise error

    monkeypatch.setattr(resolve_module.official, "converted", converted)
    monkeypatch.setattr(resolve_module, "_prebuilt", lambda *a: PREBUILT)
    return calls


def test_a_quant_typo_fails_before_anything_is_fetched(monkeypatch):
    calls = _official_raises(monkeypatch, AssertionError("must not be reached"))
    with pytest.raises(ValueError, match=r"--quant \(or FASTVLM_QUANT\) must be one of .*got 'q4km'"):
        resolve(quant="q4km", hub=Hub())
    assert calls == []


@pytest.mark.parametrize("error", [CheckpointError("checkpoint.py: a tensor this converter does not know"),
                                   OSError(5, "Input/output error"),
                                   ModelFileError("apple/FastVLM-0.5B has no config.json + *.safetensors")])
def test_a_checkpoint_that_was_fetched_but_not_converted_is_an_error_not_the_prebuilt_files(monkeypatch, error):
    _official_raises(monkeypatch, error)
    with pytest.raises(ModelFileError, match="could not be converted") as e:
        resolve(hub=Hub())
    assert str(error) in str(e.value)


@pytest.mark.parametrize("error", [HubUnreachable("the Hugging Face Hub could not be reached"),
                                   RepoUnavailable("apple/FastVLM-0.5B cannot be downloaded: RepositoryNotFoundError")])
def test_a_checkpoint_that_cannot_be_fetched_falls_back_but_never_under_exact(monkeypatch, error):
    _official_raises(monkeypatch, error)
    assert resolve(hub=Hub()) is PREBUILT
    with pytest.raises(ModelFileError, match="--exact runs only the official checkpoint"):
        resolve(quant="f32", hub=Hub(), exact=True)


@pytest.mark.parametrize("error", [OSError(errno.ENOSPC, "No space left on device"),
                                   OSError(errno.EROFS, "Read-only file system")])
def test_a_full_or_read_only_disk_while_converting_names_the_folder_and_the_fix(monkeypatch, tmp_path, error):
    _official_raises(monkeypatch, error)
    with pytest.raises(DiskProblem, match=r"could not be written to .*Fix: free space there") as e:
        resolve(hub=Hub(cache_dir=tmp_path / "hub"))
    assert str(tmp_path) in str(e.value) and error.strerror in str(e.value)


def test_a_full_disk_while_downloading_the_prebuilt_files_is_a_clear_error_not_a_traceback(monkeypatch, tmp_path):
    """huggingface_hub lets the OSError of a full disk through; it used to reach the user as a traceback, or be
    listed as 'not available' with advice to connect to the internet."""
    import huggingface_hub as hf

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(hf, "hf_hub_download", full)
    with pytest.raises(DiskProblem, match="No space left on device") as e:
        resolve(source="prebuilt", hub=Hub(cache_dir=tmp_path / "hub"))
    assert "connect to the internet" not in str(e.value)


def test_linking_a_file_in_place_never_touches_another_replicas_link_in_flight(tmp_path):
    """Two replicas starting at once link the same graph into the same folder: each through a name of its own
    (the fixed `<name>.tmp` let one delete or replace the other's, which then died on a missing file)."""
    from fastvlm.weights.resolve import _link

    blob, dst = tmp_path / "blob", tmp_path / "models" / "vision.onnx"
    dst.parent.mkdir()
    blob.write_bytes(b"graph")
    theirs = dst.with_name(dst.name + ".tmp")  # the other replica's, between its link and its rename
    theirs.write_bytes(b"graph")
    _link(blob, dst)
    assert dst.read_bytes() == b"graph" and theirs.exists()  # was deleted
    assert sorted(p.name for p in dst.parent.iterdir()) == ["vision.onnx", "vision.onnx.tmp"]  # nothing left


def _chained(root: BaseException, explicit: bool) -> BaseException:
    """`root` under two wrappers, as Python chains them: `raise ... from` inside an `except` sets both the cause
    and the context; raising while handling another sets the context only."""
    wrapper, outer = ValueError("wrapper"), RuntimeError("outer")
    for inner, exc in ((root, wrapper), (wrapper, outer)):
        exc.__context__ = inner
        exc.__cause__ = inner if explicit else None
    return outer


@pytest.mark.parametrize("explicit", [True, False])
def test_a_full_disk_is_found_however_deep_it_was_wrapped(tmp_path, explicit):
    from fastvlm.weights.hub import disk_problem

    found = disk_problem(_chained(OSError(errno.ENOSPC, "No space left on device"), explicit), tmp_path)
    assert isinstance(found, DiskProblem) and "No space left on device" in str(found) and str(tmp_path) in str(found)
    assert disk_problem(_chained(OSError(errno.ECONNRESET, "reset"), explicit), tmp_path) is None


@pytest.mark.parametrize("explicit", [True, False])
def test_an_unreachable_hub_is_told_by_its_root_cause(explicit):
    from fastvlm.weights.hub import _root_cause

    assert _root_cause(_chained(ConnectionRefusedError("[Errno 111] refused"), explicit)) == (
        "ConnectionRefusedError: [Errno 111] refused")
    assert _root_cause(KeyError("alone")) == "KeyError: 'alone'"
    assert len(_root_cause(OSError("x" * 500))) == 200
