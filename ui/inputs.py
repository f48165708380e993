"""What the page takes in, checked before Gradio or the engine decode it: an upload that cannot be read becomes
a message saying what to send, and the webcams' frames are decoded as the engine decodes any image, a bounded
number at once (their endpoints take any file from an API caller)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import gradio as gr
import numpy as np

from fastvlm.engine.events import InputError
from fastvlm.engine.preprocess import DEFAULT_MAX_PIXELS, data_url_bytes, load_image

log = logging.getLogger(__name__)

UNREADABLE = "This file is not an image that can be read: send a PNG, JPEG, WebP, GIF, BMP, TIFF or AVIF image."
GONE = ("This image is no longer on the server (uploads left unused for a while are deleted): upload it again, "
        "then ask.")


def readable_uploads(image: gr.Image) -> gr.Image:
    """Make `image` turn an unreadable upload into a gr.Error saying what to send, instead of Gradio's bare
    "Error". (Wrapped on the instance: subclassing a Gradio component writes a .pyi stub beside this file.)"""
    decode = image.preprocess

    def preprocess(payload):
        try:
            return decode(payload)
        except gr.Error:
            raise
        except Exception as e:  # PIL's UnidentifiedImageError, DecompressionBombError, OSError, ...
            path = getattr(payload, "path", None)
            if isinstance(e, FileNotFoundError) or (path and not Path(path).exists()):  # the cache sweep took it
                raise gr.Error(GONE, title="Upload it again", print_exception=False) from e
            log.info("unreadable upload: %s", e)
            raise gr.Error(UNREADABLE, title="Cannot read this file", print_exception=False) from e

    image.preprocess = preprocess
    return image


def bounded_frames(image: gr.Image, decodes: threading.Semaphore,
                   max_pixels: int = DEFAULT_MAX_PIXELS) -> gr.Image:
    """Make `image` (a webcam's, wanted as an array) decode its file as the engine decodes any image
    (`preprocess.load_image`: only the formats it takes, the size limit checked from the header, transparency on
    white) instead of Gradio's decode: its endpoint takes any file from an API caller, and Gradio's decode made a
    0.5 MB PNG of 169 megapixels a 0.5 GB array, a GIF its palette indices, and handed an EPS to Ghostscript.
    A decode holds one of `decodes` (shared by the app's webcams: `AppSettings.max_frame_decodes`): Gradio runs up to
    40 at once, and a 0.2 MB PNG of 64 megapixels (the limit) takes ~0.6 GB while it is decoded."""

    def preprocess(payload):
        if payload is None:
            return None
        try:
            with decodes:
                return np.asarray(load_image(_frame_source(payload), max_pixels))
        except InputError as e:
            raise gr.Error(f"This frame cannot be used: {e}.", title="Cannot use this image",
                           print_exception=False) from e

    image.preprocess = preprocess
    return image


def _frame_source(payload) -> str | bytes:
    """A webcam payload's file, or the bytes of its data URL."""
    url = getattr(payload, "url", None) or ""
    if url.startswith("data:"):
        try:
            return data_url_bytes(url)
        except ValueError as e:
            raise InputError("the frame's data URL is not base64") from e
    path = getattr(payload, "path", None)
    if not path:
        raise InputError("no frame came with the request")
    return path
