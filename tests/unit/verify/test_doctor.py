"""doctor's judgement with scripted models: known answers, two images, vision gates, quant thresholds, report."""

from pathlib import Path

import numpy as np
import pytest

from fastvlm import EngineConfig
from fastvlm.engine.engine import Engine
from fastvlm.verify.doctor import checks, facts
from fastvlm.verify.doctor.report import Section, exit_code, render, to_json
from fastvlm.verify.quant_check import QuantCheck
from tests.fakes import FakeLM, FakeVision


def engine(script=b"Hello!", vision=None, lm=None):
    cfg = EngineConfig(vision_path="v.onnx", llm_path="m.gguf", resolution=128, threads=1, kv_reuse=False)
    return Engine(vision or FakeVision(), lm or FakeLM(script), cfg)


class ImageAwareLM(FakeLM):
    """Answers with a digest of the image positions it was given: different images, different answers."""

    def generate(self, options, seed=0):
        keys = sorted({i[0] for i in self.prefills[-1] if isinstance(i, tuple)})
        self.script = ("image " + ",".join(k[:6] for k in keys)).encode()
        return super().generate(options, seed)


class NoisyVision(FakeVision):
    def __init__(self, amplitude: float):
        super().__init__()
        self.rng, self.amplitude = np.random.default_rng(0), amplitude

    def encode(self, pixels):
        out = super().encode(pixels)
        return out + self.rng.normal(0, self.amplitude, out.shape).astype(np.float32)


@pytest.mark.parametrize("answer, red, digits", [
    ("Red.", True, False), ("The circle is red", True, False), ("bored", False, False),
    ("375", False, True), ("3 7 5", False, True), ("It says 3,75.", False, True), ("357", False, False),
])
def test_answer_judges(answer, red, digits):
    assert (checks.names_red(answer), checks.has_digits(answer)) == (red, digits)


def test_an_engine_that_names_red_but_misses_the_digits_fails():
    s = Section("answers")
    answers = checks.known_answers(engine(b"It is red."), s, (128,))
    status = {c.label: c.status for c in s.checks}
    assert status == {"red disc at 128": "ok", "digits at 128": "fail"}
    assert answers["digits", 128] == "It is red."
    assert exit_code([s]) == 1
    assert "✗ digits at 128" in render([s]) and "fix:" in render([s])


def test_an_engine_that_gets_both_right_passes_at_every_size():
    s = Section("answers")
    checks.known_answers(engine(b"Red 375"), s, (128, 64))
    assert [c.status for c in s.checks] == ["ok"] * 4 and exit_code([s]) == 0


def test_two_images_must_get_two_answers():
    same, differ = Section("a"), Section("b")
    checks.distinct_answers(engine(b"A picture."), same, 128)
    checks.distinct_answers(engine(lm=ImageAwareLM()), differ, 128)
    assert same.checks[0].status == "fail" and differ.checks[0].status == "ok"


@pytest.mark.parametrize("amplitude, status", [(0.0, "ok"), (0.01, "ok"), (5.0, "fail")])
def test_vision_gate_cosine_threshold(amplitude, status):
    s = Section("gate")
    ref, cand = engine(b"Red"), engine(b"Red", vision=NoisyVision(amplitude))
    passed = checks.vision_gate(ref, cand, s, "cand", checks.INT8_COSINE_MIN, must_agree=True)
    assert s.checks[0].status == status and passed == (status == "ok")
    assert f">= {checks.INT8_COSINE_MIN}" in s.checks[0].detail  # the threshold is stated


class OneImageOff(FakeVision):
    """Exact on every drawn image but the first, whose embeddings get a 10 % orthogonal error (cosine ~0.995)."""

    def encode(self, pixels):
        out = super().encode(pixels)  # counts the calls
        if self.calls > 1:
            return out
        noise = np.random.default_rng(1).normal(size=out.shape)
        noise -= (noise.ravel() @ out.ravel()) / (out.ravel() @ out.ravel()) * out  # orthogonal to `out`
        return (out + 0.1 * np.linalg.norm(out) / np.linalg.norm(noise) * noise).astype(np.float32)


def test_the_int8_gate_is_the_converters_and_judges_the_worst_image():
    """Mean cosine over the images stays above 0.99, one image is below the converter's 0.999: the gate fails."""
    from fastvlm.convert.int8 import COSINE_GATE

    s = Section("gate")
    ref, cand = engine(b"Red"), engine(b"Red", vision=OneImageOff())
    cos = checks.embedding_cosines(ref.vision, OneImageOff(), 128)
    assert np.mean(list(cos.values())) >= 0.99 and 0.99 < min(cos.values()) < COSINE_GATE
    assert checks.INT8_COSINE_MIN == COSINE_GATE
    assert not checks.vision_gate(ref, cand, s, "int8", checks.INT8_COSINE_MIN, must_agree=True)
    assert s.checks[0].status == "fail" and "min cosine" in s.checks[0].detail


class NanAfterFirst(FakeVision):
    """Exact on the first drawn image, NaN embeddings on the others (a broken int8 file)."""

    def encode(self, pixels):
        out = super().encode(pixels)
        return out if self.calls == 1 else np.full_like(out, np.nan)


def test_nan_embeddings_on_any_image_fail_the_gate():
    s = Section("gate")
    ref, cand = engine(b"Red"), engine(b"Red", vision=NanAfterFirst())
    assert not checks.vision_gate(ref, cand, s, "int8", checks.INT8_COSINE_MIN, must_agree=True)  # was passed:
    assert s.checks[0].status == "fail" and "min cosine nan" in s.checks[0].detail  # min() skipped the NaN


@pytest.mark.parametrize("must_agree, status", [(True, "fail"), (False, "warn")])
def test_vision_gate_answers_must_agree_or_warn(must_agree, status):
    s = Section("gate")
    passed = checks.vision_gate(engine(b"Red"), engine(b"Blue"), s, "cand", 0.99, must_agree=must_agree)
    assert s.checks[0].status == "ok" and s.checks[1].status == status
    assert passed == (not must_agree)


def test_with_vision_shares_the_lm_only_without_kv_reuse():
    e = engine()
    other = checks.with_vision(e, NoisyVision(0.1))
    assert other.lm is e.lm and other.vision is not e.vision
    cfg = EngineConfig(vision_path="v.onnx", llm_path="m.gguf", resolution=128, threads=1)
    with pytest.raises(ValueError, match="kv_reuse"):
        checks.with_vision(Engine(FakeVision(), FakeLM(), cfg), FakeVision())


@pytest.mark.parametrize("top1, kl, status", [(0.97, 0.01, "ok"), (0.80, 0.01, "fail"), (0.95, 0.3, "fail")])
def test_quant_thresholds(top1, kl, status):
    s = Section("q")
    fake = lambda q, r, threads=None: QuantCheck(q, r, 100, top1, kl, kl * 3)  # noqa: E731
    checks.quant_check(Path("llm-q4.gguf"), Path("llm-bf16.gguf"), s, compare=fake)
    assert s.checks[0].status == status and "gate" in s.checks[0].detail


def test_synthetic_names():
    assert facts.is_synthetic("fastvlm-synth-tiny") and facts.is_synthetic("Random FastVLM")
    assert not facts.is_synthetic("FastVLM-0.5B")


def test_width_mismatch_fails_with_a_fix(tiny_models):
    g = facts.read_gguf(tiny_models.llm)
    wrong = facts.GgufFacts(**{**g.__dict__, "width": 896})
    s, _ = facts.vision_section(tiny_models.vision, "here", wrong)
    bad = [c for c in s.checks if c.status == "fail"]
    assert len(bad) == 1 and "896" in bad[0].detail and "one source" in bad[0].fix


def test_a_missing_external_data_file_fails_naming_it(tiny_models, tmp_path):
    """--facts-only said 'no problems found' for a graph whose weights file was not beside it."""
    import onnx

    graph = tmp_path / "vision.onnx"
    onnx.save_model(onnx.load(str(tiny_models.vision)), str(graph), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="vision.onnx_data", size_threshold=0)
    s, _ = facts.vision_section(graph, "here", None)
    assert not [c for c in s.checks if c.status == "fail"]  # all there: fine
    (tmp_path / "vision.onnx_data").unlink()
    s, spec = facts.vision_section(graph, "here", None)
    bad = [c for c in s.checks if c.status == "fail"]
    assert spec is None and len(bad) == 1 and "vision.onnx_data, missing beside it" in bad[0].detail


def test_report_json_says_ok_only_without_failures():
    s = Section("s")
    s.add("warn", "w", "x", "y")
    assert to_json([s])["ok"] is True
    s.add("fail", "f")
    doc = to_json([s], {"machine": {}})
    assert doc["ok"] is False and doc["sections"][0]["checks"][1]["status"] == "fail"


def test_a_pin_mismatch_is_named_as_such_not_as_a_missing_file():
    from fastvlm.engine.events import ModelFileError
    from fastvlm.verify.doctor.cli import unusable_files
    from fastvlm.weights.pins import PinMismatch

    changed = unusable_files(PinMismatch("llm.gguf is not the file that was pinned: sha256 ab… instead of cd…"))
    missing = unusable_files(ModelFileError("language model not found: m.gguf"))
    assert [c.label for c in changed.checks] == ["not the pinned file"] and "re-pin" in changed.checks[0].fix
    assert [c.label for c in missing.checks] == ["not found"]
    assert all(c.status == "fail" for c in changed.checks + missing.checks)


@pytest.mark.parametrize("narrow", [True, False])
def test_the_machine_section_warns_when_vectors_are_narrow(narrow, monkeypatch):
    monkeypatch.setattr(facts, "narrow_vectors", lambda: narrow)
    section, _ = facts.machine_section(1)
    speed = [c for c in section.checks if c.label == "speed"]
    assert [c.status for c in speed] == (["warn"] if narrow else [])  # shown with its fix; the exit code unchanged
    if narrow:
        assert "AVX-512" in speed[0].detail and "--resolution 512" in speed[0].fix and "--vision int8" in speed[0].fix
        assert "--voice-turns" in speed[0].fix


@pytest.mark.parametrize("top1, kl, status", [
    (checks.QUANT_TOP1_MIN, 0.01, "ok"), (checks.QUANT_TOP1_MIN - 0.001, 0.01, "fail"),
    (0.97, checks.QUANT_KL_MAX, "ok"), (0.97, checks.QUANT_KL_MAX + 0.001, "fail")])
def test_quant_gates_take_their_limits_and_refuse_past_them(top1, kl, status):
    s = Section("q")
    checks.quant_check(Path("llm-q4.gguf"), Path("llm-bf16.gguf"), s,
                       compare=lambda q, r, threads=None: QuantCheck(q, r, 100, top1, kl, kl))
    assert s.checks[0].status == status


@pytest.mark.parametrize("worst, status", [(0.99, "ok"), (0.9899, "fail")])
def test_the_vision_gate_takes_its_limit(monkeypatch, worst, status):
    monkeypatch.setattr(checks, "embedding_cosines", lambda ref, cand, size: {"red_disc": 0.9999, "digits": worst})
    s = Section("gate")
    passed = checks.vision_gate(engine(b"Red"), engine(b"Red"), s, "cand", 0.99, must_agree=True)
    assert s.checks[0].status == status and passed == (status == "ok")


def test_long_answers_are_quoted_cut_to_their_width():
    assert checks._quote("a" * 10, 10) == repr("a" * 10)
    assert checks._quote("a" * 11, 10) == repr("a" * 9 + "…")  # ten characters with the ellipsis
    assert checks._quote("b" * 100) == repr("b" * 79 + "…")  # 80 by default


def test_the_report_gives_each_fix_once_and_counts_warnings():
    s = Section("Files")
    s.add("fail", "a", "broken", "download again")
    s.add("fail", "b", "broken too", "download again")  # the same fix: said once
    s.add("warn", "c", "slow", "use 512")
    s.add("ok", "d", "fine", "never shown for a passing check")
    s.add("skip", "e", "skipped", "nor for a skipped one")
    text = render([s])
    assert text.count("fix: download again") == 1 and "fix: use 512" in text
    assert "never shown" not in text and "nor for" not in text
    assert text.endswith("2 problem(s) found, 1 warning(s)")
    assert render([Section("empty")]).endswith("no problems found")
    assert to_json([s], None)["facts"] == {}


def test_doctors_answers_are_greedy_and_short():
    asked = []

    class Recording:
        def answer(self, request):
            asked.append(request)
            return engine(b"Red").answer(request)

    checks.ask(Recording(), np.zeros((8, 8, 3), np.uint8), "What colour?", 128)
    options = asked[0].options
    assert (options.temperature, options.max_new_tokens, asked[0].resolution) == (0.0, checks.ANSWER_TOKENS, 128)
