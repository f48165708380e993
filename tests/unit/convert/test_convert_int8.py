"""Calibrated int8 vision files: written per runtime, gated on cosine with fp32, deleted when they fail."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

pytest.importorskip("onnxruntime.quantization")

from fastvlm.convert import int8  # noqa: E402


def test_min_cosine():
    a = [np.ones((1, 4, 8), np.float32), np.arange(8, dtype=np.float32)]
    assert int8.min_cosine(a, a) == pytest.approx(1.0)
    assert int8.min_cosine(a, [a[0], -a[1]]) == pytest.approx(-1.0)


def test_a_file_whose_embeddings_are_nan_on_any_image_fails_the_gate(tmp_path):
    """NaN compares false with everything: `cos < gate` let it through, and `min` skipped one that was not first."""
    a = [np.ones((1, 4, 8), np.float32), np.arange(8, dtype=np.float32)]
    broken = [a[0], np.full(8, np.nan, np.float32)]
    assert np.isnan(int8.min_cosine(a, broken))  # was 1.0
    dst = tmp_path / "vision-int8-ort.onnx"
    kept = int8._one("onnxruntime", lambda src, out, calib: out.write_bytes(b"int8"), tmp_path / "vision.onnx", dst,
                     None, [0, 1], a, lambda path: lambda pixels: broken[pixels])
    assert kept.path is None and not dst.exists()  # was kept, and reported as written


def test_an_int8_file_gets_its_name_only_after_passing_the_gate(tmp_path):
    """Quantized straight to its final name, a run stopped during the gate left an ungated file that
    `--vision int8` then used; and a file from an older graph stayed beside a new one that failed."""
    a = [np.ones((1, 4, 8), np.float32)]
    dst = tmp_path / "vision-int8-ort.onnx"
    dst.write_bytes(b"older")

    def stopped(path):
        assert not dst.exists() and path.exists()  # gated under another name
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        int8._one("onnxruntime", lambda src, out, calib: out.write_bytes(b"int8"), tmp_path / "vision.onnx", dst,
                  None, [0], a, stopped)
    assert list(tmp_path.iterdir()) == []
    kept = int8._one("onnxruntime", lambda src, out, calib: out.write_bytes(b"int8"), tmp_path / "vision.onnx", dst,
                     None, [0], a, lambda path: lambda pixels: a[pixels])
    assert kept.path == dst and dst.read_bytes() == b"int8" and list(tmp_path.iterdir()) == [dst]


def test_calibration_images_are_deterministic_and_varied():
    a, b = int8.calibration_images(6), int8.calibration_images(6)
    assert [im.tobytes() for im in a] == [im.tobytes() for im in b]
    assert len({im.size for im in a}) > 1


@pytest.fixture
def fp32(tiny_models, tmp_path):
    path = tmp_path / "vision.onnx"
    shutil.copy(tiny_models.vision, path)
    return path


def test_int8_files_are_kept_only_above_the_gate(fp32, tmp_path, monkeypatch):
    monkeypatch.setattr(int8, "COSINE_GATE", -1.0)  # everything passes
    lines = int8.write_int8(fp32, tmp_path, 128, threads=2)
    ort_file = tmp_path / "vision-int8-ort.onnx"
    assert ort_file.is_file() and any("onnxruntime" in line and str(ort_file) in line for line in lines)
    import onnx

    ops = {n.op_type for n in onnx.load(str(ort_file)).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops  # static QDQ, not ConvInteger
    assert "ConvInteger" not in ops

    monkeypatch.setattr(int8, "COSINE_GATE", 1.01)  # nothing passes
    lines = int8.write_int8(fp32, tmp_path, 128, threads=2)
    assert not ort_file.exists() and not (tmp_path / "vision-int8-ov.onnx").exists()
    assert all("not written" in line for line in lines)


def test_calibration_from_a_folder_takes_its_images_in_order_and_nothing_else(tmp_path):
    from PIL import Image

    for name, size in (("b.JPG", (30, 20)), ("a.png", (10, 10)), ("c.webp", (40, 40))):
        Image.new("RGB", size).save(tmp_path / name)
    (tmp_path / "notes.txt").write_text("not an image")
    assert [im.size for im in int8.calibration_images(folder=tmp_path)] == [(10, 10), (30, 20), (40, 40)]
    assert [im.size for im in int8.calibration_images(2, folder=tmp_path)] == [(10, 10), (30, 20)]
