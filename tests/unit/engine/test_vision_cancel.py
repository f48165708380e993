"""A Stop abandons an encode on the real runtimes: ONNX Runtime's terminate flag and OpenVINO's request cancel end
it with `EncodeCancelled`; a cancel with nothing in flight changes nothing, and the next encode runs as before.

The cancel is sent from inside the encode (the runtime's own call wrapped), so it lands while the encode is in
flight: on a graph as small as the tiny model's, a cancel from another thread would race the encode's end. OpenVINO's
is sent just after the request starts, so a thread descheduled for the ~20 ms the request takes (a busy machine)
finds it done; the test then tries again, a few times, to see one stopped in flight."""

from __future__ import annotations

import numpy as np
import pytest

from fastvlm.engine.vision import EncodeCancelled
from fastvlm.engine.vision_runtimes import load_vision
from tests import graphs


_TRIES = 5


class CancelsOnRun:
    """An ONNX Runtime session whose next run is cancelled as it starts (the runtime's `cancel()` from within)."""

    def __init__(self, vision):
        self._vision, self._session = vision, vision._session

    def run(self, outputs, feeds, options):
        self._vision.cancel()
        return self._session.run(outputs, feeds, options)


class CancelsInFlight:
    """An OpenVINO compiled model whose requests are cancelled once started (the runtime's `cancel()`)."""

    def __init__(self, vision, compiled):
        self.vision, self._compiled = vision, compiled
        self.stopped_in_flight = False  # OpenVINO's own wait said "Infer Request was canceled"

    def create_infer_request(self):
        return _Started(self, self._compiled.create_infer_request())


class _Started:
    def __init__(self, owner: CancelsInFlight, request):
        self._owner, self._request = owner, request

    def start_async(self, inputs):
        self._request.start_async(inputs)
        self._owner.vision.cancel()

    def wait(self):
        try:
            self._request.wait()
        except Exception:
            self._owner.stopped_in_flight = True
            raise

    def __getattr__(self, name):
        return getattr(self._request, name)


def test_onnxruntime_stops_a_run_at_its_terminate_flag(tiny_models):
    vision = load_vision(tiny_models.vision, 2, "onnxruntime")
    x = graphs.pixels(128)
    want = vision.encode(x)
    vision.cancel()  # nothing in flight: nothing to stop
    np.testing.assert_array_equal(vision.encode(x), want)
    session = vision._session
    vision._session = CancelsOnRun(vision)
    with pytest.raises(EncodeCancelled):
        vision.encode(x)
    assert not vision._runs
    vision._session = session
    np.testing.assert_array_equal(vision.encode(x), want)


def test_openvino_cancels_the_request_in_flight(tiny_models, monkeypatch):
    pytest.importorskip("openvino")
    vision = load_vision(tiny_models.vision, 2, "openvino", precision="f32")
    x = graphs.pixels(1024)  # ~20 ms of work: the cancel lands long before its end
    want = vision.encode(x)
    vision.cancel()
    np.testing.assert_array_equal(vision.encode(x), want)
    compiled = vision._compiled_for(1024)
    cancelling = CancelsInFlight(vision, compiled)
    monkeypatch.setattr(vision, "_compiled_for", lambda size: cancelling)
    for _ in range(_TRIES):  # a thread descheduled past the ~20 ms between start and cancel finds it done
        with pytest.raises(EncodeCancelled):  # done before the cancel or not, a cancelled encode gives no output
            vision.encode(x)
        assert not vision._requests and not vision._cancelled
        if cancelling.stopped_in_flight:
            break
    assert cancelling.stopped_in_flight, f"OpenVINO's cancel never stopped a request in flight in {_TRIES} tries"
    monkeypatch.undo()
    np.testing.assert_array_equal(vision.encode(x), want)
