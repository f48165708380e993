"""fastvlm.engine.preprocess: loading every kind of input, padding, pixels, cache keys, and parity with transformers."""

from __future__ import annotations

import io
import struct
import zlib
from functools import cache

import numpy as np
import pytest
from PIL import Image

from fastvlm.engine.events import InputError
from fastvlm.engine.preprocess import (
    Preprocessor,
    data_url_bytes,
    image_key,
    load_image,
    pad_to_square,
    same_source,
    to_pixels,
)


def noise(width: int, height: int, seed: int = 0, mode: str = "RGB") -> Image.Image:
    channels = len(Image.new(mode, (1, 1)).getbands())
    shape = (height, width, channels) if channels > 1 else (height, width)
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8))


def encode(image: Image.Image, fmt: str, **kwargs) -> bytes:
    buf = io.BytesIO()
    image.save(buf, fmt, **kwargs)
    return buf.getvalue()


# --- parity with transformers' CLIP image processor (PIL backend) ---------------------------------


@cache
def reference(size: int):
    transformers = pytest.importorskip("transformers")
    return transformers.CLIPImageProcessorPil(
        size={"shortest_edge": size},
        crop_size={"height": size, "width": size},
        do_center_crop=True,
        do_normalize=False,
        do_rescale=True,
        rescale_factor=1 / 255,
        resample=Image.Resampling.BICUBIC,
        do_convert_rgb=True,
    )


def reference_pixels(image: Image.Image, size: int) -> np.ndarray:
    return reference(size)(image, return_tensors="np")["pixel_values"]


@pytest.mark.parametrize(
    "side, size", [(37, 64), (64, 64), (300, 64), (100, 128), (128, 128), (333, 512), (700, 1024)]
)
def test_square_images_match_transformers_bit_for_bit(side, size):
    image = noise(side, side, seed=side)
    ours, theirs = to_pixels(image, size), reference_pixels(image, size)
    assert theirs.dtype == ours.dtype == np.float32 and theirs.shape == ours.shape == (1, 3, size, size)
    assert np.array_equal(ours, theirs)


@pytest.mark.parametrize("width, height, size", [(100, 37, 64), (37, 100, 64), (513, 200, 128), (90, 301, 512)])
def test_non_square_images_match_transformers_on_the_padded_image(width, height, size):
    image = noise(width, height, seed=width)
    ours = to_pixels(image, size)
    assert np.array_equal(ours, reference_pixels(pad_to_square(image), size))
    # and the reference alone would crop: the padding step is what keeps the whole image
    assert not np.array_equal(ours, reference_pixels(image, size))


@pytest.mark.parametrize("mode", ["RGBA", "LA"])
def test_transparent_images_match_transformers(mode):
    """transformers' processor composites transparency onto white (its `convert_to_rgb`): so do we."""
    image = noise(64, 64, seed=5, mode=mode)  # alpha varies per pixel
    assert np.array_equal(to_pixels(load_image(image), 64), reference_pixels(image, 64))


# --- padding, cropping, output --------------------------------------------------------------------


@pytest.mark.parametrize("width, height", [(40, 10), (41, 10), (10, 40), (10, 41)])
def test_padding_is_black_and_centred(width, height):
    padded = np.asarray(pad_to_square(Image.new("RGB", (width, height), (255, 255, 255))))
    side = max(width, height)
    assert padded.shape == (side, side, 3)
    short = min(width, height)
    before = (side - short) // 2
    if width < height:
        padded = padded.transpose(1, 0, 2)  # now the bars are above and below
    assert (padded[before : before + short] == 255).all()
    assert before > 0 and (padded[:before] == 0).all() and (padded[before + short :] == 0).all()
    assert side - short - before == before + (side - short) % 2  # an odd pixel goes to the bottom/right


def test_square_image_is_not_padded():
    image = noise(16, 16)
    assert pad_to_square(image) is image


def test_never_crops_a_wide_image():
    image = Image.new("RGB", (256, 64))
    image.paste((255, 0, 0), (0, 0, 4, 64))  # far-left red strip
    image.paste((0, 255, 0), (252, 0, 256, 64))  # far-right green strip
    pixels = to_pixels(image, 64)
    assert pixels[0, 0, 32, 0] > 0.5 and pixels[0, 1, 32, 0] < 0.2
    assert pixels[0, 1, 32, -1] > 0.5 and pixels[0, 0, 32, -1] < 0.2
    assert pixels[0, :, :20].max() == 0 and pixels[0, :, 44:].max() == 0  # black bars above and below


def test_output_dtype_shape_and_range():
    image = Image.new("RGB", (30, 20), (255, 255, 255))
    image.putpixel((0, 10), (0, 0, 0))
    pixels = to_pixels(image, 128)
    assert pixels.dtype == np.float32 and pixels.shape == (1, 3, 128, 128) and pixels.flags.c_contiguous
    assert pixels.min() == 0.0 and pixels.max() == 1.0


def test_one_pixel_image_works():
    image = load_image(encode(Image.new("RGB", (1, 1), (255, 0, 0)), "PNG"))
    pixels = to_pixels(image, 64)
    assert pixels.shape == (1, 3, 64, 64)
    assert (pixels[0, 0] == 1).all() and (pixels[0, 1:] == 0).all()


@pytest.mark.parametrize("size", [0, 32, 100, -64])
def test_size_must_be_a_multiple_of_64(size):
    with pytest.raises(InputError, match="multiple of 64"):
        to_pixels(noise(8, 8), size)


# --- loading ------------------------------------------------------------------------------------


def test_data_url_bytes_decodes_strict_base64_and_says_what_is_wrong():
    assert data_url_bytes("data:image/png;base64,aGk=") == b"hi" and data_url_bytes("data:,") == b""
    for url, why in [("http://x/a.png", "not a data URL"), ("data:image/png;base64,a Gk=", "not base64")]:
        with pytest.raises(ValueError, match=why):
            data_url_bytes(url)


def test_path_bytes_file_and_pil_inputs_agree(tmp_path):
    image = noise(20, 13)
    data = encode(image, "PNG")
    (tmp_path / "a.png").write_bytes(data)
    loaded = [
        load_image(tmp_path / "a.png"),
        load_image(str(tmp_path / "a.png")),
        load_image(data),
        load_image(io.BytesIO(data)),
        load_image(image),
    ]
    for other in loaded:
        assert other.mode == "RGB" and np.array_equal(np.asarray(other), np.asarray(image))
    assert loaded[-1] is not image  # a new image, the caller's is untouched


def test_exif_orientation_is_applied():
    image = Image.new("RGB", (40, 20), (255, 0, 0))
    image.paste((0, 0, 255), (20, 0, 40, 20))  # left red, right blue
    exif = Image.Exif()
    exif[0x0112] = 6  # display rotated 90 degrees clockwise: left becomes top
    loaded = np.asarray(load_image(encode(image, "JPEG", exif=exif.tobytes(), quality=95))).astype(int)
    assert loaded.shape == (40, 20, 3)
    assert abs(loaded[5, 10] - (255, 0, 0)).max() < 40 and abs(loaded[35, 10] - (0, 0, 255)).max() < 40


def test_animated_gif_uses_the_first_frame():
    frames = [Image.new("RGB", (8, 8), colour) for colour in ((255, 0, 0), (0, 0, 255))]
    data = encode(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    assert np.array_equal(np.asarray(load_image(data))[0, 0], (255, 0, 0))
    with Image.open(io.BytesIO(data)) as gif:
        gif.seek(1)
        assert np.array_equal(np.asarray(load_image(gif))[0, 0], (255, 0, 0))


def test_a_gif_is_not_read_to_its_last_frame_to_use_its_first(monkeypatch):
    """`n_frames` reads every frame: 800 000 tiny frames (18 MB) took 2.4 s, inside the engine's lock."""
    from PIL import GifImagePlugin

    frames = [Image.new("RGB", (8, 8), colour) for colour in ((255, 0, 0), (0, 0, 255))]
    data = encode(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=100, loop=0)
    monkeypatch.setattr(GifImagePlugin.GifImageFile, "n_frames",
                        property(lambda self: pytest.fail("counted every frame")))
    assert np.array_equal(np.asarray(load_image(data))[0, 0], (255, 0, 0))


def test_postscript_is_refused_whatever_its_name_and_never_reaches_ghostscript(tmp_path, monkeypatch):
    """PIL opens EPS by handing it to Ghostscript, with no time limit: a PostScript loop held the engine."""
    from PIL import EpsImagePlugin

    monkeypatch.setattr(EpsImagePlugin, "Ghostscript", lambda *a, **k: pytest.fail("ran Ghostscript"))
    monkeypatch.setattr(EpsImagePlugin, "has_ghostscript", lambda: True)
    eps = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n{ } loop\n"
    (tmp_path / "photo.png").write_bytes(eps)
    for source in (eps, tmp_path / "photo.png"):
        with pytest.raises(InputError, match="not an image PIL can read"):
            load_image(source)


def _palette(mode: str) -> Image.Image:
    image = Image.new(mode, (4, 4))
    image.putpalette([10, 20, 30] * 256)
    return image


MODES = {  # mode -> (image, expected RGB of every pixel); transparency is composited onto white
    "RGBA": (Image.new("RGBA", (4, 4), (10, 20, 30, 255)), (10, 20, 30)),
    "clear RGBA": (Image.new("RGBA", (4, 4), (10, 20, 30, 0)), (255, 255, 255)),
    "LA": (Image.new("LA", (4, 4), (77, 255)), (77, 77, 77)),
    "clear LA": (Image.new("LA", (4, 4), (77, 0)), (255, 255, 255)),
    "clear PA": (_palette("PA"), (255, 255, 255)),
    "P": (_palette("P"), (10, 20, 30)),
    "L": (Image.new("L", (4, 4), 99), (99, 99, 99)),
    "I;16": (Image.new("I;16", (4, 4), 25700), (100, 100, 100)),  # 16-bit: /257, not stretched
    "I": (Image.new("I", (4, 4), 32896), (128, 128, 128)),  # above 255: read as 16-bit
    "F": (Image.new("F", (4, 4), 0.5), (128, 128, 128)),  # within [0, 1]: scaled by 255
    "CMYK": (Image.new("CMYK", (4, 4), (0, 255, 255, 0)), (255, 0, 0)),
    "1": (Image.new("1", (4, 4), 1), (255, 255, 255)),
    "YCbCr": (Image.new("YCbCr", (4, 4), (128, 128, 128)), (128, 128, 128)),
}


@pytest.mark.parametrize("mode", MODES)
def test_every_mode_converts_to_rgb(mode):
    image, rgb = MODES[mode]
    loaded = load_image(image)
    assert loaded.mode == "RGB" and loaded.size == image.size
    assert (np.asarray(loaded) == rgb).all()


def test_palette_transparency_converts_without_warnings(recwarn):
    image = _palette("P")
    image.info["transparency"] = bytes([0] * 256)
    assert (np.asarray(load_image(encode(image, "PNG"))) == (255, 255, 255)).all()  # index 0 is transparent
    assert not recwarn.list


def test_black_text_on_a_transparent_background_stays_readable():
    """A logo or diagram saved with black under its transparent areas: with alpha dropped the model saw one black
    square; composited onto white it sees what a browser shows."""
    logo = np.zeros((8, 8, 4), np.uint8)
    logo[3:5, :, 3] = 255  # an opaque black bar; elsewhere black, fully transparent
    grey = np.asarray(load_image(encode(Image.fromarray(logo), "PNG")))[..., 0]
    assert (grey[3:5] == 0).all() and (grey[:3] == 255).all() and (grey[5:] == 255).all()
    half = load_image(Image.new("RGBA", (2, 2), (0, 0, 0, 128)))
    assert (np.asarray(half) == 127).all()  # 255 * (1 - 128/255)


@pytest.mark.parametrize("mode", ["I;16", "I"])
def test_16_bit_images_keep_their_dynamic_range(mode):
    ramp = (np.arange(4096, dtype=np.uint32) * 16 + 15).reshape(64, 64)  # 15 .. 65535
    image = Image.fromarray(ramp.astype(np.uint16 if mode == "I;16" else np.int32))
    assert image.mode == mode
    for source in (image, encode(image, "PNG" if mode == "I;16" else "TIFF")):
        grey = np.asarray(load_image(source))[..., 0]
        assert grey.min() == 0 and grey.max() == 255 and len(np.unique(grey)) == 256
        assert grey.flat[2048] == round((2048 * 16 + 15) / 257)  # mid-grey stays mid-grey
        assert np.array_equal(grey, np.rint(ramp * (255 / 65535)).astype(np.uint8))  # every level, not only ends


def test_a_32_bit_grey_image_is_8_bit_up_to_255_and_16_bit_above():
    def grey(values):
        return np.asarray(load_image(Image.fromarray(np.array([values], dtype=np.int32))))[0, :, 0].tolist()

    assert grey([0, 128, 255]) == [0, 128, 255]
    assert grey([0, 128, 256]) == [0, 0, 1]  # 256 only fits 16 bits: 256 / 257 is level 1
    assert grey([0, 100_000, 140_000]) == [0, 182, 255]  # past 16 bits: the brightest is white


def test_a_float_image_in_the_unit_range_is_scaled_to_8_bits():
    image = Image.fromarray(np.array([[0.0, 0.5, 1.0, 0.6, np.nan, np.inf, -np.inf]], dtype=np.float32))
    assert image.mode == "F"
    assert np.asarray(load_image(image))[0, :, 0].tolist() == [0, 128, 255, 153, 0, 0, 0]  # not a number: black


def test_float_image_outside_unit_range_is_clipped_to_8_bit_levels():
    image = Image.fromarray(np.array([[0.0, 100.4, 255.0, -3.0]], dtype=np.float32))
    assert np.asarray(load_image(image))[0, :, 0].tolist() == [0, 100, 255, 0]
    image = Image.fromarray(np.array([[0.0, 1.5]], dtype=np.float32))  # past 1: levels as they are, not x255
    assert np.asarray(load_image(image))[0, :, 0].tolist() == [0, 2]


# --- numpy arrays (what Gradio's webcam gives) ----------------------------------------------------


def test_numpy_rgb_array_equals_the_pil_path():
    image = noise(48, 30)
    array = np.asarray(image)
    assert np.array_equal(np.asarray(load_image(array)), array)
    assert np.array_equal(to_pixels(load_image(array), 64), to_pixels(load_image(image), 64))


@pytest.mark.parametrize("mode", ["RGBA", "L"])
def test_numpy_rgba_and_grey_arrays_equal_the_pil_path(mode):
    image = noise(9, 7, mode=mode)
    assert np.array_equal(np.asarray(load_image(np.asarray(image))), np.asarray(load_image(image)))
    if mode == "L":
        assert np.array_equal(np.asarray(load_image(np.asarray(image)[..., None])), np.asarray(load_image(image)))


def test_float_array_in_unit_range_is_scaled_and_rounded():
    array = np.asarray(noise(5, 4))
    assert np.array_equal(np.asarray(load_image(array / 255.0)), array)
    assert np.array_equal(np.asarray(load_image((array / 255.0).astype(np.float32))), array)
    black_and_white = np.array([[[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]])  # the range's own ends are in it
    assert np.asarray(load_image(black_and_white)).tolist() == [[[0, 0, 0], [255, 255, 255]]]


@pytest.mark.parametrize(
    "array, message",
    [
        (np.zeros((4, 4, 3), np.int16), "uint8"),
        (np.zeros((4, 4, 3), np.uint16), "uint8"),
        (np.zeros((4, 4, 3), bool), "uint8"),
        (np.full((4, 4, 3), 2.0), r"\[0, 1\]"),
        (np.full((4, 4, 3), np.nan), r"\[0, 1\]"),
        (np.zeros((4, 4, 2), np.uint8), "HxWx3"),
        (np.zeros((2, 4, 4, 3), np.uint8), "HxWx3"),
        (np.zeros(12, np.uint8), "HxWx3"),
        (np.zeros((0, 5, 3), np.uint8), "at least 1x1"),
    ],
)
def test_bad_arrays_are_refused(array, message):
    with pytest.raises(InputError, match=message):
        load_image(array)


# --- bad input ------------------------------------------------------------------------------------


def png_header_only(width: int, height: int) -> bytes:
    """A PNG that claims to be width x height but holds almost no pixel data: only a header check refuses it."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit grey
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64))


def test_bad_inputs_raise_input_error_with_useful_messages(tmp_path):
    png, jpeg = encode(noise(64, 64), "PNG"), encode(noise(64, 64), "JPEG")
    (tmp_path / "empty.png").write_bytes(b"")
    (tmp_path / "notes.png").write_text("not an image, just some text\n" * 10)
    cases = [
        (b"", "empty"),
        (tmp_path / "empty.png", "empty"),
        (png[: len(png) // 2], "truncated"),
        (jpeg[: len(jpeg) // 2], "truncated"),
        (np.random.default_rng(1).bytes(500), "not an image"),
        (tmp_path / "notes.png", "not an image"),
        (tmp_path / "missing.png", "no file"),
        (tmp_path, "directory"),
        (io.StringIO("text"), "binary mode"),
        (12345, "cannot read an image from a int"),
        (Image.new("RGB", (0, 0)), "at least 1x1"),
    ]
    for source, message in cases:
        with pytest.raises(InputError, match=message) as info:
            load_image(source)
        assert ": " in str(info.value)  # what is wrong, then what to do


def test_images_above_max_pixels_are_refused_before_decoding():
    with pytest.raises(InputError, match="9000x9000 = 81,000,000 pixels, above the limit of 64,000,000"):
        load_image(png_header_only(9_000, 9_000))  # decoding would fail as truncated
    with pytest.raises(InputError, match="above the limit of 2,000"):
        load_image(encode(noise(50, 50), "PNG"), max_pixels=2000)
    assert load_image(encode(noise(40, 50), "PNG"), max_pixels=2000).size == (40, 50)


def test_pils_own_decompression_bomb_guard_becomes_input_error():
    with pytest.raises(InputError, match="too large to decode safely"):
        load_image(png_header_only(100_000, 100_000), max_pixels=10**12)


# --- cache keys and the Preprocessor --------------------------------------------------------------


def test_image_key_is_stable_and_tracks_content():
    image = noise(32, 24)
    key = image_key(image)
    assert key == image_key(image.copy()) == image_key(load_image(encode(image, "PNG")))
    changed = image.copy()
    changed.putpixel((31, 23), tuple(255 - v for v in image.getpixel((31, 23))))
    assert image_key(changed) != key
    assert image_key(Image.frombytes("RGB", (24, 32), image.tobytes())) != key  # same bytes, other size
    assert image_key(Image.frombytes("L", (96, 24), image.tobytes())) != image_key(
        Image.frombytes("L", (96, 24), image.tobytes()).convert("P")
    )


def test_preprocessor_is_load_then_to_pixels():
    data = encode(noise(70, 40), "PNG")
    prep = Preprocessor(size=128, max_pixels=10_000)
    assert np.array_equal(prep(data), to_pixels(load_image(data), 128))
    assert prep(data, size=64).shape == (1, 3, 64, 64)
    with pytest.raises(InputError, match="limit"):
        prep(encode(noise(200, 60), "PNG"))
    with pytest.raises(ValueError, match="multiple of 64"):
        Preprocessor(size=100)


def test_the_same_source_is_the_very_array_or_an_equal_path():
    frame = np.zeros((4, 4, 3), np.uint8)
    assert same_source(frame, frame) and not same_source(frame, frame.copy())  # a camera's frames: by identity
    assert same_source("/tmp/a.png", "".join(["/tmp/", "a.png"])) and not same_source("/tmp/a.png", "/tmp/b.png")
    assert not same_source("/tmp/a.png", b"/tmp/a.png") and same_source(b"x", b"x")
    assert not same_source(None, frame)
