"""Parquet reader and writer. Row groups are cut at fixed row counts, so a shard's bytes do not
depend on how the pipeline batched it; the parts of a dataset share one schema."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from curator.batch import ID, TEXT, Failure, Shard, SourceBatch
from curator.io.files import InputError, open_binary
from curator.io.records import ColumnMap
from curator.io.schema import conform, unified_schema

#: Marks a shard that is a run of a file's row groups: ``<url>#row_groups=<first>-<end>``.
ROW_GROUPS_MARK = "#row_groups="


def row_group_shards(shard: Shard, shard_bytes: int) -> list[Shard]:
    """``shard`` (one Parquet file) as runs of consecutive row groups of about ``shard_bytes``
    uncompressed bytes each; the file itself where it has one run. Each keeps the file's label,
    so ids made from positions and error positions are those of the whole file. A file whose
    footer cannot be read stops the listing with one line naming it."""
    try:
        with open_binary(shard.path) as raw:
            meta = pq.ParquetFile(raw).metadata
    except (pa.ArrowInvalid, OSError) as err:
        raise InputError(f"{shard.label or shard.path}: not a readable Parquet file ({err}); "
                         "fix it or leave it out of the input") from None
    groups = [meta.row_group(i) for i in range(meta.num_row_groups)]
    runs: list[tuple[int, int]] = []
    first, gathered = 0, 0
    for i, group in enumerate(groups):
        gathered += group.total_byte_size
        if gathered >= shard_bytes or i == len(groups) - 1:
            runs.append((first, i + 1))
            first, gathered = i + 1, 0
    if len(runs) <= 1:
        return [shard]
    return [replace(shard, path=f"{shard.path}{ROW_GROUPS_MARK}{a}-{b}",
                    size=sum(_stored_bytes(g) for g in groups[a:b])) for a, b in runs]


def _stored_bytes(group: pq.RowGroupMetaData) -> int:
    return sum(group.column(j).total_compressed_size for j in range(group.num_columns))


def _split_row_groups(path: str) -> tuple[str, range | None]:
    url, mark, spec = path.partition(ROW_GROUPS_MARK)
    if not mark:
        return path, None
    first, end = spec.split("-")
    return url, range(int(first), int(end))


def read_parquet_batches(shard: Shard, batch_bytes: int, stage: str, columns: ColumnMap,
                         selected: list[str] | None = None) -> Iterator[SourceBatch]:
    """Stream a Parquet file (or the run of its row groups that ``shard`` names) in batches of
    about ``batch_bytes``; positions count rows from the file's start (an empty file: one empty
    batch, which tells the writers its columns)."""
    url, groups = _split_row_groups(shard.path)
    with open_binary(url) as raw:
        file = pq.ParquetFile(raw)
        meta = file.metadata
        if meta.num_rows == 0:
            empty = file.schema_arrow.empty_table()
            yield columns.normalise(empty.select(selected) if selected else empty,
                                    np.arange(0), stage, shard)
            return
        rows_per_batch = max(1, batch_bytes // _bytes_per_row(meta))
        start = sum(meta.row_group(i).num_rows for i in range(groups.start)) if groups else 0
        for record_batch in file.iter_batches(batch_size=rows_per_batch, columns=selected,
                                              row_groups=groups):
            table = pa.Table.from_batches([record_batch])
            positions = np.arange(start, start + table.num_rows)
            start += table.num_rows
            yield columns.normalise(table, positions, stage, shard)


def read_part(path: str | Path, columns: list[str] | None = None) -> pa.Table:
    """A dedup phase's part, decoded by the calling task's thread alone: the phase already runs
    a task per core, and each of Arrow's pool threads would keep the pages it freed (mimalloc's
    per-thread heaps), which a task's ``memory_returned`` cannot give back; on a 16-core node
    that made the peak grow with the number of tasks."""
    return pq.read_table(path, columns=columns, use_threads=False)


def _bytes_per_row(meta: pq.FileMetaData) -> int:
    total = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    return max(1, total // max(1, meta.num_rows))


class ParquetPartWriter:
    """Writes one shard's rows in row groups of exactly ``row_group_rows`` rows, each written from
    one contiguous table (so the bytes do not depend on how the rows were batched).

    The file's schema is the ``unified_schema`` of every table written, empty ones included (so
    an emptied shard keeps its columns). Row groups already written when a table brings a new
    column or type are set aside and rewritten with the final schema at ``close``.
    """

    def __init__(self, path: Path, row_group_rows: int, compression: str) -> None:
        self.path, self.row_group_rows, self.compression = path, row_group_rows, compression
        self.seen: set[pa.Schema] = set()
        self.schema = pa.schema([(ID, pa.string()), (TEXT, pa.string())])
        self.writer: pq.ParquetWriter | None = None
        self.pieces: list[Path] = []  # written with an earlier schema
        self.buffer: list[pa.Table] = []
        self.buffered = 0

    def write(self, table: pa.Table, payload: object = None) -> list[Failure]:
        if table.num_columns == 0:
            return []
        if table.schema not in self.seen:
            self.seen.add(table.schema)
            schema = unified_schema(self.seen)
            if not schema.equals(self.schema):
                self._set_aside()
                self.schema = schema
        if table.num_rows:
            self.buffer.append(table)
            self.buffered += table.num_rows
            if self.buffered >= self.row_group_rows:
                self._flush(final=False)
        return []

    def _set_aside(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
            self.bytes = 0
            piece = self.path.with_suffix(f".{len(self.pieces)}.tmp")
            os.replace(self.path, piece)
            self.pieces.append(piece)

    def _flush(self, final: bool) -> None:
        data = pa.concat_tables([conform(t, self.schema) for t in self.buffer])
        cut = data.num_rows if final else data.num_rows - data.num_rows % self.row_group_rows
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.path, self.schema, compression=self.compression,
                                          **WRITER_OPTIONS)
        for start in range(0, cut, self.row_group_rows):
            _write_group(self.writer, data.slice(start, min(self.row_group_rows, cut - start)))
        rest = data.slice(cut)
        self.buffer, self.buffered = ([rest], rest.num_rows) if rest.num_rows else ([], 0)

    def close(self) -> None:
        if self.buffered:
            self._flush(final=True)
        if not self.pieces:
            if self.writer is None:
                write_parquet(self.path, self.schema, [], self.compression)
            else:
                self.writer.close()
            return
        self._set_aside()
        write_parquet(self.path, self.schema, _row_groups(self.pieces, self.schema),
                      self.compression)
        for piece in self.pieces:
            piece.unlink()


class RollingPartWriter:
    """Rows to consecutive Parquet files (``path_for(0)``, ``path_for(1)``, ...), a new file once
    one holds ``max_bytes`` of text: the cut falls after the row that reaches it, so which rows
    land in which file depends on the rows alone, not on batching. Keeps the files a dataset
    stage reads whole bounded, whatever the size of the input file they came from."""

    def __init__(self, path_for: Callable[[int], Path], row_group_rows: int, compression: str,
                 max_bytes: int) -> None:
        self.path_for, self.row_group_rows = path_for, row_group_rows
        self.compression, self.max_bytes = compression, max_bytes
        self.files = 0
        self.writer: ParquetPartWriter | None = None
        self.bytes = 0

    def _open(self) -> ParquetPartWriter:
        if self.writer is None:
            self.writer = ParquetPartWriter(self.path_for(self.files), self.row_group_rows,
                                            self.compression)
            self.files += 1
            self.bytes = 0
        return self.writer

    def _close_file(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
            self.bytes = 0

    def write(self, table: pa.Table, payload: object = None) -> list[Failure]:
        while table.num_rows and TEXT in table.column_names:
            sizes = pc.fill_null(pc.binary_length(table.column(TEXT)), 0)
            total = np.cumsum(sizes.to_numpy(zero_copy_only=False)) + self.bytes
            cut = int(np.searchsorted(total, self.max_bytes)) + 1  # rows up to the one reaching it
            if cut > table.num_rows:
                break
            self._open().write(table.slice(0, cut))
            self._close_file()
            table = table.slice(cut)
        if table.num_rows or self.writer is not None or self.files == 0:
            self._open().write(table)
            if table.num_rows and TEXT in table.column_names:
                self.bytes += pc.sum(pc.binary_length(table.column(TEXT))).as_py() or 0
        return []

    def close(self) -> None:
        if self.files == 0:
            self._open()
        self._close_file()


#: Arrow checks whether a page is full after every ``write_batch_size`` rows of each chunk it is
#: given, so with the default (1024) the page cuts, and the file's bytes, follow how the rows were
#: chunked. Checking after every row makes them a function of the rows alone, at no cost in speed
#: and without copying the rows into one chunk.
WRITER_OPTIONS = {"write_batch_size": 1}


def _write_group(writer: pq.ParquetWriter, group: pa.Table) -> None:
    writer.write_table(group, row_group_size=max(1, group.num_rows))


def _row_groups(paths: list[Path], schema: pa.Schema) -> Iterator[pa.Table]:
    """The row groups of ``paths`` in order, each cast to ``schema``."""
    for path in paths:
        with pq.ParquetFile(path) as file:
            for i in range(file.num_row_groups):
                yield conform(file.read_row_group(i), schema)


def write_parquet(path: Path, schema: pa.Schema, row_groups: Iterable[pa.Table],
                  compression: str) -> None:
    """A Parquet file of ``schema`` holding one row group per table of ``row_groups``."""
    with pq.ParquetWriter(path, schema, compression=compression, **WRITER_OPTIONS) as writer:
        for group in row_groups:
            _write_group(writer, group)


class DamagedPart(ValueError):
    """A committed part that cannot be read, or is not the file its record says."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: {why}")
        self.path = path


def unify_parts(paths: list[Path], compression: str,
                check: Callable[[Path], str | None] = lambda path: None,
                ) -> Iterator[tuple[Path, Path]]:
    """Give the parts of one dataset one schema, the ``unified_schema`` of their footers, so
    that their folder reads as one table: each part whose schema differs is rewritten, row group
    by row group, to a temporary file; yields (temporary, part) for the caller to put in place.
    A part whose footer cannot be read, or that ``check`` (before it is rewritten) says is
    damaged, raises :class:`DamagedPart`."""
    schemas = []
    for path in paths:
        try:
            schemas.append(pq.read_schema(path))
        except (pa.ArrowException, OSError) as err:
            raise DamagedPart(path, f"unreadable Parquet footer ({err})") from None
    target = unified_schema(schemas)
    for path, schema in zip(paths, schemas, strict=True):
        if not schema.equals(target):
            why = check(path)
            if why is not None:
                raise DamagedPart(path, why)
            tmp = path.with_name(f".{path.name}.tmp")
            write_parquet(tmp, target, _row_groups([path], target), compression)
            yield tmp, path
