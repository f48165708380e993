"""The numpy safetensors reader on the shapes a checkpoint can hold (a scalar, one element, none) and on files it
must refuse: a header too large to be one, an unknown dtype, a tensor whose bytes do not fit its shape."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from fastvlm.convert import safetensors_np as st


@pytest.mark.parametrize("array", [np.array(7.5, np.float32), np.array([3], np.int64), np.zeros((0, 3), np.float32),
                                   np.arange(6, dtype=np.float16).reshape(2, 3), np.array(True)])
def test_every_shape_comes_back_as_written(tmp_path, array):
    dtype = {np.float32: "F32", np.int64: "I64", np.float16: "F16", np.bool_: "BOOL"}[array.dtype.type]
    path = tmp_path / "m.safetensors"
    st.write(path, {"t": (dtype, array)})
    info = st.read_header(path)["t"]
    got = st.load(info)
    assert got.shape == array.shape and got.dtype == array.dtype and np.array_equal(got, array)


def _raw(path, header: dict, data: bytes = b"", claimed: int | None = None):
    head = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(head) if claimed is None else claimed) + head + data)
    return path


def test_a_header_larger_than_the_limit_is_not_read(tmp_path):
    path = _raw(tmp_path / "big.safetensors", {}, claimed=st.MAX_HEADER + 1)
    with pytest.raises(st.SafetensorsError, match=f"big.safetensors: header of {st.MAX_HEADER + 1} bytes"):
        st.read_header(path)


def test_metadata_is_skipped_and_offsets_count_from_the_end_of_the_header(tmp_path):
    header = {"__metadata__": {"format": "pt"}, "a": {"dtype": "U8", "shape": [2], "data_offsets": [0, 2]},
              "b": {"dtype": "U8", "shape": [1], "data_offsets": [2, 3]}}
    info = st.read_header(_raw(tmp_path / "m.safetensors", header, b"\x01\x02\x03"))
    assert list(info) == ["a", "b"]
    assert st.load(info["a"]).tolist() == [1, 2] and st.load(info["b"]).tolist() == [3]


def test_an_unknown_dtype_and_a_short_tensor_are_named(tmp_path):
    odd = _raw(tmp_path / "odd.safetensors", {"w": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}}, b"\0")
    with pytest.raises(st.SafetensorsError, match="tensor w has dtype F8_E4M3"):
        st.read_header(odd)
    short = _raw(tmp_path / "short.safetensors", {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}},
                 b"\0" * 4)
    with pytest.raises(st.SafetensorsError, match=r"tensor w has 4 bytes for shape \(2,\)"):
        st.load(st.read_header(short)["w"])
    tiny = tmp_path / "tiny.safetensors"
    tiny.write_bytes(b"\0" * 7)
    with pytest.raises(st.SafetensorsError, match="too short"):
        st.read_header(tiny)


def test_nan_stays_nan_in_bf16():
    bits = st.f32_to_bf16(np.array([np.nan, -np.nan, np.inf], np.float32))
    back = st.bf16_to_f32(bits)
    assert np.isnan(back[:2]).all() and back[2] == np.inf


def test_a_tie_next_to_an_odd_bf16_rounds_up_to_the_even_one():
    # 1 + 2^-7 is odd in bf16 (last mantissa bit 1); 2^-8 above it is halfway to 1 + 2^-6, the even neighbour
    tie = np.array([1 + 2**-7 + 2**-8, -(1 + 2**-7 + 2**-8)], np.float32)
    assert st.bf16_to_f32(st.f32_to_bf16(tie)).tolist() == [1 + 2**-6, -(1 + 2**-6)]


@pytest.mark.parametrize("name", ["w", "a_longer_tensor_name"])
def test_the_data_starts_eight_byte_aligned(tmp_path, name):
    path = tmp_path / "m.safetensors"
    st.write(path, {name: ("F32", np.ones(3, np.float32))})
    (n,) = struct.unpack("<Q", path.read_bytes()[:8])
    assert n % 8 == 0 and st.read_header(path)[name].start == 8 + n
