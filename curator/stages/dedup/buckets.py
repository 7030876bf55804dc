"""Split a table's rows into per-target files: the shuffle step of the dedup phases."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq

from curator.commit import Commit

#: Shuffle buckets by default: one per BUCKET_BYTES of parts (memory of a bucket task), but at
#: least MIN_BUCKETS (parallelism) once there is SMALL_BUCKET_BYTES of data for each of them; never
#: more than the parts (files per phase = parts x buckets).
MIN_BUCKETS = 16
BUCKET_BYTES = 256 << 20
SMALL_BUCKET_BYTES = 16 << 20


def default_buckets(parts: list[Path]) -> int:
    """Buckets for a shuffle over ``parts``: the number of files a phase writes is parts x
    buckets, so buckets grow with the data, not with the number of parts; a small input gets
    few buckets, as every bucket is a task of every later phase (a fixed cost each)."""
    size = sum(Path(p).stat().st_size for p in parts)
    floor = min(MIN_BUCKETS, size // SMALL_BUCKET_BYTES)
    return max(1, min(len(parts), max(floor, size // BUCKET_BYTES)))


def write_table(table: pa.Table, final: Path, pending: Commit,
                fmt: Literal["arrow", "parquet"] = "arrow") -> None:
    """Write ``table`` under a temporary name of ``final`` (committed later with ``pending``)."""
    path = pending.temporary_for(final)
    if fmt == "parquet":
        pq.write_table(table, path)
    else:
        feather.write_feather(table, path, compression="lz4")


def write_split(table: pa.Table, target: np.ndarray, count: int, path_of: Callable[[int], Path],
                pending: Commit,
                fmt: Literal["arrow", "parquet"] = "arrow") -> None:
    """Write rows of ``table`` to ``path_of(t)`` for each target ``t`` in ``range(count)`` (an
    empty file where none): one stable sort, not ``count`` filters over the table."""
    order = np.argsort(target, kind="stable")
    bounds = np.searchsorted(target[order], np.arange(count + 1))
    ordered = table.take(pa.array(order)) if len(order) else table
    write_slices(ordered, bounds, path_of, pending, fmt)


def write_slices(ordered: pa.Table, bounds: np.ndarray, path_of: Callable[[int], Path],
                 pending: Commit,
                 fmt: Literal["arrow", "parquet"] = "arrow") -> None:
    """Write rows ``bounds[t]:bounds[t + 1]`` of ``ordered`` (rows grouped by target) to
    ``path_of(t)``, for each target ``t``."""
    for t in range(len(bounds) - 1):
        lo, hi = int(bounds[t]), int(bounds[t + 1])
        write_table(ordered.slice(lo, hi - lo), path_of(t), pending, fmt)
