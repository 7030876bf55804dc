"""Band hashes and star edges against brute force."""

from __future__ import annotations

import itertools
from collections import defaultdict

import numpy as np
import pytest

from curator.kernels.components import connected_components
from curator.kernels.lsh import (
    band_hashes,
    bucket_stars,
    signature_similarity,
    star_edges,
    star_edges_from_table,
    unique_edges,
    verify_pairs,
)
from tests.kernels import reference


def test_band_hashes_match_reference() -> None:
    rng = np.random.default_rng(0)
    sig = rng.integers(0, 2**32, size=(50, 30), dtype=np.uint64).astype(np.uint32)
    got = band_hashes(sig, bands=4, rows=7)
    assert got.dtype == np.uint64 and got.shape == (50, 4)
    for i in range(50):
        assert got[i].tolist() == [reference.band_hash(sig[i].tolist(), j, 7) for j in range(4)]
    with pytest.raises(ValueError, match="exceeds"):
        band_hashes(sig, bands=5, rows=7)


def _groups(ids: np.ndarray, keys: np.ndarray) -> dict:
    groups: dict = defaultdict(set)
    for i, k in zip(ids.tolist(), keys.tolist(), strict=True):
        groups[k].add(i)
    return groups


def test_bucket_stars_link_every_member_to_the_smallest() -> None:
    rng = np.random.default_rng(1)
    ids = rng.permutation(10_000).astype(np.int64) * 7 - 30_000  # negative ids too
    buckets = rng.integers(0, 900, size=len(ids)).astype(np.uint64)
    src, dst = bucket_stars(ids, buckets)
    want = {(m, min(g)) for g in _groups(ids, buckets).values() for m in g if m != min(g)}
    assert set(zip(src.tolist(), dst.tolist(), strict=True)) == want
    assert len(src) == len(want)  # linear: one edge per non-leader member


def test_star_edges_connect_exactly_the_lsh_candidates() -> None:
    rng = np.random.default_rng(2)
    n, nb = 400, 6
    table = rng.integers(0, 60, size=(n, nb)).astype(np.uint64)
    ids = np.arange(n, dtype=np.int64) + 1000
    src, dst = star_edges(ids, table)
    assert (dst < src).all()
    pairs = np.stack([src, dst], 1)
    assert len(np.unique(pairs, axis=0)) == len(pairs)  # unique
    # same connectivity as all candidate pairs (brute force, all-pairs on this small input)
    bf = [(i, j) for i, j in itertools.combinations(range(n), 2) if (table[i] == table[j]).any()]
    a = connected_components(n, src - 1000, dst - 1000)
    b = connected_components(n, np.array([p[0] for p in bf]), np.array([p[1] for p in bf]))
    assert np.array_equal(a, b)


def test_star_edges_from_long_table_keeps_bands_apart() -> None:
    ids = np.array([5, 3, 9, 3, 5, 9], dtype=np.int64)
    bands = np.array([0, 0, 0, 1, 1, 1], dtype=np.int32)
    buckets = np.array([7, 7, 8, 8, 1, 8], dtype=np.uint64)  # bucket 8 in bands 0 and 1
    src, dst = star_edges_from_table(ids, bands, buckets)
    assert sorted(zip(src.tolist(), dst.tolist(), strict=True)) == [(5, 3), (9, 3)]


def test_unique_edges_and_empty_input() -> None:
    s, d = unique_edges(np.array([3, 1, 3, 2]), np.array([0, 0, 0, 1]))
    assert list(zip(s.tolist(), d.tolist(), strict=True)) == [(1, 0), (2, 1), (3, 0)]
    s, d = bucket_stars(np.empty(0, np.int64), np.empty(0, np.uint64))
    assert len(s) == len(d) == 0


def test_verify_pairs_by_signature_agreement() -> None:
    sig = np.array([[1, 2, 3, 4], [1, 2, 3, 9], [7, 7, 7, 7]], dtype=np.uint32)
    sim = signature_similarity(sig, np.array([0, 0]), np.array([1, 2]))
    assert sim.tolist() == [0.75, 0.0]
    s, d, v = verify_pairs(sig, np.array([0, 0]), np.array([1, 2]), threshold=0.7)
    assert s.tolist() == [0] and d.tolist() == [1] and v.tolist() == [0.75]
