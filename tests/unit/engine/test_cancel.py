"""CancelToken: hooks run while their block is open, and never after it has closed."""

from __future__ import annotations

import threading

from fastvlm.engine.cancel import CancelToken


def test_a_hook_never_runs_after_its_block_has_exited():
    token, order = CancelToken(), []
    in_first = threading.Event()

    def first():  # a slow hook: cancel() is still running hooks when the second block exits
        in_first.set()
        threading.Event().wait(0.2)

    with token.hook(first):
        with token.hook(lambda: order.append("second hook ran")):
            canceller = threading.Thread(target=token.cancel)
            canceller.start()
            assert in_first.wait(5)
        order.append("second block exited")
    canceller.join()
    assert order == ["second hook ran", "second block exited"]  # else a late Stop could hit the next request


def test_a_hook_entered_after_cancel_runs_at_once():
    token, ran = CancelToken(), []
    token.cancel()
    with token.hook(lambda: ran.append(1)):
        assert ran == [1]
    token.cancel()
    assert ran == [1] and token.cancelled
