"""OpenVINO's compiled sizes and its bf16 report: a dynamic graph is compiled static for each size asked (the
first at warm-up), the two most recently used sizes are kept, and the CPU plugin's own capability list decides
bf16 where /proc/cpuinfo cannot."""

from __future__ import annotations

import numpy as np
import pytest

from fastvlm.engine.vision_runtimes import cpu_supports_bf16, load_vision
from tests import graphs


@pytest.fixture
def vision(tiny_models):
    pytest.importorskip("openvino")
    return load_vision(tiny_models.vision, 2, "openvino", precision="f32")


def shape(compiled) -> str:
    return str(compiled.input(0).get_partial_shape())


def test_a_dynamic_graph_is_compiled_static_for_each_size_at_warm_up_or_first_use(vision):
    vision.warm_up(128)
    assert list(vision._compiled) == [128] and shape(vision._compiled[128]) == "[1,3,128,128]"
    vision.encode(graphs.pixels(64))
    assert shape(vision._compiled[64]) == "[1,3,64,64]"
    assert str(vision._model.input(0).get_partial_shape()) == "[1,3,?,?]"  # the model itself stays dynamic


def test_the_two_sizes_used_last_stay_compiled(vision):
    for size in (64, 128, 64, 192):  # 64 used again: 128 is then the oldest
        vision.encode(graphs.pixels(size))
    assert list(vision._compiled) == [64, 192]
    kept = vision._compiled[64]
    np.testing.assert_array_equal(vision.encode(graphs.pixels(64)), vision.encode(graphs.pixels(64)))
    assert vision._compiled[64] is kept  # not compiled again


class Core:
    def __init__(self, capabilities=None):
        self.capabilities = capabilities

    def get_property(self, device, name):
        assert (device, name) == ("CPU", "OPTIMIZATION_CAPABILITIES")
        if self.capabilities is None:
            raise RuntimeError("unsupported property")  # an OpenVINO too old to say
        return self.capabilities


@pytest.mark.parametrize("capabilities, bf16", [(["FP32", "BF16", "INT8"], True), (["FP32", "INT8"], False),
                                                (None, False)])
def test_openvinos_own_capability_list_says_whether_bf16_is_native(capabilities, bf16):
    assert cpu_supports_bf16(Core(capabilities)) is bf16
