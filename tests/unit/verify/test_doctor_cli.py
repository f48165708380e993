"""`python -m fastvlm doctor`'s order of work with the machine, the files and the models replaced: which GGUF the
quantization is measured against, when a check is skipped and why, which engine the checks get, how strict each
vision gate is, and the JSON report."""

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from fastvlm import EngineConfig
from fastvlm.cli.main import build_parser
from fastvlm.engine.engine import Engine
from fastvlm.engine.events import ModelFileError
from fastvlm.engine.kv import Image
from fastvlm.verify.doctor import cli as doctor_cli
from fastvlm.verify.doctor.report import Section
from fastvlm.weights.resolve import ModelPaths
from tests.fakes import FakeLM, FakeVision

REAL_NAME, SYNTHETIC_NAME = "FastVLM-0.5B", "fastvlm-synth-tiny"


class NamedLM(FakeLM):
    def __init__(self, name: str, script: bytes = b"Hello!"):
        super().__init__(script)
        self.name = name


class EmbeddingLM(NamedLM):
    """Answers with the mean of the image embeddings it was given: two visions that differ answer differently."""

    def prefill(self, parts, should_stop=None, logits=True) -> int:
        images = [p.embeddings for p in parts if isinstance(p, Image)]
        if images:
            self.script = f"{float(np.mean(images[-1])):.6f}".encode()
        return super().prefill(parts, should_stop, logits)


class ShiftedVision(FakeVision):
    """FakeVision's embeddings plus a constant: parallel to them (cosine 1), so only the answers tell them apart."""

    def encode(self, pixels):
        return super().encode(pixels) + 0.25


@dataclass
class Doctor:
    folder: Path
    llm: Path
    quant_checks: list  # (chosen, reference) of each quantization comparison run
    configs: list  # the EngineConfig each Engine.load got
    gguf_name: str = REAL_NAME  # the name read from the GGUF's metadata
    engine_name: str = SYNTHETIC_NAME  # the name the loaded engine's LM reports
    verdict: object = None  # llama.cpp's AMX verdict

    def run(self, *flags: str, llm: Path | None = None) -> tuple[int, dict]:
        out = self.folder / "report" / "nested" / "doctor.json"
        args = build_parser().parse_args(["doctor", *flags, "--threads", "2", "--json", str(out)])
        paths = ModelPaths(vision=self.folder / "vision.onnx", llm=llm or self.llm, sources={"llm": "given"})
        rc = doctor_cli.run(args, lambda a: paths, lambda a, p: EngineConfig(vision_path=p.vision, llm_path=p.llm))
        return rc, json.loads(out.read_text(encoding="utf-8"))


def check(report: dict, section: str, label: str) -> dict:
    s = next(s for s in report["sections"] if s["title"].startswith(section))
    return next(c for c in s["checks"] if c["label"] == label)


@pytest.fixture
def doctor(tmp_path, monkeypatch) -> Doctor:
    d = Doctor(tmp_path, tmp_path / "llm.gguf", [], [])
    d.llm.write_bytes(b"q8_0")

    def machine(threads):
        s = Section("Machine")
        s.add("info", "CPU", "Intel® Xeon® Processor")
        return s, {"threads": threads}

    def quant_check(chosen, reference, section, threads=None):
        d.quant_checks.append((chosen, reference))
        section.add("ok", "quantization", "compared")

    def load(config, warm_up=True):
        d.configs.append(config)
        return Engine(FakeVision(), NamedLM(d.engine_name), config)

    monkeypatch.setattr(doctor_cli.facts, "machine_section", machine)
    monkeypatch.setattr(doctor_cli, "llama_section", lambda: (Section("llama.cpp"), d.verdict))
    monkeypatch.setattr(doctor_cli.facts, "llm_section",
                        lambda path, source: (Section("LLM"), SimpleNamespace(name=d.gguf_name)))
    monkeypatch.setattr(doctor_cli.facts, "vision_section", lambda path, source, g: (Section("Vision"), None))
    monkeypatch.setattr(doctor_cli.checks, "quant_check", quant_check)
    monkeypatch.setattr(Engine, "load", load)
    return d


def test_real_weights_are_measured_against_the_bf16_file_beside_them(doctor):
    (doctor.folder / doctor_cli.BF16_NAME).write_bytes(b"bf16")
    rc, report = doctor.run()
    assert doctor.quant_checks == [(doctor.llm, doctor.folder / doctor_cli.BF16_NAME)]
    assert rc == 0 and check(report, "Quantization", "quantization")["status"] == "ok"


@pytest.mark.parametrize("why, beside, chosen, gguf_name", [
    ("no BF16 reference", False, "llm.gguf", REAL_NAME),
    ("no BF16 reference", True, doctor_cli.BF16_NAME, REAL_NAME),  # the chosen file is the BF16 one
    ("synthetic weights", True, "llm.gguf", SYNTHETIC_NAME),
])
def test_the_quantization_is_skipped_with_its_reason(doctor, why, beside, chosen, gguf_name):
    if beside:
        (doctor.folder / doctor_cli.BF16_NAME).write_bytes(b"bf16")
    doctor.gguf_name = gguf_name
    rc, report = doctor.run(llm=doctor.folder / chosen)
    quant = check(report, "Quantization", "quantization")
    assert rc == 0 and quant["status"] == "skip" and why in quant["detail"], quant
    assert doctor.quant_checks == []


def test_a_reference_given_that_is_not_there_fails_naming_it(doctor):
    rc, report = doctor.run("--reference-llm", str(doctor.folder / "gone.gguf"))
    reference = check(report, "Quantization", "reference")
    assert rc == 1 and reference["status"] == "fail" and "gone.gguf not found" in reference["detail"]


def test_with_amx_off_in_llama_cpp_the_quantization_is_skipped_with_the_notice(doctor):
    (doctor.folder / doctor_cli.BF16_NAME).write_bytes(b"bf16")
    doctor.verdict = SimpleNamespace(extra_buffers=False, notice="AMX is off: the fix")
    rc, report = doctor.run()
    assert check(report, "Quantization", "quantization")["detail"] == "skipped: AMX is off: the fix"
    assert doctor.quant_checks == []
    doctor.verdict = SimpleNamespace(extra_buffers=True, notice="")
    doctor.run()
    assert len(doctor.quant_checks) == 1


def test_the_checks_get_an_engine_without_kv_snapshots(doctor):
    rc, report = doctor.run()
    assert [c.kv_reuse for c in doctor.configs] == [False]  # the gates' engines share its LM (checks.with_vision)
    assert check(report, "Engine", "answer")["status"] == "ok"


def test_an_engine_that_says_its_weights_are_random_skips_the_known_answers(doctor):
    doctor.gguf_name, doctor.engine_name = REAL_NAME, SYNTHETIC_NAME  # the file's name passed, the engine's did not
    rc, report = doctor.run()
    assert rc == 0 and check(report, "Answers", "known-answer checks")["status"] == "skip"


def test_the_json_report_is_written_into_new_folders_as_readable_utf8(doctor):
    rc, report = doctor.run("--facts-only")
    text = (doctor.folder / "report" / "nested" / "doctor.json").read_text(encoding="utf-8")
    assert "Intel® Xeon®" in text and report["facts"]["machine"] == {"threads": 2}


# -- the vision gates on real weights (`_real_checks`), with the runtimes' loaders replaced -------------------------
@pytest.fixture
def gates(monkeypatch):
    """Runs doctor's real-weights checks on an engine of `vision`, ONNX Runtime's f32 reference being FakeVision
    and the int8 file loading as `int8`; returns the vision-runtimes section and the runtime each int8 load asked."""
    from fastvlm.engine import vision as vision_module
    from fastvlm.engine import vision_runtimes

    asked = []
    monkeypatch.setattr(vision_module.OnnxVision, "load", classmethod(lambda cls, *a, **k: FakeVision()))

    def run(vision, int8=None, int8_name="vision-int8-ort.onnx", default_runtime="auto", openvino=True):
        def load_vision(path, threads, runtime, **kwargs):
            asked.append(runtime)
            if int8 is None:
                raise ModelFileError(f"{path} is not a vision graph")
            return int8

        monkeypatch.setattr(vision_runtimes, "load_vision", load_vision)
        monkeypatch.setattr(vision_runtimes, "openvino_available", lambda: openvino)
        config = EngineConfig(vision_path="v.onnx", llm_path="m.gguf", resolution=128, threads=1, kv_reuse=False)
        engine = Engine(vision, EmbeddingLM(REAL_NAME), config)
        engine.resolutions = lambda: (128,)
        args = argparse.Namespace(int8_vision=Path(int8_name), vision_runtime=default_runtime)
        cross = doctor_cli._real_checks(args, engine, [])[1]
        return {c.label: c.status for c in cross.checks}, asked

    return run


def test_runtimes_whose_answers_differ_only_warn(gates):
    status, _ = gates(ShiftedVision(), int8=FakeVision())
    assert status["ShiftedVision: embeddings at 128"] == "ok"  # parallel embeddings: cosine 1
    assert status["ShiftedVision: greedy answers differ"] == "warn"
    assert status["int8 gate"] == "ok"


def test_an_int8_file_whose_answers_differ_fails_its_gate(gates):
    status, _ = gates(FakeVision(), int8=ShiftedVision())
    assert status["FakeVision: greedy answers"] == "ok"
    assert status["int8 vision-int8-ort.onnx (onnxruntime): greedy answers differ"] == "fail"
    assert status["int8 gate"] == "fail"


@pytest.mark.parametrize("name, openvino, runtime", [
    ("vision-int8-ov.onnx", True, "openvino"),
    ("vision-int8-ov.onnx", False, "auto"),  # OpenVINO's file without OpenVINO: the runtime asked for
    ("vision-int8-ort.onnx", True, "onnxruntime"),
    ("my-int8.onnx", True, "auto"),
])
def test_the_int8_files_runtime_follows_its_name(gates, name, openvino, runtime):
    status, asked = gates(FakeVision(), int8_name=name, openvino=openvino)
    assert asked == [runtime]
    assert status["int8 vision"] == "fail"  # the loader's error, named
