"""What the page takes in, checked before Gradio or the engine decode it: an upload that cannot be read becomes
a message saying what to send, the webcams' frames are decoded as the engine decodes any image, a bounded number
at once, and push to talk decodes only a WAV of bounded length (their endpoints take any file from an API
caller)."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

import gradio as gr
import numpy as np

from fastvlm.engine.events import InputError
from fastvlm.engine.preprocess import DEFAULT_MAX_PIXELS, data_url_bytes, load_image
from fastvlm.speech.audio import wav_seconds

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


@dataclass(frozen=True)
class Refused:
    """What push to talk's component gives its handler instead of samples for a file it would not decode: `reason`,
    the sentence the person is shown."""

    reason: str


def bounded_recordings(audio: gr.Audio, max_s: float) -> gr.Audio:
    """Make push to talk's `audio` (wanted as samples) read a file's length from its WAV header before Gradio
    decodes it, and hand its handler `Refused` for one that is not a WAV (the page records WAV) or is longer than
    `max_s`: its endpoint takes any file from an API caller, and Gradio would decode all of a 50 MB one (hours of
    sound; with ffmpeg installed, any compressed format too)."""
    decode = audio.preprocess

    def preprocess(payload):
        path = getattr(payload, "path", None)
        if not path:
            return decode(payload)
        try:
            seconds = wav_seconds(path)
        except InputError as e:
            return Refused(f"Push to talk takes the page's own recordings (WAV), and this file is {e}.")
        except OSError as e:
            return Refused(f"The recording could not be read ({e.strerror or e}): record it again.")
        if seconds > max_s:
            return Refused(f"This recording is {seconds:.0f} s long; push to talk takes up to {max_s:.0f} s "
                           "(press stop sooner).")
        return decode(payload)

    audio.preprocess = preprocess
    return audio
