"""Pad to a black square and BICUBIC-resize to S x S at a cost bounded by the input and the output.

Padding first and resizing after (what `expand2square` + the CLIP processor do) allocates the whole
square: a 60000 x 1000 strip becomes a 60000 x 60000 (10.8 GB) image before it shrinks to 1024 x 1024.
This module gives the same pixels, bit for bit, without building the square.

Pillow resizes in two separable passes, horizontal then vertical, each a fixed-point convolution
(22 fraction bits, rounded, clipped to 8 bits between the passes). Black padding contributes zero to
every sum, so a pass along the padded axis only needs the content; its weights still depend on the
square's size, which is what `_weights` computes the way Pillow does. The pass along the other axis
runs in Pillow on the content alone. Cost: the decoded input plus O(S x long side), never the square.
"""

from __future__ import annotations

import math

import numpy as np
from PIL import Image

PRECISION_BITS = 22  # Pillow's 8-bit resampling: 32 - 8 - 2
SUPPORT = 2.0  # the bicubic kernel's half-width, in source pixels at scale 1
_BLOCK = 256  # lines of the unpadded axis summed at once


def _bicubic(x: np.ndarray) -> np.ndarray:
    """The a = -0.5 bicubic kernel, term for term in Pillow's order (the rounding must match)."""
    a = -0.5
    x = np.abs(x)
    inner = ((a + 2.0) * x - (a + 3.0)) * x * x + 1
    outer = (((x - 5) * x + 8) * x - 4) * a
    return np.where(x < 1.0, inner, np.where(x < 2.0, outer, 0.0))


def _weights(in_size: int, out_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per output pixel: first source index (out,), tap count (out,), fixed-point weights (out, ksize) int64."""
    scale = in_size / out_size
    filterscale = max(scale, 1.0)
    support = SUPPORT * filterscale
    ksize = int(math.ceil(support)) * 2 + 1
    center = (np.arange(out_size) + 0.5) * scale  # (out,)
    first = np.maximum(np.trunc(center - support + 0.5), 0).astype(np.int64)
    count = np.minimum(np.trunc(center + support + 0.5), in_size).astype(np.int64) - first
    taps = np.arange(ksize)
    used = taps[None, :] < count[:, None]  # (out, ksize)
    w = np.where(used, _bicubic(((taps[None, :] + first[:, None]) - center[:, None] + 0.5) * (1.0 / filterscale)), 0.0)
    total = np.cumsum(w, axis=1)[:, -1]  # a running sum: the order of additions of Pillow's loop
    w = np.where(total[:, None] != 0.0, w / np.where(total == 0.0, 1.0, total)[:, None], w)
    fixed = w * (1 << PRECISION_BITS)
    fixed = np.trunc(np.where(w < 0, fixed - 0.5, fixed + 0.5)).astype(np.int64)
    return first, count, fixed


def _padded_pass(content: np.ndarray, axis: int, side: int, offset: int, size: int) -> np.ndarray:
    """Resample `content` (uint8, H x W x C) along `axis` as if it sat at `offset` in `side` black pixels.

    Only output pixels whose taps reach the content are computed; the rest are black, as in Pillow.
    """
    x = np.ascontiguousarray(np.moveaxis(content, axis, 0))  # (n, other, C): gathers copy whole rows
    n = x.shape[0]
    first, count, fixed = _weights(side, size)
    out = np.zeros((size, *x.shape[1:]), np.uint8)
    reach = np.flatnonzero((first < offset + n) & (first + count > offset))
    if reach.size == 0:
        return np.moveaxis(out, 0, axis)
    lo, hi = int(reach[0]), int(reach[-1]) + 1
    src = first[lo:hi, None] + np.arange(fixed.shape[1])[None, :] - offset  # (outputs, ksize) content indices
    k = np.where((np.arange(fixed.shape[1]) < count[lo:hi, None]) & (src >= 0) & (src < n), fixed[lo:hi], 0)
    taps = [t for t in range(k.shape[1]) if k[:, t].any()]
    src, k = np.clip(src, 0, n - 1), k.astype(np.int32)
    for b in range(0, x.shape[1], _BLOCK):  # blocks of the other axis bound the memory
        block = x[:, b:b + _BLOCK]
        acc = np.full((hi - lo, *block.shape[1:]), 1 << (PRECISION_BITS - 1), np.int32)
        for t in taps:
            acc += k[:, t, None, None] * block[src[:, t]]
        out[lo:hi, b:b + _BLOCK] = np.clip(acc >> PRECISION_BITS, 0, 255)
    return np.moveaxis(out, 0, axis)


def pad_to_square(image: Image.Image) -> Image.Image:
    """Centre `image` on a black square (LLaVA's `expand2square`); a square image is returned as is."""
    width, height = image.size
    if width == height:
        return image
    side = max(width, height)
    square = Image.new(image.mode, (side, side), 0)
    square.paste(image, ((side - width) // 2, (side - height) // 2))
    return square


def pad_resize(image: Image.Image, size: int, pad_limit: int = 4096) -> np.ndarray:
    """`image` (RGB) centred on a black square, BICUBIC-resized to (size, size, 3) uint8, never cropped.

    Squares of at most `pad_limit` pixels a side are padded and resized by Pillow itself; larger ones
    are resampled from the content alone, with identical pixels.
    """
    width, height = image.size
    side = max(width, height)
    if width == height or side <= pad_limit:
        return np.asarray(pad_to_square(image).resize((size, size), Image.Resampling.BICUBIC))
    if width > height:  # black rows above and below: Pillow's horizontal pass on the content, then ours
        rows = np.asarray(image.resize((size, height), Image.Resampling.BICUBIC))  # (h, S, 3)
        return _padded_pass(rows, 0, side, (side - height) // 2, size)
    columns = _padded_pass(np.asarray(image), 1, side, (side - width) // 2, size)  # (h, S, 3)
    return np.asarray(Image.fromarray(columns).resize((size, size), Image.Resampling.BICUBIC))
