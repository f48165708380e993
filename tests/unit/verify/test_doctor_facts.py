"""doctor's facts about the files and the machine: what it reads from a GGUF's header, and what it warns of
(another architecture, another end-of-turn token, no AVX2, a runtime not installed)."""

from __future__ import annotations

import pytest

from fastvlm.verify.doctor import facts


def write_gguf(path, arch: str = "qwen2", tokens=("a", "<|im_end|>", "c"), eos: int | None = 1, name: str = "m"):
    """A GGUF with a header only (no tensors): what doctor reads without loading the model."""
    import gguf

    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(name)
    writer.add_embedding_length(64)
    writer.add_token_list(list(tokens))
    if eos is not None:
        writer.add_eos_token_id(eos)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize("eos, token", [(1, "<|im_end|>"), (0, "a"), (2, "c"), (3, "?"), (None, "?")])
def test_the_eos_token_is_read_by_its_id_and_an_id_past_the_vocabulary_is_unknown(tmp_path, eos, token):
    g = facts.read_gguf(write_gguf(tmp_path / "m.gguf", eos=eos))
    assert (g.vocab_size, g.eos_id, g.eos_token, g.width) == (3, eos, token, 64)


def test_a_gguf_without_a_name_is_named_after_its_file(tmp_path):
    g = facts.read_gguf(write_gguf(tmp_path / "my-model.gguf", name=""))
    assert g.name == "my-model" and g.architecture == "qwen2" and g.file_type == "not stated"


def _warnings(section) -> dict[str, str]:
    return {c.label: c.detail for c in section.checks if c.status == "warn"}


def test_a_qwen2_gguf_ending_at_im_end_gets_no_warning(tmp_path):
    section, g = facts.llm_section(write_gguf(tmp_path / "m.gguf"), "here")
    assert g is not None and _warnings(section) == {}
    assert any(c.label == "vocabulary" and "'<|im_end|>'" in c.detail for c in section.checks)


def test_another_architecture_and_another_eos_are_warned_of(tmp_path):
    section, _ = facts.llm_section(write_gguf(tmp_path / "m.gguf", arch="llama", eos=2), "here")
    warned = _warnings(section)
    assert set(warned) == {"architecture", "eos"}
    assert "llama; FastVLM's language model is qwen2" in warned["architecture"] and "'c'" in warned["eos"]


def test_a_file_that_is_not_a_gguf_fails_with_the_fix(tmp_path):
    bad = tmp_path / "llm.gguf"
    bad.write_bytes(b"not a gguf at all")
    section, g = facts.llm_section(bad, "here")
    fails = [c for c in section.checks if c.status == "fail"]
    assert g is None and len(fails) == 1 and "not a readable GGUF" in fails[0].detail and "--llm" in fails[0].fix


def _machine(monkeypatch, features: list[str], versions: dict) -> dict[str, tuple[str, str]]:
    monkeypatch.setattr(facts, "machine_info", lambda threads, packages: {
        "cpu": "Test CPU", "cpu_features": features, "physical_cores": 2, "logical_cores": 2, "memory_gib": 8,
        "python": "3.11", "platform": "linux", "versions": versions})
    monkeypatch.setattr(facts, "narrow_vectors", lambda: False)
    section, _ = facts.machine_section(2)
    return {c.label: (c.status, c.detail) for c in section.checks}


def test_the_machine_without_avx2_or_a_runtime_is_told(monkeypatch):
    every = {pkg: "1.0" for pkg in facts.REQUIRED}
    fine = _machine(monkeypatch, ["AVX2", "AVX-512"], every)
    assert fine["features"] == ("info", "AVX2, AVX-512") and "AVX2" not in fine
    assert not [label for label, (status, _) in fine.items() if status == "fail"]
    missing = next(iter(facts.REQUIRED))
    bare = _machine(monkeypatch, [], {k: v for k, v in every.items() if k != missing})
    assert bare["features"] == ("info", "none of AVX2 / AVX-512 / VNNI / BF16 / AMX")
    assert bare["AVX2"][0] == "warn" and bare[missing][0] == "fail" and "not installed" in bare[missing][1]
