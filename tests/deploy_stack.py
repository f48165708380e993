"""deploy/launch.py's stack for tests: nginx + N replicas of app.py on the tiny models, all on 127.0.0.1
(shared by tests/integration/test_serving_many.py and tests/browser/test_serving_many_page.py)."""

from __future__ import annotations

import base64
import io
import random
import re
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from tests.installed import skip_missing_ci

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "deploy"))
import launch  # noqa: E402 - deploy/ is a folder of scripts, not a package

KEY = "proxy-test-key"


def free_ports(n: int) -> int:
    """The first of `n` consecutive free loopback ports, below Linux's ephemeral range (32768-60999), so no
    client's own port is one a replica is about to listen on (a connect that meets itself)."""
    for _ in range(50):
        first = random.randint(20_000, 32_000)
        try:
            socks = [socket.create_server(("127.0.0.1", first + i)) for i in range(n)]
        except OSError:
            continue
        for s in socks:
            s.close()
        return first
    raise RuntimeError("no free loopback ports")


def require_nginx() -> None:
    """Skip without nginx (a failure under CI: .ci/run installs it)."""
    try:
        launch.nginx_binary()
    except FileNotFoundError as e:
        skip_missing_ci("nginx", str(e))


def png_url(seed: int = 0) -> str:
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(seed).integers(0, 256, (48, 64, 3), dtype=np.uint8)).save(buf, "PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def chat(question: str = "What is in the image?", seed: int = 0) -> list[dict]:
    return [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": png_url(seed)}},
                                         {"type": "text", "text": question}]}]


@dataclass
class Served:
    url: str  # nginx's
    stack: launch.Stack

    @property
    def ports(self) -> list[int]:
        return self.stack.config.ports

    def access_log(self) -> list[str]:
        return (self.stack.run_dir / "access.log").read_text().splitlines()

    def upstreams(self, lines: list[str]) -> list[str]:
        """The replica addresses nginx tried for each line ("127.0.0.1:P", ...)."""
        return [m.group(1) for line in lines if (m := re.search(r"upstream=(\S+(?:, \S+)*)", line))]


@contextmanager
def running(tiny_models, run_dir: Path, replicas: int = 2, key: str | None = KEY, app_args: tuple[str, ...] = (),
            conf_edit: Callable[[str], str] | None = None, voice: bool = False) -> Iterator[Served]:
    """The stack on the tiny models, ready (every replica's model loaded); stopped afterwards. `voice`: the
    replicas load the speech models (the Voice + camera tab)."""
    require_nginx()
    first = free_ports(replicas + 1)
    config = launch.StackConfig(
        replicas=replicas, listen=f"127.0.0.1:{first}", first_port=first + 1, run_dir=run_dir, threads=1,
        app_args=("--vision", str(tiny_models.vision), "--llm", str(tiny_models.llm), "--resolution", "128",
                  "--n-ctx", "1024", *(() if voice else ("--no-voice",)), "--no-download", *app_args))
    stack = launch.Stack(config, env={"FASTVLM_API_KEY": key} if key else {})
    try:
        stack.start(conf_edit).wait_ready(timeout=120)
        yield Served(f"http://127.0.0.1:{first}", stack)
    finally:
        stack.stop()
