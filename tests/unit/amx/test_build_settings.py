"""requirements.txt's llama.cpp build (portable, AMX-safe) as pip reads it, README's advice about it, and the engine's
loader of the CPU variants that build ships (fastvlm.engine.llamalib), on a stand-in ggml."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from fastvlm.engine import llamalib
from fastvlm.engine.events import ModelFileError

ROOT = Path(__file__).resolve().parents[3]


def llama_line_settings() -> dict[str, str]:
    from pip._internal.network.session import PipSession
    from pip._internal.req.req_file import parse_requirements

    lines = [r for r in parse_requirements(str(ROOT / "requirements.txt"), session=PipSession())
             if r.requirement.startswith("llama-cpp-python")]
    assert len(lines) == 1
    return lines[0].options["config_settings"]


def test_requirements_build_llama_cpp_portable_and_amx_safe():
    s = {k.removeprefix("cmake.define."): v for k, v in llama_line_settings().items()}
    assert (s["GGML_NATIVE"], s["GGML_BACKEND_DL"], s["GGML_CPU_ALL_VARIANTS"]) == ("OFF", "ON", "ON")
    assert s["CMAKE_INSTALL_BINDIR"] == "llama_cpp/lib"  # the variants beside libggml, where the loader looks
    assert {"-fno-dse", "-fno-tree-dse"} <= set(s["CMAKE_CXX_FLAGS"].split())


def test_readme_gives_the_same_rebuild_command_as_the_app():
    readme = (ROOT / "README.md").read_text()
    assert llamalib.REINSTALL in readme and "-fno-dse" in readme
    assert "-DGGML_NATIVE=ON" not in readme.replace("leave out `-DGGML_NATIVE=ON`", "")


class FakeGgml:
    """ggml's backend registry: `devices` CPU backends now; load_all adds `adds` of them."""

    def __init__(self, devices: int, adds: int = 1):
        self.devices, self.adds, self.loaded_from = devices, adds, []
        self.ggml_backend_dev_count = lambda: self.devices

    def ggml_backend_load_all_from_path(self, path: bytes) -> None:
        self.loaded_from.append(path.decode())
        self.devices += self.adds


def fake_llama(tmp_path: Path, variants: list[str]) -> SimpleNamespace:
    lib = tmp_path / "llama_cpp" / "lib"
    lib.mkdir(parents=True)
    for name in variants:
        (lib / name).write_bytes(b"")
    return SimpleNamespace(__file__=str(tmp_path / "llama_cpp" / "__init__.py"))


def test_a_portable_build_gets_its_best_variant_loaded_once(tmp_path, monkeypatch):
    ggml = FakeGgml(devices=0)
    monkeypatch.setattr(llamalib, "_ggml", lambda llama_cpp: ggml)
    llama = fake_llama(tmp_path, ["libggml-cpu-haswell.so", "libggml-cpu-sapphirerapids.so"])
    llamalib.load_cpu_backend(llama)
    llamalib.load_cpu_backend(llama)  # a backend is there now: nothing more to load
    assert ggml.loaded_from == [str(tmp_path / "llama_cpp" / "lib")]


def test_a_native_build_needs_nothing_loaded(tmp_path, monkeypatch):
    ggml = FakeGgml(devices=1)
    monkeypatch.setattr(llamalib, "_ggml", lambda llama_cpp: ggml)
    llamalib.load_cpu_backend(fake_llama(tmp_path, []))
    assert ggml.loaded_from == []


@pytest.mark.parametrize(("variants", "adds", "says"), [([], 1, "no CPU backend"),
                                                        (["libggml-cpu-zen4.so"], 0, "runs on this CPU")])
def test_no_usable_variant_is_an_error_that_says_how_to_rebuild(tmp_path, monkeypatch, variants, adds, says):
    monkeypatch.setattr(llamalib, "_ggml", lambda llama_cpp: FakeGgml(devices=0, adds=adds))
    monkeypatch.setattr(llamalib.sysconfig, "get_paths", lambda: {"platlib": str(tmp_path / "none")})
    monkeypatch.setattr(llamalib.sys, "prefix", str(tmp_path / "none"))
    with pytest.raises(ModelFileError, match=says) as e:
        llamalib.load_cpu_backend(fake_llama(tmp_path, variants))
    assert llamalib.REINSTALL in str(e.value)


def test_where_libggml_cannot_be_opened_by_name_loading_is_left_to_llama_cpp(tmp_path, monkeypatch):
    """macOS/Windows file names: their builds link the CPU backend in; the loader must not stop the load."""
    def unopenable(llama_cpp):
        raise OSError("libggml.so.0: cannot open shared object file")

    monkeypatch.setattr(llamalib, "_ggml", unopenable)
    llamalib.load_cpu_backend(fake_llama(tmp_path, []))  # no error
