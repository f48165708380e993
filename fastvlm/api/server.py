"""The API on its own (no Gradio): an app factory and a uvicorn server in a background thread."""

from __future__ import annotations

import logging
import socket
import threading
import time

from fastapi import FastAPI

from .routes import mount_api
from .settings import ApiSettings

log = logging.getLogger(__name__)


def create_app(engine, settings: ApiSettings, *, host: str | None, share: bool = False) -> FastAPI:
    """A FastAPI app serving only the API (headless servers, tests); checks the bind like `mount_api`."""
    app = FastAPI(title="FastVLM API", docs_url=None, redoc_url=None)
    return mount_api(app, engine, settings, host=host, share=share)


class BackgroundServer:
    """`app` served by uvicorn on `host:port` (0: a free port) from a daemon thread; `url` once started.

    with BackgroundServer(create_app(engine, settings, host="127.0.0.1")) as server:
        httpx.get(server.url + "/health")
    """

    def __init__(self, app, host: str = "127.0.0.1", port: int = 0, start_timeout_s: float = 10.0):
        import uvicorn

        self._socket = socket.create_server((host, port))
        self.host, self.port = host, self._socket.getsockname()[1]
        # proxy_headers off: the API judges forwarded headers itself (`security.client_host`); uvicorn would
        # otherwise replace the peer's address with X-Forwarded-For's whenever the peer is 127.0.0.1
        config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1, proxy_headers=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]},
                                         name=f"api-server-{self.port}", daemon=True)
        self._start_timeout_s = start_timeout_s

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + self._start_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the API server on {self.url} did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=5)
        self._socket.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
