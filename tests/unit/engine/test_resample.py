"""fastvlm.engine.resample: pad + resize without building the square, bit for bit Pillow's padded resize,
at a memory cost bounded by the image and the output (a 30000 x 1500 strip no longer needs 2.7 GB)."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from PIL import Image

from fastvlm.engine.events import InputError
from fastvlm.engine.preprocess import DEFAULT_MAX_ASPECT, load_image, pad_to_square, to_pixels
from fastvlm.engine.resample import pad_resize


def noise(width: int, height: int, seed: int) -> Image.Image:
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8))


def pillow_padded(image: Image.Image, size: int) -> np.ndarray:
    return np.asarray(pad_to_square(image).resize((size, size), Image.Resampling.BICUBIC))


@pytest.mark.parametrize("width, height, size", [
    (100, 37, 64), (37, 100, 64), (513, 200, 128), (90, 301, 512),  # downscale and upscale, odd offsets
    (3000, 40, 512), (40, 3000, 512), (1025, 1024, 1024), (1024, 1023, 1024),  # strips, one-pixel padding
    (2048, 100, 1024), (1, 500, 64), (500, 1, 64), (7, 3, 64), (1500, 5000, 1024), (5000, 1500, 512),
])
def test_content_only_resampling_equals_pillows_padded_resize(width, height, size):
    image = noise(width, height, seed=width * 7 + height)
    ours = pad_resize(image, size, pad_limit=0)  # never pads, whatever the size
    assert ours.shape == (size, size, 3) and ours.dtype == np.uint8
    assert np.array_equal(ours, pillow_padded(image, size))


def test_padding_stays_black_and_the_content_is_not_cropped():
    image = Image.new("RGB", (4000, 800), (255, 255, 255))
    out = pad_resize(image, 64, pad_limit=0)
    rows = out.max(axis=(1, 2))
    assert rows[:24].max() == 0 and rows[-24:].max() == 0  # 800/4000 of 64 rows is content, centred
    assert (out[30:34] == 255).all()  # every column of the middle rows is the white content


def png(width: int, height: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (90, 140, 200)).save(buf, "PNG")
    return buf.getvalue()


def test_a_long_strip_is_refused_from_its_header_with_what_to_do():
    data = png(60000, 1000)  # 60 MP, under the pixel guard, a few KB on disk
    assert len(data) < 200_000
    with pytest.raises(InputError, match=r"60000x1000 pixels, more than 20 times longer.*crop it or split it"):
        load_image(data)
    with pytest.raises(InputError, match="more than 20 times"):
        load_image(np.zeros((21, 1), np.uint8))
    assert load_image(np.zeros((20, 1), np.uint8)).size == (1, 20)  # 20:1 itself is fine
    assert load_image(png(100, 2), max_aspect=50).size == (100, 2)
    assert DEFAULT_MAX_ASPECT == 20


_BOUNDED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1500 << 20, 1500 << 20))
from PIL import Image
from fastvlm.engine.preprocess import to_pixels
for w, h in [(30000, 1500), (1500, 30000)]:  # 20:1, 45 MP; the padded square alone would be 2.7 GB
    image = Image.new("RGB", (w, h), (200, 100, 50))
    for size in (1024, 512):
        pixels = to_pixels(image, size)
        assert pixels.shape == (1, 3, size, size), pixels.shape
print("ok")
"""


def test_preprocessing_a_long_strip_fits_in_a_bounded_address_space():
    env = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_BOUNDED)], capture_output=True, text=True,
                          timeout=120, env=env, cwd=str(__import__("pathlib").Path(__file__).parents[3]))
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_to_pixels_of_a_strip_has_the_reference_pixels():
    image = noise(4500, 300, seed=3)  # a square of 4500 would take the content-only path
    expected = pillow_padded(image, 128).transpose(2, 0, 1)[None].astype(np.float32) / np.float32(255)
    assert np.allclose(to_pixels(image, 128), expected, atol=1e-7)
