"""One visitor's share of the page's queue (ui/queue_share.py): a client with `max_waiting_per_client` events
waiting is refused its next, as a full queue refuses, while others still get in; against the installed Gradio
through gradio_client, and the counting itself with fakes."""

from __future__ import annotations

import asyncio
import socket
import threading
from types import SimpleNamespace

import pytest
from PIL import Image

from fastvlm.api.settings import ApiSettings
from fastvlm.engine import Engine, EngineConfig
from tests.fakes import FakeLM, FakeVision
from tests.unit.api.test_gate_per_client import _connection
from ui import AppSettings, create_app, launch
from ui.queue_share import QueueShare

pytest.importorskip("gradio_client")

A, B, PROXY = "203.0.113.7", "198.51.100.9", "10.0.0.2"


class HeldLM(FakeLM):
    """Each answer waits for `release` before its first token, so the queue behind it stays full."""

    def __init__(self):
        super().__init__(b"ok")
        self.release = threading.Event()

    def generate(self, options, seed=0):
        self.generating.set()
        self.release.wait(30)
        yield from super().generate(options, seed)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def held_app(tmp_path):
    lm = HeldLM()
    engine = Engine(FakeVision(), lm, EngineConfig(vision_path="v.onnx", llm_path="m.gguf", resolution=128,
                                                   threads=1))
    demo = create_app(engine, AppSettings(max_waiting_per_client=2), api=ApiSettings(trusted_proxies=("127.0.0.1",)))
    _, url, _ = launch(demo, "127.0.0.1", free_port(), block=False)
    photo = tmp_path / "photo.png"
    Image.new("RGB", (64, 48), (200, 40, 40)).save(photo)
    yield url, lm, str(photo)
    lm.release.set()
    demo.close()
    engine.close()


def test_a_client_past_its_share_of_the_queue_is_refused_while_others_get_in(held_app):
    from gradio_client import Client, handle_file

    url, lm, photo = held_app

    def ask(address: str):  # a new visitor (its own session) from `address`, as a proxy on this machine says
        client = Client(url, verbose=False, headers={"X-Forwarded-For": address})
        return client.submit(handle_file(photo), "What is it?", 128, 16, api_name="/ask_image")

    first = ask(A)
    assert lm.generating.wait(10)  # A's first answer runs (held)
    waiting = [ask(A), ask(A)]  # A's share: 2 waiting
    refused = ask(A)
    with pytest.raises(Exception, match="(?i)queue is full"):  # gradio_client's words for a 503 at join
        refused.result(timeout=10)
    other = ask(B)  # another visitor still gets a place
    lm.release.set()
    for job in (first, *waiting, other):
        chat, _, _ = job.result(timeout=30)
        assert chat[-1]["role"] == "assistant", chat
    again = ask(A)  # A's places are free again
    assert again.result(timeout=30)[0][-1]["role"] == "assistant"


def _queue(*clients: str):
    """A stand-in for Gradio's Queue: events of `clients` waiting (two concurrency ids), and a push that records."""
    pushed = []

    async def push(body, request, username):
        pushed.append(request)
        return True, "event-id", "success"

    events = [SimpleNamespace(request=_connection(PROXY, c)) for c in clients]
    ids = {"engine": SimpleNamespace(queue=events[::2]), "prepare": SimpleNamespace(queue=events[1::2])}
    return SimpleNamespace(event_queue_per_concurrency_id=ids, push=push), pushed


@pytest.mark.parametrize(("most", "waiting", "comer", "admitted"), [
    (2, (A, B, A), A, False),  # A has 2 waiting (across concurrency ids)
    (2, (A, B, A), B, True),
    (3, (A, B, A), A, True),
    (2, (A, A), "127.0.0.1", True),  # this machine's clients are not counted
    (0, (A, A, A), A, True),  # 0: no limit
])
def test_whom_the_share_admits(most, waiting, comer, admitted):
    queue, pushed = _queue(*waiting)
    QueueShare(most, ApiSettings(trusted_proxies=(PROXY,))).install(SimpleNamespace(_queue=queue))
    ok, message, state = asyncio.run(queue.push(body=None, request=_connection(PROXY, comer), username=None))
    assert (ok, bool(pushed)) == (admitted, admitted)
    if not admitted:
        assert state == "queue_full" and "You already have 2 requests waiting" in message


def test_a_negative_share_is_refused():
    with pytest.raises(ValueError, match="max_waiting_per_client must be 0"):
        AppSettings(max_waiting_per_client=-1)
    with pytest.raises(ValueError, match=">= 0"):
        QueueShare(-1, ApiSettings())
