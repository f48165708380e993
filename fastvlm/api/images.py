"""Image URLs of chat messages to encoded bytes: `data:` URLs always, `http(s)://` only when allowed."""

from __future__ import annotations

import re

import anyio
import httpx
from PIL import Image

from ..engine import preprocess
from .errors import ApiError
from .settings import ApiSettings

_DATA_URL = re.compile(r"data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?P<params>(?:;[^;,]*)*),(?P<data>.*)",
                       re.DOTALL | re.IGNORECASE)  # "DATA:" too: a scheme is case-insensitive
HINT = "send the image inline as a data URL: data:image/jpeg;base64,<base64 bytes>"


def decode_data_url(url: str, param: str = "image_url") -> bytes:
    """The bytes of a base64 `data:image/...` URL, or a 400 saying what is wrong with it."""
    m = _DATA_URL.fullmatch(url.strip())
    if not m:
        raise ApiError(400, f"the image data URL is malformed: {HINT}", param=param, code="invalid_image_url")
    mime = (m["mime"] or "").lower()
    if not mime.startswith("image/"):
        raise ApiError(400, f"the data URL holds {mime or 'no media type'}, not an image: {HINT}",
                       param=param, code="invalid_image_url")
    if "base64" not in (p.strip().lower() for p in m["params"].split(";")):
        raise ApiError(400, f"the image data URL is not base64-encoded: {HINT}", param=param,
                       code="invalid_image_url")
    try:
        data = preprocess.data_url_bytes("".join(url.split()))  # line-wrapped base64 too
    except ValueError:
        raise ApiError(400, f"the image data URL has invalid base64: {HINT}", param=param,
                       code="invalid_image_url") from None
    if not data:
        raise ApiError(400, f"the image data URL is empty: {HINT}", param=param, code="invalid_image_url")
    return data


async def fetch(url: str, settings: ApiSettings, param: str = "image_url") -> bytes:
    """Download an http(s) image (no redirects, at most `max_body_bytes`, `remote_image_timeout_s` in all)."""
    limit, timeout = settings.max_body_bytes, settings.remote_image_timeout_s
    try:
        with anyio.fail_after(timeout):  # httpx's timeout is per read: a trickle of bytes would never end
            return await _download(url, limit, timeout, param)
    except TimeoutError:
        raise ApiError(400, f"fetching the image URL took longer than {timeout:g} s: {HINT}", param=param,
                       code="image_fetch_failed") from None


async def _download(url: str, limit: int, timeout: float, param: str) -> bytes:
    try:
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as client, \
                client.stream("GET", url) as resp:
            if resp.status_code != 200:
                raise ApiError(400, f"fetching the image URL gave HTTP {resp.status_code}", param=param,
                               code="image_fetch_failed")
            data = bytearray()
            async for chunk in resp.aiter_bytes():
                data += chunk
                if len(data) > limit:
                    raise ApiError(413, f"the image at the URL is larger than {limit:,} bytes", param=param,
                                   code="request_too_large")
            return bytes(data)
    except httpx.HTTPError as e:
        raise ApiError(400, f"could not fetch the image URL ({type(e).__name__}): {HINT}", param=param,
                       code="image_fetch_failed") from None


async def image_bytes(url: str, settings: ApiSettings, param: str = "image_url") -> bytes:
    scheme = url.strip()[:8].lower()
    if scheme.startswith("data:"):
        return decode_data_url(url, param)
    if scheme.startswith(("http://", "https://")):
        if not settings.allow_remote_image_urls:
            raise ApiError(400, f"this server does not fetch remote image URLs: {HINT}", param=param,
                           code="remote_image_url_refused")
        return await fetch(url.strip(), settings, param)
    raise ApiError(400, f"unsupported image URL scheme: {HINT}", param=param, code="invalid_image_url")


def max_pixels(engine) -> int:
    """The engine's image size limit (a `RemoteEngine` has no config: its server checks again)."""
    config = getattr(engine, "config", None)
    return getattr(config, "max_image_pixels", preprocess.DEFAULT_MAX_PIXELS)


async def decode_image(url: str, settings: ApiSettings, max_pixels: int, param: str = "image_url",
                       limiter: anyio.CapacityLimiter | None = None) -> Image.Image:
    """The image of a data (or allowed http) URL, decoded off the event loop (in one of `limiter`'s threads);
    a 400 saying what is wrong."""
    data = await image_bytes(url, settings, param)
    return await anyio.to_thread.run_sync(preprocess.load_image, data, max_pixels, limiter=limiter)
