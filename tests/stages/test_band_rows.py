"""band_rows: a part's band hashes as shuffle rows grouped by bucket, equal to tiling the keys and
taking the rows of a table in a stable sort by bucket (the former code)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from curator.stages.dedup.fuzzy.common import ROW_BITS
from curator.stages.dedup.fuzzy.signatures import band_rows


def _tiled(bands: np.ndarray, empty_row: np.ndarray, part: int, buckets: int):
    """The shuffle rows made the straightforward way: repeat, tile, one stable sort, take."""
    width = bands.shape[1]
    valid = np.flatnonzero(~(bands == empty_row[None, :]).all(axis=1)).astype(np.int64)
    hashes = bands[valid].reshape(-1)
    table = pa.table({"band": np.tile(np.arange(width, dtype=np.int16), len(valid)),
                      "hash": hashes,
                      "key": np.repeat((np.int64(part) << np.int64(ROW_BITS)) | valid, width)})
    target = (hashes % np.uint64(buckets)).astype(np.int64)
    order = np.argsort(target, kind="stable")
    bounds = np.searchsorted(target[order], np.arange(buckets + 1))
    return table.take(pa.array(order)), bounds


def _bands(n: int, width: int, empty: list[int], seed: int = 0):
    rng = np.random.default_rng(seed)
    bands = rng.integers(0, 2**63, (n, width), dtype=np.int64).view(np.uint64)
    bands[:, 0] %= np.uint64(7)  # many equal hashes in one band: ties within buckets
    empty_row = rng.integers(0, 2**63, width, dtype=np.int64).view(np.uint64)
    bands[empty] = empty_row
    return bands, empty_row


@pytest.mark.parametrize(("n", "empty", "buckets"), [
    (1000, [], 16), (1000, [0, 5, 999], 7), (3, [0, 1, 2], 4), (0, [], 3), (500, [1], 70000)])
def test_band_rows_equal_the_tiled_table(n, empty, buckets):
    bands, empty_row = _bands(n, 5, empty)
    rows = band_rows(bands, empty_row, part=3, buckets=buckets)
    table, bounds = _tiled(bands, empty_row, 3, buckets)
    assert pa.table(rows.columns).equals(table)
    assert rows.bounds.tolist() == bounds.tolist()
    assert (rows.docs, rows.empty) == (n, len(empty))
