"""The AMX fix, checked without an AMX CPU: in the installed llama.cpp, the tile configuration that
`ggml_tile_config_init` fills on the stack is really written before `ldtilecfg` loads it.

GCC 12.2 without `-fno-dse` keeps only the zeroing and the palette byte (llama.cpp #20824): `ldtilecfg` then loads
rows = colsb = 0 and the first tile load faults (SIGSEGV on Intel AMX servers). requirements.txt's build flags keep
the stores of `colsb[]` (bytes 16-31) and `rows[]` (bytes 48-55). Read from objdump's disassembly of every installed
CPU backend that has AMX code (the portable build's `sapphirerapids` variant; a native build made on an AMX CPU).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from pathlib import Path

import pytest

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

STORE = re.compile(r",(-?0x[0-9a-f]+|\d*)\((%r[sb]p)\)\s*$")
LOAD_CFG = re.compile(r"ldtilecfg\s+(-?0x[0-9a-f]+|\d*)\((%r[sb]p)\)")


def missing_stores(instructions: list[str]) -> list[int]:
    """For code ending in `ldtilecfg OFF(%rsp)`: the configuration offsets (16: colsb[], 48: rows[]) that no
    instruction before it stores to; [] when the configuration is written."""
    site = LOAD_CFG.search(instructions[-1])
    assert site, instructions[-1]
    base, reg = int(site.group(1) or "0", 0), site.group(2)
    stored = set()
    for line in instructions[:-1]:
        m = STORE.search(line)
        if m and m.group(2) == reg:
            stored.add(int(m.group(1) or "0", 0) - base)
    return [off for off in (16, 48) if off not in stored]


def test_the_check_tells_the_miscompiled_configuration_from_the_fixed_one():
    assert missing_stores(BROKEN.splitlines()) == [16, 48]
    assert missing_stores(FIXED.splitlines()) == []


def amx_sites(lib: Path) -> list[list[str]]:
    asm = subprocess.run([OBJDUMP, "-d", "--no-show-raw-insn", str(lib)], check=True, capture_output=True,
                         text=True).stdout.splitlines()
    code = [line.split("\t", 1)[-1].strip() for line in asm if "\t" in line]
    return [code[max(0, i - WINDOW):i + 1] for i, line in enumerate(code) if line.startswith("ldtilecfg")]


@pytest.mark.skipif(OBJDUMP is None, reason="objdump missing (binutils; build-essential installs it)")
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
