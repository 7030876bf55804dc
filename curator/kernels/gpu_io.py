"""String columns resident on the GPU: Parquet decoded on the device by cuDF (pylibcudf).

cuDF is used when ``pylibcudf`` (its stable Python layer) imports and a GPU is visible; it is
never required: without it callers read with pyarrow and copy the Arrow buffers over
(``minhash_gpu``). ``CURATOR_CUDF=0`` keeps the pyarrow read where cuDF is installed.

A cuDF strings column holds its UTF-8 bytes as the column's data buffer and its offsets
(int32, or int64 for large strings) as its only child; a sliced column carries a row offset.
``column_strings`` wraps those device buffers as CuPy views (no copy, no host round trip) and
gives null rows empty ranges, as ``shingles.string_buffers`` does on the host.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple


class DeviceStrings(NamedTuple):
    """CuPy views of a string column: bytes and absolute per-row byte ranges."""

    data: Any  # uint8
    starts: Any  # int64
    ends: Any  # int64; equal to starts for null rows
    owner: Any  # the cuDF column the views point into (keeps its buffers alive)


@cache
def _pylibcudf_imports() -> bool:
    try:
        import pylibcudf  # noqa: F401
    except Exception:  # not installed, or its CUDA libraries do not load
        return False
    return True


def cudf_enabled() -> bool:
    """True when pylibcudf imports, CuPy sees a GPU and ``CURATOR_CUDF`` is not ``0``."""
    if os.environ.get("CURATOR_CUDF", "1") == "0":
        return False
    from curator.kernels.minhash_gpu import gpu_available

    return gpu_available() and _pylibcudf_imports()


def _view(span: Any, dtype: Any, count: int, owner: Any) -> Any:
    """A CuPy array of ``count`` items over the device buffer ``span`` (kept alive by owner)."""
    import cupy as cp

    mem = cp.cuda.UnownedMemory(span.ptr, span.size, owner)
    return cp.ndarray((count,), dtype, cp.cuda.MemoryPointer(mem, 0))


def column_strings(column: Any) -> DeviceStrings:
    """Device views of a pylibcudf STRING column (sliced or not, with or without nulls)."""
    import cupy as cp
    import pylibcudf as plc

    if column.type().id() != plc.TypeId.STRING:
        raise TypeError(f"expected a STRING column, found {column.type().id()!r}")
    n = column.size()
    chars = column.data()
    data = (_view(chars, cp.uint8, chars.size, column) if chars is not None and chars.size
            else cp.zeros(1, cp.uint8))
    if n == 0:
        empty = cp.zeros(0, cp.int64)
        return DeviceStrings(data, empty, empty, column)
    offsets_col = column.child(0)
    wide = offsets_col.type().id() == plc.TypeId.INT64
    first = offsets_col.offset() + column.offset()
    offsets = _view(offsets_col.data(), cp.int64 if wide else cp.int32,
                    offsets_col.offset() + offsets_col.size(), column)
    offsets = offsets[first:first + n + 1].astype(cp.int64, copy=False)
    starts, ends = offsets[:-1], offsets[1:]
    if column.null_count():
        valid_col = plc.unary.is_valid(column)
        valid = _view(valid_col.data(), cp.bool_, n, valid_col)
        ends = cp.where(valid, ends, starts)
    return DeviceStrings(data, starts, ends, column)


def read_parquet_strings(path: str | Path, name: str) -> DeviceStrings:
    """Decode the string column ``name`` of one Parquet file on the GPU (cuDF)."""
    import pylibcudf as plc

    options = plc.io.parquet.ParquetReaderOptions.builder(
        plc.io.SourceInfo([str(path)])).column_names([name]).build()
    table = plc.io.parquet.read_parquet(options)
    return column_strings(table.columns[0])
