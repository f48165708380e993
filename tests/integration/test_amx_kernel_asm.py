"""The AMX fix, checked without an AMX CPU: in the installed llama.cpp, the tile configuration that
`ggml_tile_config_init` fills on the stack is really written before `ldtilecfg` loads it.

GCC 12.2 without `-fno-dse` keeps only the zeroing and the palette byte (llama.cpp #20824): `ldtilecfg` then loads
rows = colsb = 0 and the first tile load faults (SIGSEGV on Intel AMX servers). requirements.txt's build flags keep
the stores of `colsb[]` (bytes 16-31) and `rows[]` (bytes 48-55). Read from objdump's disassembly of every installed
CPU backend that has AMX code (the portable build's `sapphirerapids` variant; a native build made on an AMX CPU).

The same check on the installed version's source compiled by each GCC people build with (11: Ubuntu 22.04; 12.2:
Debian 12) exactly as cmake compiles that variant for requirements.txt's settings (and with -march=sapphirerapids,
a native build on an AMX CPU): written with the flags, dropped without them. About 6 s per compile here.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.installed import ci_installs
from tests.integration.conftest import compiler, configure
from tests.unit.amx.test_build_settings import llama_line_settings

OBJDUMP = shutil.which("objdump")
WINDOW = 16  # instructions before ldtilecfg that fill the configuration

# GCC 12.2 -O3 -march=sapphirerapids on ggml-cpu/amx/mmq.cpp (0.3.36), without and with -fno-dse -fno-tree-dse
BROKEN = """\
vpxor  %xmm0,%xmm0,%xmm0
vmovdqa64 %zmm0,0xc0(%rsp)
movb   $0x1,0xc0(%rsp)
ldtilecfg 0xc0(%rsp)"""
FIXED = """\
vpxor  %xmm0,%xmm0,%xmm0
vmovdqa64 %zmm0,0xc0(%rsp)
mov    0x0(%rip),%rdx
vmovdqa 0x0(%rip),%xmm0
movb   $0x1,0xc0(%rsp)
mov    %rdx,0xf0(%rsp)
vmovdqa %xmm0,0xd0(%rsp)
ldtilecfg 0xc0(%rsp)"""
# GCC 13.3 (Debian trixie's 13.3.0-16), same source and flags, with or without -fno-dse: the address in a register
BY_REGISTER = """\
lea    0xc0(%rsp),%rdi
cmpb   $0x0,0x0(%rax)
jne    32ae6 <ggml_backend_amx_mul_mat(ggml_compute_params const*, ggml_tensor*)+0x9f6>
vpxor  %xmm0,%xmm0,%xmm0
mov    0x0(%rip),%rdx
vmovdqa64 %zmm0,0xc0(%rsp)
vmovdqa 0x0(%rip),%xmm0
movb   $0x1,0xc0(%rsp)
mov    %rdx,0xf0(%rsp)
vmovdqa %xmm0,0xd0(%rsp)
ldtilecfg (%rdi)"""

STORE = re.compile(r",(-?0x[0-9a-f]+|\d*)\((%r[sb]p)\)\s*$")
LOAD_CFG = re.compile(r"ldtilecfg\s+(-?0x[0-9a-f]+|\d*)\((%r\w+)\)")
LEA = re.compile(r"lea\s+(-?0x[0-9a-f]+|\d*)\((%r[sb]p)\),(%r\w+)\s*$")


def config_address(instructions: list[str]) -> tuple[int, str]:
    """(offset, %rsp or %rbp) of the configuration `ldtilecfg` (the last instruction) loads: its operand, or the
    `lea OFF(%rsp),%reg` before it that set the register it names."""
    site = LOAD_CFG.search(instructions[-1])
    assert site, instructions[-1]
    base, reg = int(site.group(1) or "0", 0), site.group(2)
    if reg in ("%rsp", "%rbp"):
        return base, reg
    lea = next((m for line in reversed(instructions[:-1]) if (m := LEA.search(line)) and m.group(3) == reg), None)
    assert lea, f"no lea into {reg} before {instructions[-1]}"
    return base + int(lea.group(1) or "0", 0), lea.group(2)


def missing_stores(instructions: list[str]) -> list[int]:
    """For code ending in `ldtilecfg` of a stack slot: the configuration offsets (16: colsb[], 48: rows[]) that no
    instruction before it stores to; [] when the configuration is written."""
    base, reg = config_address(instructions)
    stored = set()
    for line in instructions[:-1]:
        m = STORE.search(line)
        if m and m.group(2) == reg:
            stored.add(int(m.group(1) or "0", 0) - base)
    return [off for off in (16, 48) if off not in stored]


def test_the_check_tells_the_miscompiled_configuration_from_the_fixed_one():
    assert missing_stores(BROKEN.splitlines()) == [16, 48]
    assert missing_stores(FIXED.splitlines()) == []
    assert missing_stores(BY_REGISTER.splitlines()) == []
    assert missing_stores(BY_REGISTER.replace("0xd0(%rsp)", "0xd0(%rbx)").splitlines()) == [16]


def amx_sites(lib: Path) -> list[list[str]]:
    asm = subprocess.run([OBJDUMP, "-d", "--no-show-raw-insn", str(lib)], check=True, capture_output=True,
                         text=True).stdout.splitlines()
    code = [line.split("\t", 1)[-1].strip() for line in asm if "\t" in line]
    return [code[max(0, i - WINDOW):i + 1] for i, line in enumerate(code) if line.startswith("ldtilecfg")]


@pytest.mark.skipif(OBJDUMP is None, reason=ci_installs("build-essential", "objdump missing (binutils)"))
def test_the_installed_amx_kernel_writes_its_tile_configuration():
    lib_dir = Path(importlib.util.find_spec("llama_cpp").origin).parent / "lib"
    libs = sorted(lib_dir.glob("libggml-cpu*.so"))
    assert libs, f"no llama.cpp CPU backend in {lib_dir}"
    sites = {lib.name: s for lib in libs if (s := amx_sites(lib))}
    if not sites:
        pytest.skip("this llama.cpp has no AMX code (a native build made on a CPU without AMX)")
    for name, found in sites.items():
        for instructions in found:
            assert missing_stores(instructions) == [], (
                f"{name}: the AMX tile configuration is not written before ldtilecfg (GCC dropped the stores: "
                f"llama.cpp #20824); rebuild with requirements.txt's -fno-dse flags\n" + "\n".join(instructions))


# The same check on llama.cpp's AMX source compiled by each GCC people build with: Debian 12's 12.2 (g++-12),
# Ubuntu 22.04's 11 (Debian 12 has g++-11 too; .ci/run installs it). Ubuntu 24.04's GCC 13 is not in Debian 12.
GCCS = ("g++-11", "g++-12")


def mmq_command(source: Path, build: Path, cxx: str, cxx_flags: str) -> tuple[list[str], str]:
    """(the compile command of the sapphirerapids CPU variant's amx/mmq.cpp, its folder) as cmake gives it for
    requirements.txt's settings, with `cxx` and CMAKE_CXX_FLAGS=`cxx_flags`."""
    configure(source, build, cxx.replace("g++", "gcc"), cxx, llama_line_settings(), CMAKE_CXX_FLAGS=cxx_flags,
              CMAKE_EXPORT_COMPILE_COMMANDS="ON").check_returncode()
    entries = json.loads((build / "compile_commands.json").read_text())
    entry = next(e for e in entries if e["file"].endswith("amx/mmq.cpp") and "sapphirerapids" in e["command"])
    return shlex.split(entry["command"]), entry["directory"]


FEATURES = re.compile(r"^-m(sse|avx|f16c|fma|bmi|amx)")  # the variant's -m flags; "native" replaces them


def compiled_sites(source: Path, tmp: Path, cxx: str, cxx_flags: str, arch: str = "variant") -> list[list[str]]:
    """The ldtilecfg sites of amx/mmq.cpp compiled as cmake compiles the sapphirerapids variant; arch "native":
    with -march=sapphirerapids instead of its feature flags (a -march=native build on an AMX CPU)."""
    cmd, folder = mmq_command(source, tmp / "build", cxx, cxx_flags)
    if arch == "native":
        cmd = [cmd[0], "-march=sapphirerapids", *(a for a in cmd[1:] if not FEATURES.match(a))]
    obj = tmp / "mmq.o"
    cmd[cmd.index("-o") + 1] = str(obj)
    subprocess.run(cmd, cwd=folder, check=True, capture_output=True, text=True, timeout=600)
    sites = amx_sites(obj)
    assert sites, f"{cxx}: no ldtilecfg in amx/mmq.cpp"
    return sites


needs_tools = pytest.mark.skipif(OBJDUMP is None or shutil.which("cmake") is None,
                                 reason=ci_installs("cmake", "objdump (build-essential) or cmake missing"))


@needs_tools
@pytest.mark.parametrize("arch", ["variant", "native"])
@pytest.mark.parametrize("name", GCCS)
def test_each_gcc_writes_the_tile_configuration_with_the_requirements_flags(name, arch, llama_source, tmp_path):
    flags = llama_line_settings()["cmake.define.CMAKE_CXX_FLAGS"]
    for instructions in compiled_sites(llama_source, tmp_path, compiler(name), flags, arch):
        assert missing_stores(instructions) == [], f"{name} {flags} ({arch}):\n" + "\n".join(instructions)


@needs_tools
@pytest.mark.parametrize("name", GCCS)
def test_without_the_flags_each_gcc_drops_the_stores(name, llama_source, tmp_path):
    """Why requirements.txt names the flags, and that the check sees the miscompile (llama.cpp #20824)."""
    sites = compiled_sites(llama_source, tmp_path, compiler(name), "")
    assert [missing_stores(instructions) for instructions in sites] == [[16, 48]] * len(sites)
