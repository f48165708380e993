import numpy as np

from fastvlm.engine.kv import LRU, Image, Snapshot, SnapshotStore, Tokens, chunks, common_prefix, identities


def _img(key="k", n=5):
    return Image(key, np.zeros((n, 4), np.float32))


def test_identities_and_common_prefix():
    parts = [Tokens((1, 2)), _img(n=3), Tokens((9,))]
    ids = identities(parts)
    assert ids == [1, 2, ("k", 0), ("k", 1), ("k", 2), 9]
    other = identities([Tokens((1, 2)), _img("other", 3), Tokens((9,))])
    assert common_prefix(ids, other) == 2


def test_chunks_respect_batch_size_kind_and_skip():
    parts = [Tokens((1, 2, 3)), _img(n=5), Tokens((7, 8))]
    cs = chunks(parts, skip=2, n_batch=2)
    assert [(c.start, len(c)) for c in cs] == [(2, 1), (3, 2), (5, 2), (7, 1), (8, 2)]
    assert [c.ends_image for c in cs] == [False, False, False, True, False]
    assert cs[2].identities() == [("k", 2), ("k", 3)]
    assert all(len(c) <= 2 for c in cs)


def test_snapshot_store_picks_longest_matching_prefix_and_evicts_lru():
    store = SnapshotStore(2)
    a, b, c = Snapshot((1, 2), b"a"), Snapshot((1, 2, 3), b"b"), Snapshot((5,), b"c")
    for s in (a, b):
        store.put(s)
    assert store.best([1, 2, 3, 4], better_than=0) is b
    assert store.best([1, 2, 3, 4], better_than=3) is None
    assert store.best([1, 2, 9], better_than=0) is a
    store.put(c)  # evicts b, the least recently used
    assert (1, 2, 3) not in store and len(store) == 2
    assert store.best([1, 2], better_than=0) is a  # the whole of what is wanted
    empty = SnapshotStore(0)  # off
    empty.put(a)
    assert len(empty) == 0 and empty.best([1, 2, 3], better_than=0) is None


def test_the_lru_keeps_its_capacity_of_most_recently_used_entries():
    cache = LRU(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get_fresh("a") == 1  # now "b" is the least recently used
    cache.put("c", 3)
    assert list(cache) == ["a", "c"] and cache.get_fresh("b") is None
    off = LRU(0)
    off.put("a", 1)
    assert len(off) == 0
    one, store = LRU(1), SnapshotStore(1)
    one.put("a", 1)
    store.put(Snapshot((1,), b"a"))
    assert list(one) == ["a"] and len(store) == 1
