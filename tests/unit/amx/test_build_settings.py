"""requirements.txt's llama.cpp build (portable, AMX-safe) as pip reads it, README's advice about it, and the engine's
loader of the CPU variants that build ships (fastvlm.engine.llamalib), on a stand-in ggml."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from fastvlm.engine import llamalib
from fastvlm.engine.events import ModelFileError

ROOT = Path(__file__).resolve().parents[3]


PLATFORMS = [("linux", "x86_64"), ("linux", "aarch64"), ("darwin", "arm64"), ("darwin", "x86_64"), ("win32", "AMD64")]


def requirement_lines(name: str) -> list:
    from pip._internal.network.session import PipSession
    from pip._internal.req.req_file import parse_requirements

    return [r for r in parse_requirements(str(ROOT / "requirements.txt"), session=PipSession())
            if r.requirement.startswith(name)]


def installed_on(line, platform: str, machine: str) -> bool:
    from pip._vendor.packaging.requirements import Requirement

    marker = Requirement(line.requirement).marker
    return marker is None or marker.evaluate({"sys_platform": platform, "platform_machine": machine})


def llama_line_settings(platform: str = "linux", machine: str = "x86_64") -> dict[str, str]:
    """The build settings of the llama-cpp-python line pip installs on `platform` (sys.platform), as pip reads them."""
    lines = [r for r in requirement_lines("llama-cpp-python") if installed_on(r, platform, machine)]
    assert len(lines) == 1, f"{len(lines)} llama-cpp-python lines for {platform} {machine}"
    return lines[0].options.get("config_settings", {})


def test_requirements_build_llama_cpp_portable_and_amx_safe_on_linux_x86():
    s = {k.removeprefix("cmake.define."): v for k, v in llama_line_settings("linux", "x86_64").items()}
    assert (s["GGML_NATIVE"], s["GGML_BACKEND_DL"], s["GGML_CPU_ALL_VARIANTS"]) == ("OFF", "ON", "ON")
    assert s["CMAKE_INSTALL_BINDIR"] == "llama_cpp/lib"  # the variants beside libggml, where the loader looks
    assert {"-fno-dse", "-fno-tree-dse"} <= set(s["CMAKE_CXX_FLAGS"].split())


@pytest.mark.parametrize(("platform", "machine"), PLATFORMS)
def test_every_platform_installs_one_llama_cpp_build(platform, machine):
    assert llama_line_settings(platform, machine)["cmake.define.LLAMA_BUILD_SERVER"] == "OFF"


@pytest.mark.parametrize(("platform", "machine"), PLATFORMS[1:])
def test_elsewhere_the_build_takes_what_the_compilers_take_and_links_its_cpu_backend_in(platform, machine):
    """clang (macOS) stops at GCC's -fno-dse ("unknown argument"); the loader (llamalib) cannot load run-time CPU
    variants there; Debian 12's aarch64 GCC 12 stops at the Arm variants' armv9.2-a+sme ("unknown value for
    -march"): a build for the machine itself, as llama-cpp-python makes by default."""
    s = {k.removeprefix("cmake.define."): v for k, v in llama_line_settings(platform, machine).items()}
    assert "CMAKE_CXX_FLAGS" not in s and "CMAKE_C_FLAGS" not in s
    assert s.get("GGML_BACKEND_DL", "OFF") == "OFF" and s.get("GGML_CPU_ALL_VARIANTS", "OFF") == "OFF"


def test_openvino_is_asked_for_only_where_it_has_a_wheel():
    """openvino 2026.x ships no macOS x86-64 wheel (2025.4.1 was the last): an Intel Mac's vision runs on ONNX Runtime,
    the fallback the engine picks when openvino is not installed."""
    [line] = requirement_lines("openvino")
    assert [p for p in PLATFORMS if not installed_on(line, *p)] == [("darwin", "x86_64")]


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
