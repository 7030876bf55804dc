"""band_rows: a part's band hashes as shuffle rows (band, hash, row), equal to tiling the rows
the straightforward way; the ShuffleDir they are written to hands out any bucket of any bucket
count as the rows whose hash falls in its range, every row once, one bucket at a time or a
part's every bucket at once; its sort is NumPy's stable sort, in less time."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from curator.commit import Commit
from curator.io.shuffle import ShuffleDir, bucket_bounds, stable_order
from curator.stages.dedup.fuzzy.signatures import band_rows


def _bands(n: int, width: int, empty: list[int], seed: int = 0):
    rng = np.random.default_rng(seed)
    bands = rng.integers(0, 2**63, (n, width), dtype=np.int64).view(np.uint64)
    bands[:, 0] %= np.uint64(7)  # many equal hashes in one band: ties within buckets
    bands[:, 1] |= np.uint64(1 << 63)  # hashes past 2^63: the top of the range is read too
    empty_row = rng.integers(0, 2**63, width, dtype=np.int64).view(np.uint64)
    bands[empty] = empty_row
    return bands, empty_row


@pytest.mark.parametrize(("n", "empty"), [(1000, []), (1000, [0, 5, 999]), (3, [0, 1, 2]),
                                          (0, [])])
def test_band_rows_equal_the_tiled_rows(n, empty):
    bands, empty_row = _bands(n, 5, empty)
    rows = band_rows(bands, empty_row)
    valid = np.array([i for i in range(n) if i not in empty], np.int64)
    expected = pa.table({"band": np.tile(np.arange(5, dtype=np.int16), len(valid)),
                         "hash": bands[valid].reshape(-1) if len(valid) else
                         np.empty(0, np.uint64),
                         "row": np.repeat(valid, 5)})
    assert pa.table(rows.columns).equals(expected)
    assert (rows.docs, rows.empty) == (n, len(empty))


@pytest.mark.parametrize("buckets", [1, 7, 16, 3000])
def test_any_bucket_count_reads_every_row_once_in_its_range(tmp_path, buckets):
    bands, empty_row = _bands(2000, 5, [3])
    table = pa.table(band_rows(bands, empty_row).columns)
    shuffle, commit = ShuffleDir(tmp_path, "hash"), Commit()
    shuffle.write("part-a", table, commit)
    commit.publish()
    seen = []
    for b in range(buckets):
        got = shuffle.read("part-a", b, buckets)
        lo, hi = bucket_bounds(b, buckets)
        hashes = got.column("hash").to_numpy()
        assert ((hashes >= np.uint64(lo)) & (hashes.astype(object) < hi)).all()
        seen.append(got)
    together = pa.concat_tables(seen)
    assert together.num_rows == table.num_rows
    key = [("hash", "ascending"), ("row", "ascending"), ("band", "ascending")]
    assert together.sort_by(key).equals(table.sort_by(key))


@pytest.mark.parametrize("buckets", [1, 7, 3000])
def test_a_part_split_into_every_bucket_is_each_bucket_read_alone(tmp_path, buckets):
    bands, empty_row = _bands(2000, 5, [3])
    shuffle, commit = ShuffleDir(tmp_path, "hash"), Commit()
    shuffle.write("part-a", pa.table(band_rows(bands, empty_row).columns), commit)
    shuffle.write("part-empty", pa.table(band_rows(bands[:0], empty_row).columns), commit)
    commit.publish()
    for part in ("part-a", "part-empty"):
        split = shuffle.read_split(part, buckets)
        assert len(split) == buckets
        assert all(split[b].equals(shuffle.read(part, b, buckets)) for b in range(buckets))


@pytest.mark.parametrize("kind", ["distinct", "ties", "all-equal", "sorted", "reversed"])
@pytest.mark.parametrize("n", [0, 1, 2, 1000, 100_000])
def test_the_shuffle_sort_is_numpys_stable_sort(kind, n):
    rng = np.random.default_rng(n)
    values = {"distinct": rng.integers(0, 2**63, n, dtype=np.int64).view(np.uint64),
              "ties": rng.integers(0, max(1, n // 10), n).astype(np.uint64) << np.uint64(40),
              "all-equal": np.full(n, 2**64 - 1, np.uint64),
              "sorted": np.arange(n, dtype=np.uint64) // np.uint64(3),
              "reversed": np.arange(n, 0, -1).astype(np.uint64) // np.uint64(3)}[kind]
    assert np.array_equal(stable_order(values), np.argsort(values, kind="stable"))
