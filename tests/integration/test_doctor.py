"""`python -m fastvlm doctor` on the tiny synthetic models: facts read from the files, checks skipped, exit 0;
the quantization comparison and the vision gates wired to the real runtimes."""

import argparse
import json
from pathlib import Path
from dataclasses import replace

from fastvlm.cli.main import main
from fastvlm.engine.engine import Engine
from fastvlm.verify.doctor import cli as doctor_cli
from fastvlm.verify.doctor import facts
from fastvlm.verify.doctor.report import Section


def test_gguf_and_graph_facts(tiny_models):
    g = facts.read_gguf(tiny_models.llm)
    assert (g.name, g.architecture, g.file_type, g.eos_token) == ("fastvlm-synth-tiny", "qwen2", "F32", "<|im_end|>")
    assert g.vocab_size > 500 and g.width == 64 and g.context_length == 4096
    inputs, outputs = facts.graph_io(tiny_models.vision)
    assert len(inputs) == 1 and inputs[0][1][:2] == [1, 3] and outputs[0][1][2] == 64
    s, spec = facts.vision_section(tiny_models.vision, "here", g)
    assert spec.fixed_size is None and spec.embed_dim == 64
    assert any(c.label == "width" and c.status == "ok" for c in s.checks)


def test_doctor_on_synthetic_models_skips_known_answers_and_exits_0(tiny_models, tmp_path, capsys):
    out = tmp_path / "doctor.json"
    rc = main(["doctor", "--models", str(tiny_models.llm.parent), "--no-download", "--threads", "2",
               "--resolution", "512", "--json", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "known-answer checks: skipped" in text and "fastvlm-synth-tiny" in text and "F32" in text
    doc = json.loads(out.read_text())
    assert doc["ok"] is True and doc["facts"]["machine"]["threads"] == 2
    labels = {c["label"]: c["status"] for s in doc["sections"] for c in s["checks"]}
    assert labels["answer"] == "ok" and labels["known-answer checks"] == "skip"


def test_doctor_fails_without_model_files(tmp_path, capsys):
    rc = main(["doctor", "--models", str(tmp_path), "--no-download"])
    assert rc == 1 and "✗ not found" in capsys.readouterr().out


def _quant_check(out: Path) -> dict:
    return next(s for s in json.loads(out.read_text())["sections"] if s["title"] == "Quantization")["checks"][0]


def test_quant_comparison_of_the_llm_against_itself_agrees_fully(tiny_models, tmp_path, capsys):
    out = tmp_path / "doctor.json"
    rc = main(["doctor", "--models", str(tiny_models.llm.parent), "--no-download", "--threads", "2",
               "--reference-llm", str(tiny_models.llm), "--json", str(out)])
    assert rc == 0
    quant = _quant_check(out)
    assert quant["status"] == "ok" and "agrees at 100.0%" in quant["detail"] and "KL mean 0.0000" in quant["detail"]


def test_facts_only_runs_no_model(tiny_models, tmp_path, monkeypatch):
    """--facts-only reads the files: neither the quantization comparison nor an engine may load a model."""
    def no_model(*args, **kwargs):
        raise AssertionError("--facts-only ran a model")

    monkeypatch.setattr(doctor_cli.checks, "quant_check", no_model)
    monkeypatch.setattr(Engine, "load", no_model)
    out = tmp_path / "doctor.json"
    rc = main(["doctor", "--models", str(tiny_models.llm.parent), "--no-download", "--facts-only",
               "--reference-llm", str(tiny_models.llm), "--json", str(out)])
    assert rc == 0
    quant = _quant_check(out)
    assert quant["status"] == "skip" and "--facts-only runs no model" in quant["detail"]


def _perturbed(vision: Path, out: Path, relative: float) -> Path:
    """A copy of the vision graph whose last matrix (the projector's output) carries `relative` random error."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(vision))
    init = [t for t in model.graph.initializer if len(t.dims) == 2][-1]
    w = numpy_helper.to_array(init)
    noise = np.random.default_rng(0).normal(size=w.shape).astype(np.float32)
    init.CopyFrom(numpy_helper.from_array(w + relative * np.abs(w).mean() * noise, init.name))
    onnx.save(model, str(out))
    return out


def _int8_gate(tiny_config, int8: Path):
    engine = Engine.load(replace(tiny_config, kv_reuse=False, vision_runtime="auto"))
    engine.resolutions = lambda: (engine.resolution,)  # one size keeps it fast (OpenVINO compiles per size)
    args = argparse.Namespace(int8_vision=int8, vision_runtime="onnxruntime")
    loaded = []
    try:
        return doctor_cli._real_checks(args, engine, loaded)[1]
    finally:
        for v in loaded:
            v.close()
        engine.close()


def test_an_int8_file_that_drifts_fails_the_gate(tiny_config, tiny_models, tmp_path):
    """A vision file 30 % off in its projector (an int8 file gone wrong) must fail the int8 gate."""
    cross = _int8_gate(tiny_config, _perturbed(tiny_models.vision, tmp_path / "vision-int8-ort.onnx", 0.3))
    status = {c.label: c.status for c in cross.checks}
    assert status["int8 gate"] == "fail"
    emb = next(c for c in cross.checks if c.label.startswith("int8") and "embeddings" in c.label)
    assert emb.status == "fail" and "min cosine" in emb.detail


def test_runtime_cross_check_and_int8_gate_on_real_runtimes(tiny_config, tiny_models):
    """The real-weights path on the tiny models: ONNX Runtime f32 against the default runtime, and the same
    f32 file given as the 'int8' one passes its gate (identical embeddings and answers)."""
    engine = Engine.load(replace(tiny_config, kv_reuse=False, vision_runtime="auto"))
    engine.resolutions = lambda: (engine.resolution,)  # one size keeps it fast (OpenVINO compiles per size)
    args = argparse.Namespace(int8_vision=tiny_models.vision, vision_runtime="onnxruntime")
    loaded = []
    try:
        sections = doctor_cli._real_checks(args, engine, loaded)
    finally:
        for v in loaded:
            v.close()
        engine.close()
    cross = sections[1]
    assert isinstance(cross, Section)
    status = {c.label: c.status for c in cross.checks}
    assert status["int8 gate"] == "ok"
    emb = [c for c in cross.checks if "embeddings" in c.label]
    assert emb and all(c.status == "ok" for c in emb)
