"""Bucketed intermediates of a dataset stage: rows of each input part, to be regrouped by a
64-bit hash across all parts (exact dedup's document hashes, fuzzy dedup's band hashes).

One file per part, its rows sorted by the hash (Arrow IPC, uncompressed: read memory-mapped).
Bucket ``b`` of ``B`` is the hash range ``[ceil(b·2^64/B), ceil((b+1)·2^64/B))`` of every part's
file, found by binary search on the sorted column: a part's file depends on neither ``B`` nor
the other parts, so a later run reuses it whenever its part is unchanged (docs/reuse.md), and a
run keeps one file per part, not one per part and bucket."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather

from curator.commit import Commit

_SPACE = 1 << 64


def bucket_bounds(bucket: int, buckets: int) -> tuple[int, int]:
    """The hash range ``[lo, hi)`` of ``bucket`` of ``buckets`` (``hi`` may be 2^64)."""
    return -(-bucket * _SPACE // buckets), -(-(bucket + 1) * _SPACE // buckets)


class ShuffleDir:
    """A folder of per-part files sorted by the uint64 column ``column``."""

    def __init__(self, folder: Path, column: str) -> None:
        self.folder, self.column = Path(folder), column

    def path(self, part: str) -> Path:
        return self.folder / f"{part}.arrow"

    def write(self, part: str, table: pa.Table, commit: Commit) -> None:
        """Write ``table`` as ``part``'s file, its rows sorted by the hash (stable), under a
        temporary name of ``commit``."""
        hashes = table.column(self.column).to_numpy()
        ordered = table.take(pa.array(np.argsort(hashes, kind="stable"))) if len(table) else table
        feather.write_feather(ordered, commit.temporary_for(self.path(part)),
                              compression="uncompressed")

    def read(self, part: str, bucket: int, buckets: int) -> pa.Table:
        """The rows of ``part`` whose hash falls in ``bucket`` of ``buckets``."""
        table = feather.read_table(self.path(part), memory_map=True)
        if table.num_rows == 0:
            return table
        hashes = table.column(self.column).combine_chunks().to_numpy()
        lo, hi = bucket_bounds(bucket, buckets)
        start = int(np.searchsorted(hashes, np.uint64(lo), side="left"))
        end = len(hashes) if hi >= _SPACE else int(np.searchsorted(hashes, np.uint64(hi),
                                                                     side="left"))
        return table.slice(start, end - start)
