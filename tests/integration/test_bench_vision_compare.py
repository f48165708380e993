"""bench --compare-vision: the same graphs on both runtimes, in turns, with the first as the baseline."""

from __future__ import annotations

import json
import shutil

import pytest

from fastvlm.bench import vision_compare
from fastvlm.cli.main import main


def test_two_graphs_are_timed_on_each_runtime_against_the_first(tiny_models, tmp_path, capsys):
    pytest.importorskip("openvino")
    copy = shutil.copy(tiny_models.vision, tmp_path / "copy.onnx")
    report = tmp_path / "vc.json"
    assert main(["bench", "--compare-vision", str(tiny_models.vision), str(copy), "--resolution", "128",
                 "--num-runs", "3", "--threads", "1", "--report-json", str(report)]) == 0
    rows = json.loads(report.read_text())["vision_compare"]
    assert [(r["runtime"], r["graph"]) for r in rows] == [
        (rt, str(g)) for rt in ("onnxruntime", "openvino") for g in (tiny_models.vision, copy)]
    assert all(r["size"] == 128 and r["runs"] == 3 and 0 < r["min_s"] <= r["median_s"] < 60 for r in rows)
    assert rows[0]["ratio_to_first"] == rows[2]["ratio_to_first"] == 1.0
    assert rows[1]["ratio_to_first"] == pytest.approx(rows[1]["median_s"] / rows[0]["median_s"])
    out = capsys.readouterr().out
    assert f"median {rows[1]['median_s'] * 1000:7.1f} ms (min {rows[1]['min_s'] * 1000:7.1f}, 3 runs)" in out


def test_without_openvino_only_onnx_runtime_is_compared(tiny_models, monkeypatch, caplog):
    monkeypatch.setattr(vision_compare, "openvino_available", lambda: False)
    rows = vision_compare.compare([tiny_models.vision], (128,), threads=1, runs=2)
    assert [(r["runtime"], r["size"], r["runs"]) for r in rows] == [("onnxruntime", 128, 2)]
    assert "OpenVINO is not installed" in caplog.text


def test_a_missing_graph_is_named(tiny_models, tmp_path):
    with pytest.raises(SystemExit, match="no such file: .*absent.onnx"):
        main(["bench", "--compare-vision", str(tiny_models.vision), str(tmp_path / "absent.onnx")])
