"""Images in, model input out: any source -> RGB `PIL.Image` -> (1, 3, S, S) float32 pixels in [0, 1].

FastVLM's reference pipeline: LLaVA's `expand2square` (centred on black, the image mean of FastVLM's
processor), then the CLIP image processor without normalisation (BICUBIC to S x S, x/255). Never crops.
Decisions: transparency is composited onto white, as transformers' processor (the reference) and a browser
show it (FastVLM's `predict.py` drops alpha, so black text on a transparent background became all black).
16-bit, 32-bit integer and float grey images are scaled to 8 bits, not clipped. Arrays must be uint8 HxW,
HxWx1, HxWx3 or HxWx4, or float in [0, 1] (x255, rounded). Animated
images give their first frame; EXIF orientation is applied.
"""

from __future__ import annotations

import base64
import hashlib
import io
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import BinaryIO, Union

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from fastvlm.engine.config import TRAINED_RESOLUTION, check_resolution
from fastvlm.engine.events import InputError
from fastvlm.engine.resample import pad_resize, pad_to_square  # noqa: F401 - pad_to_square: part of this module's API

log = logging.getLogger(__name__)

ImageSource = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, BinaryIO, Image.Image, np.ndarray]
DEFAULT_MAX_PIXELS = 64_000_000
# Padded to a square, a longer strip keeps under 1/20 of the side for its content (51 px of 1024): the model
# cannot read it, and the cost would grow with the long side. Longer strips are refused; crop or split them.
DEFAULT_MAX_ASPECT = 20.0
FORMATS_HINT = "send a PNG, JPEG, WebP, GIF, BMP, TIFF or AVIF image"
# What an encoded image may be (JPEG includes a phone's MPO). Never the rest of what PIL opens: EPS and PS hand
# the file to Ghostscript, with no time limit, whatever the file's name says.
FORMATS = ("PNG", "JPEG", "WEBP", "GIF", "BMP", "TIFF", "AVIF")
# uint8 -> float32 exactly as transformers' `rescale`: float64 multiply by 1/255, then cast to float32.
_RESCALE = (np.arange(256, dtype=np.float64) * (1 / 255)).astype(np.float32)


def load_image(source: ImageSource, max_pixels: int = DEFAULT_MAX_PIXELS,
               max_aspect: float = DEFAULT_MAX_ASPECT) -> Image.Image:
    """Decode `source` to a new RGB image, or raise `InputError` saying what is wrong and what to do.

    `source`: a file path, encoded bytes, a binary file object, a PIL image (seeked to frame 0 if animated)
    or a numpy array. Images above `max_pixels`, or longer than `max_aspect` times their width (or wider),
    are refused from their header, before pixels are decoded.
    """
    limits = (max_pixels, max_aspect)
    if isinstance(source, np.ndarray):
        return _to_rgb(_from_array(source, *limits))
    if isinstance(source, Image.Image):
        with _decoding("the image"):
            return _to_rgb(_decode(source, "the image", *limits))
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        what = f"image file {os.path.basename(path)!r}"  # the name only: upload paths are long temp folders
        if not os.path.exists(path):
            raise InputError(f"no file at {path!r}: check the path")
        if os.path.isdir(path):
            raise InputError(f"{path!r} is a directory: pass an image file inside it")
        if os.path.getsize(path) == 0:
            raise InputError(f"{what} is empty (0 bytes): the upload or copy failed; send the image again")
        fp: str | io.BytesIO = path
    else:
        data = _read_bytes(source)
        what = "the image data"
        if not data:
            raise InputError(f"{what} is empty (0 bytes): the upload failed; send the image again")
        fp = io.BytesIO(data)
    Image.init()  # every plugin registered (once): with `formats`, PIL would open only the few it preloads
    with _decoding(what), Image.open(fp, formats=FORMATS) as im:
        return _to_rgb(_decode(im, what, *limits))


def data_url_bytes(url: str) -> bytes:
    """The bytes of a base64 `data:` URL: all after its first comma, strict base64 (no whitespace), possibly
    empty. Its media type is not checked (callers do). A ValueError saying what is wrong."""
    if url[:5].lower() != "data:":  # a URL's scheme is case-insensitive (RFC 3986)
        raise ValueError(f"{url[:16]!r} is not a data URL: it must start with 'data:'")
    try:
        return base64.b64decode(url.partition(",")[2], validate=True)
    except ValueError as e:  # binascii.Error, or a character outside ASCII
        raise ValueError("the data URL's data is not base64") from e


@contextmanager
def _decoding(what: str) -> Iterator[None]:
    """Turn PIL's many exception types for unusable input into `InputError`s that say what to do."""
    try:
        yield
    except InputError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise InputError(f"{what} is too large to decode safely ({e}): downscale it and send it again") from e
    except UnidentifiedImageError as e:
        raise InputError(f"{what} is not an image PIL can read: {FORMATS_HINT}") from e
    except PermissionError as e:
        raise InputError(f"cannot read {what} ({e}): check the file's permissions") from e
    except Exception as e:  # OSError, SyntaxError, ValueError, EOFError...: all mean a damaged input
        raise InputError(f"{what} is damaged or truncated ({e}): re-export or re-upload it; {FORMATS_HINT}") from e


def _read_bytes(source: object) -> bytes:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    if hasattr(source, "read"):
        data = source.read()  # type: ignore[attr-defined]
        if not isinstance(data, bytes):
            raise InputError("the image file object is open in text mode: open it in binary mode ('rb')")
        return data
    raise InputError(
        f"cannot read an image from a {type(source).__name__}: pass a path, bytes, a binary file, "
        "a PIL image or a uint8 numpy array"
    )


def _check_size(width: int, height: int, what: str, max_pixels: int, max_aspect: float) -> None:
    if width < 1 or height < 1:
        raise InputError(f"{what} is {width}x{height} pixels: it must be at least 1x1")
    if width * height > max_pixels:
        raise InputError(
            f"{what} is {width}x{height} = {width * height:,} pixels, above the limit of {max_pixels:,} "
            "(a guard against decompression bombs): downscale it and send it again"
        )
    if max(width, height) > max_aspect * min(width, height):
        raise InputError(
            f"{what} is {width}x{height} pixels, more than {max_aspect:g} times longer than it is wide: padded to "
            "a square the model would see a thin strip; crop it or split it into parts and ask about each"
        )


def _decode(im: Image.Image, what: str, max_pixels: int, max_aspect: float) -> Image.Image:
    """Size check from the header, then frame 0, pixels and EXIF orientation; returns a new image."""
    _check_size(*im.size, what, max_pixels, max_aspect)
    if im.tell() != 0:  # not `n_frames` first: that reads every frame of an animation
        im.seek(0)
    im.load()
    return ImageOps.exif_transpose(im)  # a copy, even when there is no orientation tag


def _from_array(a: np.ndarray, max_pixels: int, max_aspect: float) -> Image.Image:
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[..., 0]
    if not (a.ndim == 2 or (a.ndim == 3 and a.shape[2] in (3, 4))):
        raise InputError(f"an image array must be HxW, HxWx3 (RGB) or HxWx4 (RGBA), got shape {a.shape}")
    _check_size(a.shape[1], a.shape[0], "the image array", max_pixels, max_aspect)
    if np.issubdtype(a.dtype, np.floating):
        if not np.isfinite(a).all() or a.min() < 0 or a.max() > 1:
            raise InputError("a float image array must hold values in [0, 1]: for 0..255 data pass uint8")
        a = np.rint(a.astype(np.float64) * 255).astype(np.uint8)
    elif a.dtype != np.uint8:
        raise InputError(f"an image array must be uint8 (or float in [0, 1]), got {a.dtype}: convert it to uint8")
    return Image.fromarray(np.ascontiguousarray(a))  # mode L, RGB or RGBA from the shape


def _grey_to_uint8(image: Image.Image) -> np.ndarray:
    """I;16* is 16-bit. I and F by range: F in [0, 1] x255; <= 255 as is; <= 65535 as 16-bit; else max -> 255."""
    a = np.nan_to_num(np.asarray(image, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0).clip(min=0)
    top = float(a.max(initial=0.0))
    if image.mode.startswith("I;16") or 255 < top <= 65535:
        scale = 255 / 65535
    elif image.mode == "F" and top <= 1:
        scale = 255.0
    elif top <= 255:
        scale = 1.0
    else:
        scale = 255 / top
    return np.rint(a * scale).clip(0, 255).astype(np.uint8)


def _to_rgb(image: Image.Image) -> Image.Image:
    mode = image.mode
    if mode == "RGB":
        return image
    if mode.startswith("I;16") or mode in ("I", "F"):
        log.debug("scaling a %s image to 8 bits", mode)
        return Image.fromarray(_grey_to_uint8(image)).convert("RGB")
    try:
        if "A" in image.getbands() or "transparency" in image.info:  # alpha, or a transparent colour or index
            white = Image.new("RGBA", image.size, (255, 255, 255, 255))
            return Image.alpha_composite(white, image.convert("RGBA")).convert("RGB")
        return image.convert("RGB")
    except ValueError as e:
        raise InputError(f"images in PIL mode {mode!r} are not supported: convert the image to RGB first") from e


def to_pixels(image: Image.Image, size: int) -> np.ndarray:
    """Pad to a square, BICUBIC-resize to `size`, scale to [0, 1]: float32 (1, 3, size, size), never cropped.

    The square is not built when it is large (`resample.pad_resize`): the cost is bounded by the image and
    the output, with the same pixels.
    """
    try:
        check_resolution(size)
    except ValueError as e:
        raise InputError(str(e)) from e
    resized = pad_resize(_to_rgb(image), size)  # (S, S, 3) uint8
    return np.ascontiguousarray(_RESCALE[resized.transpose(2, 0, 1)][None])  # (1, 3, S, S) float32


def image_key(image: Image.Image) -> str:
    """Content hash of mode, size and pixels: equal images give equal keys (embedding-cache key)."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{image.mode}:{image.width}x{image.height}:".encode())
    digest.update(image.tobytes())
    return digest.hexdigest()


@dataclass(frozen=True)
class Preprocessor:
    """Loads requests' images and turns them into vision-encoder input."""

    size: int = TRAINED_RESOLUTION  # default resolution S; calls may override
    max_pixels: int = DEFAULT_MAX_PIXELS  # larger images are refused before decoding
    max_aspect: float = DEFAULT_MAX_ASPECT  # longer strips (long side / short side) are refused before decoding

    def __post_init__(self) -> None:
        check_resolution(self.size)

    def load(self, source: ImageSource) -> Image.Image:
        return load_image(source, self.max_pixels, self.max_aspect)

    def __call__(self, source: ImageSource, size: int | None = None) -> np.ndarray:
        return to_pixels(self.load(source), size or self.size)


def same_source(a, b) -> bool:
    """The very image (an array from the camera) or the same file (a path from an upload)."""
    return a is b or (isinstance(a, (str, bytes)) and type(a) is type(b) and a == b)
