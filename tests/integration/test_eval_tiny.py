"""eval on the tiny models through the command line: the answers are stamped with the model that made them."""

from __future__ import annotations

import json
import shutil

from PIL import Image

from fastvlm.cli.main import main


def test_a_resume_with_another_model_is_refused(tiny_models, tmp_path, caplog):
    Image.new("RGB", (64, 64), "red").save(tmp_path / "a.png")
    data = tmp_path / "pope.jsonl"
    rows = [{"id": str(i), "image": "a.png", "question": f"Is it red {i}?", "label": "yes"} for i in range(2)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "res.jsonl"
    argv = ["eval", "--task", "pope", "--data", str(data), "--out", str(out), "--resolution", "128",
            "--max-tokens", "2", "--threads", "2", "--vision", str(tiny_models.vision)]
    assert main([*argv, "--llm", str(tiny_models.llm), "--limit", "1"]) == 0
    summary = json.loads(out.with_name("res.summary.json").read_text())
    assert summary["model"]["llm"] == str(tiny_models.llm)
    assert summary["model"]["llm_bytes"] == tiny_models.llm.stat().st_size
    assert summary["machine"]["threads"] == 2 and summary["machine"]["cpu"]
    other = shutil.copy(tiny_models.llm, tmp_path / "other.gguf")
    assert main([*argv, "--llm", str(other)]) == 2  # was: the second answer came from the other model
    assert "another model or machine" in caplog.text and "other.gguf" in caplog.text
    assert len(out.read_text().splitlines()) == 1
