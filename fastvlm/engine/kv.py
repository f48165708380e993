"""Bookkeeping for KV-cache reuse: which positions the llama context holds, and per-image snapshots.

Pure Python, no llama.cpp: `LlamaLM` asks it what to keep, what to restore and what to feed.
A position's identity is its token id, or `(image_key, i)` for the i-th image vector.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Tokens:
    ids: tuple[int, ...]


@dataclass(frozen=True, eq=False)
class Image:
    key: str  # content hash + resolution
    embeddings: np.ndarray  # (N, D) float32


Part = Tokens | Image


def identities(parts: Sequence[Part]) -> list[Hashable]:
    out: list[Hashable] = []
    for p in parts:
        out.extend(p.ids if isinstance(p, Tokens) else ((p.key, i) for i in range(len(p.embeddings))))
    return out


def common_prefix(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


@dataclass(frozen=True)
class Snapshot:
    ids: tuple[Hashable, ...]  # the positions it holds
    data: bytes  # llama_state_seq_get_data of sequence 0


class SnapshotStore:
    """An LRU of KV snapshots taken right after an image was prefilled."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._items: OrderedDict[tuple, Snapshot] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, ids: tuple) -> bool:
        return ids in self._items

    def put(self, snap: Snapshot) -> None:
        if self.capacity <= 0:
            return
        self._items[snap.ids] = snap
        self._items.move_to_end(snap.ids)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def best(self, wanted: Sequence[Hashable], better_than: int) -> Snapshot | None:
        """The longest snapshot that is a prefix of `wanted` and longer than `better_than` positions."""
        best = None
        for snap in self._items.values():
            n = len(snap.ids)
            if n > better_than and n <= len(wanted) and tuple(wanted[:n]) == snap.ids:
                if best is None or n > len(best.ids):
                    best = snap
        if best is not None:
            self._items.move_to_end(best.ids)
        return best

    def discard(self, snap: Snapshot) -> None:
        """Forget `snap` (one that could not be restored: it would fail every later request with its image)."""
        self._items.pop(snap.ids, None)

    def clear(self) -> None:
        self._items.clear()


@dataclass(frozen=True)
class Chunk:
    """A run of positions fed to llama_decode in one batch: token ids or image vectors."""

    start: int  # first position
    tokens: tuple[int, ...] = ()
    embeddings: np.ndarray | None = None  # (n, D)
    image_key: str = ""
    image_offset: int = 0  # index of the first vector within its image
    ends_image: bool = False

    def __len__(self) -> int:
        return len(self.tokens) if self.embeddings is None else len(self.embeddings)

    def identities(self) -> list[Hashable]:
        if self.embeddings is None:
            return list(self.tokens)
        return [(self.image_key, self.image_offset + i) for i in range(len(self.embeddings))]


def chunks(parts: Sequence[Part], skip: int, n_batch: int) -> list[Chunk]:
    """Split the positions after the first `skip` into batches of at most `n_batch`, one kind per batch."""
    out: list[Chunk] = []
    pos = 0
    for p in parts:
        n = len(p.ids) if isinstance(p, Tokens) else len(p.embeddings)
        lo = max(skip - pos, 0)
        for a in range(lo, n, n_batch):
            b = min(a + n_batch, n)
            if isinstance(p, Tokens):
                out.append(Chunk(pos + a, tokens=p.ids[a:b]))
            else:
                out.append(Chunk(pos + a, embeddings=p.embeddings[a:b], image_key=p.key, image_offset=a,
                                 ends_image=b == n))
        pos += n
    return out


class LRU(OrderedDict):
    """A dict that keeps its `capacity` most recently used entries (the engine's embedding and answer caches)."""

    def __init__(self, capacity: int):
        super().__init__()
        self.capacity = capacity

    def get_fresh(self, key):
        if key in self:
            self.move_to_end(key)
            return self[key]
        return None

    def put(self, key, value) -> None:
        if self.capacity <= 0:
            return
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.capacity:
            self.popitem(last=False)
