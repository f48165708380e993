"""The AMX probe's real child: a tiny Q8_0 model through llama.cpp with its extra buffers (AMX) on, in a child
process. On an Intel AMX server with a miscompiled llama.cpp this is where the SIGSEGV happened (llama.cpp
#20824); here it must answer. And the probe end to end: forced to run on this CPU, its verdict is "works"."""

from __future__ import annotations

import subprocess
import sys

from fastvlm.amx.probe import AMX_FLAGS, amx_verdict, child_command
from fastvlm.engine.cpu import cpu_flags
from fastvlm.engine.llamalib import features_in_use, import_llama


def test_a_q8_0_tiny_model_answers_in_a_child_process(tmp_path):
    done = subprocess.run(child_command(tmp_path), check=False, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"the probe child exited {done.returncode}:\n{done.stderr[-3000:]}"
    words = done.stdout.split()
    assert words[0] == "ok" and words[1]  # answered, and named the llama.cpp CPU variant it ran
    built_with_amx = "AMX_INT8" in features_in_use(import_llama())  # the same llama.cpp, asked from here
    assert words[2] == ("AMX_INT8" if built_with_amx else "-")


def test_the_probe_run_for_real_says_works(tmp_path):
    v = amx_verdict(tmp_path, flags=cpu_flags() | set(AMX_FLAGS))  # as if this CPU had AMX: the probe runs
    assert (v.status, v.extra_buffers, v.notice) == ("works", True, ""), v.detail
    assert (tmp_path / "amx-probe.json").is_file()
    assert amx_verdict(tmp_path, command=lambda d: [sys.executable, "-c", "raise SystemExit(3)"],
                       flags=cpu_flags() | set(AMX_FLAGS)).status == "works"  # cached: not asked again


def test_an_engine_loaded_with_extra_buffers_off_answers(tiny_config):
    """What every load does after a crashed probe: the weights stay in plain CPU buffers, and the engine answers."""
    from dataclasses import replace

    import numpy as np

    from fastvlm import GenerationOptions, Request
    from fastvlm.engine.engine import Engine

    engine = Engine.load(replace(tiny_config, extra_buffers=False, llama_notice="AMX off (test)"))
    try:
        image = np.random.default_rng(0).integers(0, 256, (64, 96, 3), dtype=np.uint8)
        result = engine.answer(Request(image, "What is it?", options=GenerationOptions(max_new_tokens=8)))
        assert result.stats.new_tokens > 0
        assert engine.describe()["llama_notice"] == "AMX off (test)"
    finally:
        engine.close()


def test_the_probe_child_runs_from_any_working_folder(tmp_path, monkeypatch):
    """`python /srv/fastvlm/app.py` started elsewhere: the child still finds the fastvlm package."""
    from fastvlm.amx.probe import run_child

    monkeypatch.chdir(tmp_path)
    verdict = run_child(child_command(tmp_path))
    assert verdict.status == "works", verdict.detail


def test_after_a_crashed_probe_predict_answers_with_amx_off_and_says_so(tiny_models, tmp_path, monkeypatch, capsys):
    """The whole fallback, in process: a real probe child that dies by SIGSEGV (as on an AMX server with a
    miscompiled llama.cpp), then `predict --json` loads with llama.cpp's extra buffers off, answers, and carries
    the one-line notice with the fix."""
    import json

    import numpy as np
    from PIL import Image

    from fastvlm.amx import policy, probe
    from fastvlm.cli.main import main
    from fastvlm.engine import lm

    segfault = [sys.executable, "-c", "import ctypes; ctypes.string_at(0)"]
    verdict = probe.amx_verdict(tmp_path, command=lambda d: segfault, flags=cpu_flags() | set(AMX_FLAGS))
    assert verdict.status == "crashed"
    monkeypatch.setattr(policy, "amx_verdict", lambda: verdict)  # this CPU has no AMX: hand the verdict over
    seen = []
    real = lm.model_params
    monkeypatch.setattr(lm, "model_params", lambda ll, config: seen.append(config.extra_buffers) or real(ll, config))
    image = tmp_path / "image.png"
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (64, 96, 3), dtype=np.uint8)).save(image)
    assert main(["predict", "--vision", str(tiny_models.vision), "--llm", str(tiny_models.llm), "--image", str(image),
                 "--max-tokens", "4", "--resolution", "256", "--threads", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert seen == [False] and out["new_tokens"] > 0
    assert out["llama_notice"] == verdict.notice and "AMX off" in out["llama_notice"]
