"""The doctor's llama.cpp section: which CPU backend llama.cpp runs here and with what features, whether its AMX
path works (the probe, `fastvlm.amx`), the CPU class and the GGUF type `--quant auto` picks for it."""

from __future__ import annotations

from ...amx.policy import QUANT_BY_CLASS, cpu_class
from ...amx.probe import FIX, Verdict, amx_verdict
from ...engine.events import ModelFileError
from ...engine.llamalib import REINSTALL, cpu_variant, features_in_use, import_llama
from .report import Section

NOT_PORTABLE = ("built-in: one CPU backend, not requirements.txt's portable build; a -march=native build runs only on "
                "CPUs with what the build machine had")


def llama_section(verdict: Verdict | None = None,
                  flags: frozenset[str] | None = None) -> tuple[Section, Verdict | None]:
    """The section, and the AMX verdict (`verdict`/`flags`: given instead of this machine's, for tests)."""
    s = Section("llama.cpp on this CPU")
    try:
        llama_cpp = import_llama()
    except (ImportError, ModelFileError) as e:
        s.add("fail", "llama.cpp", str(e), REINSTALL)
        return s, None
    variant = cpu_variant()
    if variant == "built-in":  # not requirements.txt's build: pip reused an older or cached one
        s.add("warn", "CPU variant", NOT_PORTABLE, f"install requirements.txt's build: {REINSTALL}")
    else:
        s.add("info", "CPU variant", f"{variant} (portable build: picked for this CPU at run time)")
    s.add("info", "features used", ", ".join(features_in_use(llama_cpp)) or "none reported")
    verdict = amx_verdict() if verdict is None else verdict
    if verdict.status == "crashed":
        s.add("warn", "AMX", verdict.notice, FIX)
    elif verdict.status == "failed":
        s.add("warn", "AMX", verdict.notice, "run the doctor again; if it stays, report the message above")
    else:
        s.add("ok" if verdict.status == "works" else "info", "AMX", verdict.summary)
    klass = cpu_class(verdict, flags)
    s.add("info", "CPU class", f"{klass}: --quant auto writes {QUANT_BY_CLASS[klass].upper()}")
    return s, verdict
