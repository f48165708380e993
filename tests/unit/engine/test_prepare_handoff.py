"""The hand-over between two prepares: a newer prepare waiting for the running one to give way must take the engine
however long the running one's last steps take, and never mistake them for an answer holding the engine."""

import threading
import time

from fastvlm.engine.engine import QUEUE_POLL_S
from tests.unit.engine.test_engine import IMG, preparing, slow_prefix_engine


class SlowRelease:
    """The engine's lock, whose release takes `pause` s once `armed`: a prepare's last steps stretched, as when the
    system takes the CPU from its thread between them."""

    def __init__(self, pause: float):
        self._lock, self.pause, self.armed = threading.Lock(), pause, False

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        if self.armed:
            time.sleep(self.pause)
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()


def test_a_newer_prepare_takes_over_however_slowly_the_running_one_lets_go():
    engine, lm = slow_prefix_engine()
    engine._lock = SlowRelease(pause=4 * QUEUE_POLL_S)  # the newer one looks several times while it lets go
    worker, first = preparing(engine, lm, IMG)
    engine._lock.armed = True
    assert engine.prepare(255 - IMG) is True, "the newer prepare gave up while the running one let go"
    worker.join()
    assert first["ok"] is False and engine.vision.calls == 2
