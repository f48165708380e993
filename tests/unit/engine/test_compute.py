"""`ComputeThread`: every call runs on one thread of its own, whichever thread makes it."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from fastvlm.engine.compute import ComputeThread


def test_calls_from_many_threads_run_on_one_thread_that_is_none_of_theirs():
    compute = ComputeThread()
    try:
        callers, ran_on = [], []

        def call() -> int:
            callers.append(threading.get_ident())
            return compute.run(lambda x: ran_on.append(threading.get_ident()) or x * 2, 21)

        results = [call()]
        worker = threading.Thread(target=lambda: results.append(call()))
        worker.start()
        worker.join()
        with ThreadPoolExecutor(2) as pool:
            results += list(pool.map(lambda _: call(), range(4)))
        assert results == [42] * 6
        assert len(set(ran_on)) == 1 and ran_on[0] not in callers
    finally:
        compute.close()


def test_an_exception_reaches_the_caller_and_the_thread_goes_on():
    compute = ComputeThread()
    try:
        with pytest.raises(ValueError, match="broken"):
            compute.run(lambda: (_ for _ in ()).throw(ValueError("broken")))
        assert compute.run(len, "four") == 4
    finally:
        compute.close()


def test_a_call_made_from_the_compute_thread_runs_at_once():
    compute = ComputeThread()
    try:
        assert compute.run(lambda: compute.run(lambda: threading.get_ident())) == compute.run(threading.get_ident)
    finally:
        compute.close()


def test_close_ends_the_thread():
    compute = ComputeThread(name="test-compute")
    compute.run(lambda: None)
    assert any(t.name.startswith("test-compute") for t in threading.enumerate())
    compute.close()
    assert not any(t.name.startswith("test-compute") for t in threading.enumerate())
