"""`python -m fastvlm convert`'s flags (fastvlm/cli/convert.py) with the converter, the random checkpoint and the
parity check replaced: which checkpoint is converted, what is printed, and the exit code."""

import argparse
import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

from fastvlm.cli import convert as cli


def parse(*flags: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    return parser.parse_args(list(flags))


@pytest.fixture
def converted(monkeypatch) -> list[tuple]:
    """Every conversion asked for (checkpoint, out, quants, threads); each writes small files whose sizes are known."""
    import fastvlm.convert.build as build

    calls = []

    def convert_quants(checkpoint, out, quants, threads, progress=None):
        calls.append((checkpoint, out, quants, threads))
        out.mkdir(parents=True, exist_ok=True)
        (out / "vision.onnx").write_bytes(b"v" * 2**20)
        llms = {q: out / ("llm.gguf" if i == 0 else f"llm-{q}.gguf") for i, q in enumerate(quants)}
        for path in llms.values():
            path.write_bytes(b"l" * 2**19)
        return out / "vision.onnx", llms

    monkeypatch.setattr(build, "convert_quants", convert_quants)
    return calls


@pytest.mark.parametrize("flags", [[], ["ckpt", "--random-init"]])
def test_one_source_is_asked_for_either_a_checkpoint_or_random_weights(flags, tmp_path):
    with pytest.raises(SystemExit, match="either CHECKPOINT_DIR or --random-init"):
        cli.run(parse(*flags, "--out", str(tmp_path)))


def test_a_checkpoint_is_converted_to_each_type_asked_and_the_files_are_listed(converted, tmp_path, capsys):
    out = tmp_path / "models"
    assert cli.run(parse("ckpt", "--out", str(out), "--quant", "Q8_0", "bf16", "--threads", "3", "--no-check")) == 0
    assert converted == [(Path("ckpt"), out, ("q8_0", "bf16"), 3)]
    printed = capsys.readouterr().out
    assert f"vision: {out / 'vision.onnx'} (1.0 MiB)" in printed
    assert f"llm q8_0: {out / 'llm.gguf'} (0.5 MiB)" in printed and f"llm bf16: {out / 'llm-bf16.gguf'}" in printed


def test_random_weights_are_written_beside_the_output_then_converted(monkeypatch, converted, tmp_path):
    import fastvlm.synth.apple_layout as apple_layout
    import fastvlm.synth.random_model as random_model

    written = []

    def writer(layout):
        def write(folder, shape, seed):
            written.append((layout, folder.parent.parent, folder.name, shape, seed))
            return folder
        return write

    monkeypatch.setattr(random_model, "write_checkpoint", writer("transformers"))
    monkeypatch.setattr(apple_layout, "write_apple_checkpoint", writer("apple"))
    for flags in (["--shape", "tiny", "--seed", "7"], ["--apple-layout"]):
        assert cli.run(parse("--random-init", *flags, "--out", str(tmp_path / "out"), "--no-check")) == 0
    assert [w[0] for w in written] == ["transformers", "apple"]
    assert [w[1] for w in written] == [tmp_path, tmp_path]  # a temporary folder on the output's disk
    assert [w[2:] for w in written] == [("fastvlm-synth-random-tiny", "tiny", 7),
                                        ("fastvlm-synth-random-0.5b", "0.5b", 0)]
    assert [c[0].name for c in converted] == ["fastvlm-synth-random-tiny", "fastvlm-synth-random-0.5b"]


@pytest.mark.parametrize("passed", [True, False])
def test_the_parity_check_of_the_first_type_decides_the_exit_code(monkeypatch, converted, tmp_path, capsys, passed):
    import fastvlm.verify.parity as parity

    checked = []

    def check_converted(checkpoint, vision, llm, quant, resolution, threads):
        checked.append((llm.name, quant, resolution, threads))
        return SimpleNamespace(passed=passed, summary=lambda: "parity: the summary")

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())  # torch, timm, transformers "present"
    monkeypatch.setattr(parity, "check_converted", check_converted)
    code = cli.run(parse("ckpt", "--out", str(tmp_path), "--quant", "bf16", "q4_0", "--resolution", "512"))
    assert code == (0 if passed else 1) and checked == [("llm.gguf", "bf16", 512, 2)]
    assert "parity: the summary" in capsys.readouterr().out


def test_without_the_reference_packages_the_check_is_skipped_and_says_why(monkeypatch, converted, tmp_path, capsys):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "timm" else object())
    assert cli.run(parse("ckpt", "--out", str(tmp_path))) == 0
    assert "parity check skipped: it needs torch, timm and transformers" in capsys.readouterr().out


@pytest.mark.parametrize("passed", [True, False])
def test_the_parity_command_prints_its_report_and_exits_by_it(monkeypatch, capsys, passed):
    import fastvlm.verify.parity as parity

    asked = []

    def run_parity(shape, seeds, modes, tokens, resolution, threads, keep):
        asked.append((shape, seeds, modes))
        return SimpleNamespace(passed=passed, summary=lambda: "parity: the summary")

    monkeypatch.setattr(parity, "run_parity", run_parity)
    parser = argparse.ArgumentParser()
    cli.add_parity_arguments(parser)
    args = parser.parse_args(["--seed", "3", "--mode", "strict"])
    assert cli.run_parity_command(args) == (0 if passed else 1)
    assert asked == [("tiny", (3,), ("strict",))] and "parity: the summary" in capsys.readouterr().out
