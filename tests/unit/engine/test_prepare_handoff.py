"""The hand-over between two prepares: a newer prepare waiting for the running one to give way must take the engine
however long the running one's last steps (or a prepare's first) take, and never mistake them for an answer holding
the engine."""

import threading
import time

from fastvlm.engine.flight import QUEUE_POLL_S
from fastvlm.engine.events import Request
from tests.unit.engine.test_engine import IMG, preparing, slow_prefix_engine


class SlowLock:
    """The engine's lock, stretched once `armed`: its release takes `release_pause` s, and its acquire, once it has
    the lock, `acquire_pause` s more (then `obtained` is set): a prepare's last or first steps, as when the system
    takes the CPU from its thread between them."""

    def __init__(self, release_pause: float = 0.0, acquire_pause: float = 0.0):
        self._lock, self.armed, self.obtained = threading.Lock(), False, threading.Event()
        self.release_pause, self.acquire_pause = release_pause, acquire_pause

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        got = self._lock.acquire(blocking, timeout)
        if got and self.armed:
            self.obtained.set()
            time.sleep(self.acquire_pause)
        return got

    def release(self) -> None:
        if self.armed:
            time.sleep(self.release_pause)
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()


def test_a_newer_prepare_takes_over_however_slowly_the_running_one_lets_go():
    engine, lm = slow_prefix_engine()
    engine._flight.lock = SlowLock(release_pause=4 * QUEUE_POLL_S)  # the newer one looks several times while it lets go
    worker, first = preparing(engine, lm, IMG)
    engine._flight.lock.armed = True
    assert engine.prepare(255 - IMG) is True, "the newer prepare gave up while the running one let go"
    worker.join()
    assert first["ok"] is False and engine.vision.calls == 2


def started_taking_the_lock(engine, image) -> tuple[threading.Thread, dict]:
    """`engine.prepare(image)` in a thread, stretched between having the lock and going on: (thread, {"ok": ...})."""
    engine._flight.lock = SlowLock(acquire_pause=4 * QUEUE_POLL_S)
    engine._flight.lock.armed = True
    out: dict = {}
    worker = threading.Thread(target=lambda: out.update(ok=engine.prepare(image)))
    worker.start()
    assert engine._flight.lock.obtained.wait(5)
    return worker, out


def test_a_prepare_holds_the_engine_from_the_moment_it_has_the_lock():
    """The same image asked for again while the first prepare is taking the engine: the second leaves it be
    (already under way) and the first prepares it. Before, the second saw a lock with nothing being prepared,
    took it for an answer's and gave up, having already made the first one stale: nothing was prepared."""
    engine, _ = slow_prefix_engine()
    worker, first = started_taking_the_lock(engine, IMG)
    assert engine.prepare(IMG) is False, "a second prepare of the image under way"
    worker.join()
    assert first["ok"] is True and engine.vision.calls == 1, (first, engine.vision.calls)


def test_a_question_about_the_image_a_prepare_is_taking_the_engine_for_lets_it_finish():
    """A request comes in line while the prepare is taking the lock: it is for that image, so it waits for that
    prefill and reuses it (before, it saw nothing being prepared and stopped the prepare)."""
    engine, _ = slow_prefix_engine()
    worker, prepare = started_taking_the_lock(engine, IMG)
    assert engine.answer(Request(IMG, "what is it?")).text
    worker.join()
    assert prepare["ok"] is True and engine.vision.calls == 1, (prepare, engine.vision.calls)
