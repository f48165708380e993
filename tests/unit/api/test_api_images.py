"""Image URLs to bytes, called directly (no API server): a remote image is fetched only when allowed, as one
GET that follows no redirect and reads at most `max_body_bytes`; every failure is the client's 400 (413 for too
large) with a code, never a 5xx; data URLs are checked part by part."""

from __future__ import annotations

import asyncio
import base64

import pytest
from fastapi import FastAPI, Response
from fastapi.responses import RedirectResponse

from fastvlm.api import ApiSettings, images
from fastvlm.api.errors import ApiError
from fastvlm.api.server import BackgroundServer

LIMIT = 1000
ALLOWED = ApiSettings(allow_remote_image_urls=True, max_body_bytes=LIMIT)


@pytest.fixture(scope="module")
def host():
    files = FastAPI()
    files.get("/exact.png")(lambda: Response(b"x" * LIMIT, media_type="image/png"))
    files.get("/over.png")(lambda: Response(b"x" * (LIMIT + 1), media_type="image/png"))
    files.get("/moved.png")(lambda: RedirectResponse("/exact.png", status_code=302))
    with BackgroundServer(files) as server:
        yield server


def fetched(url: str, settings: ApiSettings = ALLOWED) -> bytes:
    return asyncio.run(images.image_bytes(url, settings))


def refusal(url: str, settings: ApiSettings = ALLOWED) -> ApiError:
    with pytest.raises(ApiError) as caught:
        fetched(url, settings)
    return caught.value


def test_an_image_of_exactly_the_limit_is_fetched_and_one_byte_more_is_413(host):
    assert fetched(f"  {host.url}/exact.png ") == b"x" * LIMIT  # the URL as sent, spaces around it
    err = refusal(host.url + "/over.png")
    assert (err.status, err.code) == (413, "request_too_large") and "larger than 1,000 bytes" in err.message


@pytest.mark.parametrize("path, words", [("/moved.png", "gave HTTP 302"), ("/missing.png", "gave HTTP 404")])
def test_a_redirect_is_not_followed_and_no_answer_but_200_is_an_image(host, path, words):
    err = refusal(host.url + path)
    assert (err.status, err.code, err.param) == (400, "image_fetch_failed", "image_url") and words in err.message


def test_a_server_that_cannot_be_reached_is_the_clients_400():
    err = refusal("http://127.0.0.1:9/x.png")
    assert (err.status, err.code) == (400, "image_fetch_failed")
    assert "could not fetch the image URL (Connect" in err.message


def test_a_remote_url_is_refused_unless_allowed_and_other_schemes_always(host):
    err = refusal(host.url + "/exact.png", ApiSettings())
    assert (err.status, err.code) == (400, "remote_image_url_refused")
    for url in ("ftp://example.com/cat.png", "file:///etc/passwd", "cat.png"):
        err = refusal(url)
        assert (err.status, err.code) == (400, "invalid_image_url") and "unsupported image URL scheme" in err.message
    assert fetched("HTTP://" + host.url.removeprefix("http://") + "/exact.png") == b"x" * LIMIT  # any case


PNG = base64.b64encode(b"\x89PNG-ish").decode()


@pytest.mark.parametrize("url, words", [
    ("data:image/png;base64", "malformed"),
    (f"data:text/plain;base64,{PNG}", "holds text/plain, not an image"),
    (f"data:;base64,{PNG}", "holds no media type"),
    (f"data:image/png,{PNG}", "not base64-encoded"),
    ("data:image/png;base64,@@@", "invalid base64"),
    ("data:image/png;base64,", "is empty"),
])
def test_each_fault_of_a_data_url_is_named(url, words):
    err = refusal(url)
    assert (err.status, err.code) == (400, "invalid_image_url") and words in err.message


def test_a_data_url_may_be_line_wrapped_and_its_parameters_in_any_case():
    wrapped = f"DATA:Image/PNG;charset=x; BASE64,{PNG[:4]}\n{PNG[4:]}"
    assert fetched(wrapped) == b"\x89PNG-ish"
