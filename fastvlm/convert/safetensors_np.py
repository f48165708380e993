"""Read safetensors files with numpy alone, bf16 included (numpy has no bf16: it widens to float32 exactly).

The format is an 8-byte little-endian header length, a JSON header (name -> dtype, shape, byte offsets
into the data that follows) and the raw little-endian data. Files are memory-mapped, so a tensor costs
memory only while it is used.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16, "I64": np.int64,
           "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
MAX_HEADER = 100 * 2**20


class SafetensorsError(ValueError):
    """A file is not a readable safetensors file; the message names it."""


@dataclass(frozen=True)
class TensorInfo:
    file: Path
    key: str  # name in the file
    dtype: str  # safetensors dtype name: "BF16", "F32", ...
    shape: tuple[int, ...]
    start: int  # absolute byte offset in the file
    end: int


def read_header(path: Path) -> dict[str, TensorInfo]:
    """Every tensor of one file, in file order (metadata only)."""
    path = Path(path)
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise SafetensorsError(f"{path} is too short to be a safetensors file")
        (n,) = struct.unpack("<Q", raw)
        if n > MAX_HEADER:
            raise SafetensorsError(f"{path}: header of {n} bytes: not a safetensors file")
        header = json.loads(f.read(n))
    base = 8 + n
    out = {}
    for key, meta in header.items():
        if key == "__metadata__":
            continue
        if meta["dtype"] not in _DTYPES:
            raise SafetensorsError(f"{path}: tensor {key} has dtype {meta['dtype']}, which this reader does not know")
        start, end = meta["data_offsets"]
        out[key] = TensorInfo(path, key, meta["dtype"], tuple(meta["shape"]), base + start, base + end)
    return out


def load(info: TensorInfo) -> np.ndarray:
    """The tensor as stored (bf16 as its raw uint16 bits), memory-mapped and read-only."""
    dtype = np.dtype(_DTYPES[info.dtype]).newbyteorder("<")
    count = int(np.prod(info.shape, dtype=np.int64))
    if info.end - info.start != count * dtype.itemsize:
        raise SafetensorsError(f"{info.file}: tensor {info.key} has {info.end - info.start} bytes "
                               f"for shape {info.shape}")
    if count == 0:
        return np.zeros(info.shape, dtype)
    data = np.memmap(info.file, dtype=dtype, mode="r", offset=info.start, shape=(count,))
    return data.reshape(info.shape)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """bf16 bit patterns (uint16) -> float32, exactly (bf16 is the top half of a float32)."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def load_f32(info: TensorInfo) -> np.ndarray:
    """The tensor as float32 (exact for bf16, f16 and f32)."""
    a = load(info)
    if info.dtype == "BF16":
        return bf16_to_f32(a)
    return np.asarray(a, dtype=np.float32)


def f32_to_bf16(a: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns, rounded to nearest even (as torch does); NaN stays NaN."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = (bits + (0x7FFF + ((bits >> 16) & 1))) >> 16
    nan = np.isnan(a)
    return np.where(nan, (bits >> 16) | 0x40, rounded).astype(np.uint16)


def write(path: Path, tensors: dict[str, tuple[str, np.ndarray]], metadata: dict[str, str] | None = None) -> None:
    """Write `name -> (dtype name, array)` as a safetensors file (for BF16 pass the uint16 bits)."""
    header: dict = {"__metadata__": metadata} if metadata else {}
    offset, blobs = 0, []
    for name, (dtype, array) in tensors.items():
        blob = np.ascontiguousarray(array, dtype=np.dtype(_DTYPES[dtype]).newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)  # data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for blob in blobs:
            f.write(blob)
