"""The whole web app around an engine: the Blocks with their queue (`create_app`) and the server (`launch`).
`app.py` builds it from flags; the browser bench and the tests build it the same way."""

from __future__ import annotations

import hmac
import os
from contextlib import contextmanager

from fastvlm.api.settings import ApiSettings

from .blocks import build_app, launch_style
from .queue_share import QueueShare
from .settings import AppSettings

QUEUE_SIZE = 64  # people waiting beyond this get "queue full" instead of an endless wait
MAX_UPLOAD = "50mb"  # larger files are refused by the page before they are sent
PAGE_LOGIN_MESSAGE = "This FastVLM server is private: any user name, and its key (FASTVLM_API_KEY) as the password."


def create_app(engine, settings=None, speech=None, api=None):
    """The Blocks app around `engine` (anything with the `ui.Backend` methods), its queue configured.

    Answers run one at a time through the queue (people see their place in line); prepare, live frames and
    live ticks run beside it and never wait, because the engine answers them with `Busy` or not at all. One client
    may have `settings.max_waiting_per_client` events waiting (ui/queue_share.py).
    `speech` (from `load_speech`) adds the Voice + camera tab; `api` (`ApiSettings`): the proxies it believes."""
    settings, api = settings or AppSettings(), api or ApiSettings()
    demo = build_app(engine, settings, speech, api)
    demo.queue(default_concurrency_limit=1, max_size=QUEUE_SIZE)
    QueueShare(settings.max_waiting_per_client, api).install(demo)
    return demo


def page_login(key: str):
    """Gradio's `auth` check: any user name, `key` as the password (compared in constant time)."""
    return lambda _user, password: hmac.compare_digest(str(password).encode(), key.encode())


def launch(demo, host: str = "127.0.0.1", port: int = 7860, block: bool = True, routes=(), lifespan=None,
           page_key: str | None = None, root_path: str = ""):
    """Start the server; `block=False` returns at once (tests). `routes` (the API's, MCP's) are served beside
    the UI; `lifespan` (MCP's) runs while the server does. `page_key`: the page and all its Gradio endpoints
    need a login (any user name, this password). `root_path`: the path a reverse proxy serves the page under
    (it strips it before passing requests on), so the page's own links carry it. Returns Gradio's (app, local url,
    share url)."""
    routes = [*routes, *getattr(demo, "extra_routes", [])]  # the voice tab's line
    app_kwargs = {"routes": routes} | ({"lifespan": lifespan} if lifespan else {})
    auth = {"auth": page_login(page_key), "auth_message": PAGE_LOGIN_MESSAGE} if page_key else {}
    with _no_trusted_proxies():
        served = demo.launch(server_name=host, server_port=port, prevent_thread_lock=True,
                             max_file_size=MAX_UPLOAD, root_path=root_path, app_kwargs=app_kwargs,
                             head=getattr(demo, "page_head", None),
                             **launch_style(), **auth,
                             mcp_server=False)  # never Gradio's: it would make every callback a tool (fastvlm.mcp)
    _uncompressed_lines(demo)
    sweeper = getattr(demo, "cache_sweeper", None)
    if sweeper is not None:
        sweeper.start()  # ends by itself when the server is closed
    if block:
        demo.block_thread()
    return served


def _uncompressed_lines(demo) -> None:
    """WebSockets opened from now on (the voice line) are not deflated. Their audio is 16-bit PCM, which deflate
    shrinks only to ~86 % for ~75 ms of the event loop's CPU per 13 s of sound (measured on a 2-vCPU Xeon),
    time every other page's events and lines wait through. Gradio builds its uvicorn Config with the default
    (on); uvicorn reads it as each connection opens."""
    demo.server.config.ws_per_message_deflate = False


@contextmanager
def _no_trusted_proxies():
    """Gradio's uvicorn would replace a loopback peer's address with X-Forwarded-For's; the API judges forwarded
    headers itself (--trusted-proxies, --forwarded-header), so uvicorn trusts no proxy. Its Config reads
    FORWARDED_ALLOW_IPS while `demo.launch` builds it; the process's own value is put back after."""
    before = os.environ.get("FORWARDED_ALLOW_IPS")
    os.environ["FORWARDED_ALLOW_IPS"] = ""
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("FORWARDED_ALLOW_IPS", None)
        else:
            os.environ["FORWARDED_ALLOW_IPS"] = before
