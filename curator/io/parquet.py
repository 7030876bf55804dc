"""Parquet reader and writer. Row groups are cut at fixed row counts, so a shard's bytes do not
depend on how the pipeline batched it; the parts of a dataset share one schema.

The reader fails a bad file alone (docs/limits.md): a 0-byte file, one whose footer cannot be
read, a row group whose data is damaged or expands more than ``max_expansion_ratio`` times its
stored bytes, each is one failure naming the file and the first row lost; the other row groups
and files go on. Rows are decoded ``READ_BATCH_ROWS`` at a time and gathered into batches of
about ``batch_bytes``, the expansion checked at each, so that a value repeated through a
dictionary is decoded at most that many times before the check.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from curator.batch import ID, TEXT, Failure, Shard, SourceBatch
from curator.io import streams
from curator.io.files import file_failure, is_empty_file, open_binary
from curator.io.records import ColumnMap
from curator.io.schema import conform, unified_schema
from curator.io.streams import MAX_EXPANSION_RATIO

#: Marks a shard that is a run of a file's row groups: ``<url>#row_groups=<first>-<end>``.
ROW_GROUPS_MARK = "#row_groups="
#: Most rows decoded at a time (and measured) before they join a batch.
READ_BATCH_ROWS = 1024
#: What the reader catches from Arrow reading a damaged file.
_DAMAGE = (pa.ArrowException, OSError, ValueError)


def row_group_shards(shard: Shard, shard_bytes: int) -> list[Shard]:
    """``shard`` (one Parquet file) as runs of consecutive row groups of about ``shard_bytes``
    uncompressed bytes each; the file itself where it has one run. Each keeps the file's label,
    so ids made from positions and error positions are those of the whole file. A file whose
    footer cannot be read is one shard, which fails when it is read."""
    if is_empty_file(shard):
        return [shard]
    try:
        with open_binary(shard.path) as raw:
            meta = pq.ParquetFile(raw).metadata
    except _DAMAGE:
        return [shard]
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


def decoded_bytes(batch: pa.RecordBatch) -> int:
    """The bytes of ``batch`` with its dictionary-encoded strings decoded."""
    total = 0
    for column in batch.columns:
        if pa.types.is_dictionary(column.type) and (
                pa.types.is_string(column.type.value_type)
                or pa.types.is_binary(column.type.value_type)):
            lengths = pc.binary_length(column.dictionary)
            total += (pc.sum(pc.take(lengths, column.indices)).as_py() or 0) + column.nbytes
        else:
            total += column.nbytes
    return total


def _stored_bytes(group: pq.RowGroupMetaData) -> int:
    return sum(group.column(j).total_compressed_size for j in range(group.num_columns))


def _split_row_groups(path: str) -> tuple[str, range | None]:
    url, mark, spec = path.partition(ROW_GROUPS_MARK)
    if not mark:
        return path, None
    first, end = spec.split("-")
    return url, range(int(first), int(end))


def read_parquet_batches(shard: Shard, batch_bytes: int, stage: str, columns: ColumnMap,
                         selected: list[str] | None = None, on_damage: str = "fail",
                         max_expansion_ratio: float = MAX_EXPANSION_RATIO,
                         ) -> Iterator[SourceBatch]:
    """Stream a Parquet file (or the run of its row groups that ``shard`` names) in batches of
    about ``batch_bytes``; positions count rows from the file's start (an empty file: one empty
    batch, which tells the writers its columns). A bad file or row group fails as the module
    docstring says; ``on_damage="raise"`` raises instead (files the run wrote itself)."""
    url, groups = _split_row_groups(shard.path)
    if groups is None and is_empty_file(shard):
        if on_damage == "raise":
            raise OSError(f"{url}: empty file (0 bytes)")
        yield file_failure(shard, stage, "empty file (0 bytes)", "empty_file")
        return
    with open_binary(url) as raw:
        try:
            file = pq.ParquetFile(raw)
        except _DAMAGE as err:
            if on_damage == "raise":
                raise
            yield file_failure(shard, stage, f"not a readable Parquet file ({err})",
                               "unreadable_file")
            return
        meta = file.metadata
        if meta.num_rows == 0:
            empty = file.schema_arrow.empty_table()
            yield columns.normalise(empty.select(selected) if selected else empty,
                                    np.arange(0), stage, shard)
            return
        yield from _RowGroups(file, shard, stage, columns, selected, batch_bytes,
                              max_expansion_ratio, on_damage == "raise").read(groups)


class _RowGroups:
    """The batches of a file's row groups: runs of consecutive row groups, decoded
    ``READ_BATCH_ROWS`` at a time; a row group whose footer says it expands too much fails
    alone, and so do the rows from where the data is damaged or the run expands too much."""

    def __init__(self, file: pq.ParquetFile, shard: Shard, stage: str, columns: ColumnMap,
                 selected: list[str] | None, batch_bytes: int, max_ratio: float,
                 strict: bool) -> None:
        self.file, self.shard, self.stage, self.columns = file, shard, stage, columns
        self.selected, self.batch_bytes, self.max_ratio = selected, batch_bytes, max_ratio
        self.strict = strict  # raise, as before, instead of failing
        meta = file.metadata
        groups = [meta.row_group(i) for i in range(meta.num_row_groups)]
        self.first_row = np.cumsum([0] + [g.num_rows for g in groups])
        self.stored_before = np.cumsum([0] + [_stored_bytes(g) for g in groups])

    def read(self, groups: range | None) -> Iterator[SourceBatch]:
        run: list[int] = []
        for group in groups if groups is not None else range(self.file.num_row_groups):
            meta = self.file.metadata.row_group(group)
            if self.strict or self._within(meta.total_byte_size, _stored_bytes(meta)):
                run.append(group)
                continue
            yield from self._run(run)
            run = []
            yield self._failure(group, f"row group {group} decodes to {meta.total_byte_size} "
                                f"bytes from {_stored_bytes(meta)} stored, more than "
                                f"max_expansion_ratio={self.max_ratio:g} times; not read",
                                "over_limit")
        yield from self._run(run)

    def _within(self, decoded: int, stored: int) -> bool:
        return decoded <= streams.RATIO_GRACE_BYTES + self.max_ratio * stored

    def _run(self, run: list[int], resume_at: int | None = None) -> Iterator[SourceBatch]:
        """The batches of consecutive row groups ``run`` (from row ``resume_at`` of the file);
        where some are damaged or expand too much, each row group from there is read alone, so
        that only the rows from the trouble to the end of its row group are lost."""
        if not run:
            return
        position = int(self.first_row[run[0]])
        resume_at = position if resume_at is None else resume_at
        pending: list[pa.RecordBatch] = []
        pending_bytes = decoded = 0
        why = reason = None
        batches = self.file.iter_batches(batch_size=READ_BATCH_ROWS, columns=self.selected,
                                         row_groups=run)
        while True:
            try:
                batch = next(batches, None)
            except _DAMAGE as err:
                if self.strict:
                    raise
                why, reason = f"damaged Parquet data ({err})", "damaged"
                break
            if batch is None:
                break
            decoded += decoded_bytes(batch)
            reached = self._group_of(position + batch.num_rows - 1)  # stored bytes read so far
            stored = int(self.stored_before[reached + 1] - self.stored_before[run[0]])
            if not (self.strict or self._within(decoded, stored)):
                why = (f"rows decode to more than {decoded} bytes from {stored} stored, more "
                       f"than max_expansion_ratio={self.max_ratio:g} times")
                reason = "over_limit"
                break
            if position + batch.num_rows <= resume_at:  # read before the trouble
                position += batch.num_rows
                continue
            batch = batch.slice(max(0, resume_at - position))
            position = max(position, resume_at)
            pending.append(batch)
            pending_bytes += batch.nbytes
            position += batch.num_rows
            if pending_bytes >= self.batch_bytes:
                yield self._batch(pending, position)
                pending, pending_bytes = [], 0
        if pending:
            yield self._batch(pending, position)
        if why is None:
            return
        if len(run) > 1:  # each row group from the trouble on, alone
            first = self._group_of(position)
            for group in run[run.index(first):] if first in run else []:
                yield from self._run([group], position if group == first else None)
            return
        lost, last = max(position, resume_at), int(self.first_row[run[0] + 1]) - 1
        yield self._failure(None, f"rows {lost}-{last}: {why}; not read", reason, lost)

    def _group_of(self, row: int) -> int:
        return int(np.searchsorted(self.first_row, row, side="right")) - 1

    def _batch(self, batches: list[pa.RecordBatch], end: int) -> SourceBatch:
        """``batches`` as one batch, their rows ending before row ``end`` of the file."""
        table = pa.Table.from_batches(batches)
        return self.columns.normalise(table, np.arange(end - table.num_rows, end), self.stage,
                                      self.shard, check_utf8=True)

    def _failure(self, group: int | None, error: str, reason: str | None,
                 row: int | None = None) -> SourceBatch:
        """One failure for the rows lost, at the first of them."""
        line = int(self.first_row[group]) if row is None else row
        return SourceBatch(pa.table({}), [Failure(stage=self.stage, error=error,
                                                  file=self.shard.label or self.shard.path,
                                                  line=line, reason=reason)])


def read_part(path: str | Path, columns: list[str] | None = None) -> pa.Table:
    """A dedup phase's part, decoded by the calling task's thread alone: the phase already runs
    a task per core, and each of Arrow's pool threads would keep the pages it freed (mimalloc's
    per-thread heaps), which a task's ``memory_returned`` cannot give back; on a 16-core node
    that made the peak grow with the number of tasks."""
    return pq.read_table(path, columns=columns, use_threads=False)


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


@dataclass(frozen=True)
class PartFormat:
    """How a Parquet writer lays out a shard's file (rows per row group, compression): what a
    dataset stage's removal writes its parts in when the next segment is only that writer, so
    that the writer publishes the part as it is instead of decoding and encoding it again.

    Beside such a part lies what proves it (``figures_path``): the layout, the part's checksum
    and the figures of its rows the writer counts instead of reading them (``describe``)."""

    row_group_rows: int
    compression: str

    #: What ``describe`` writes besides the layout and the part's checksum.
    FIGURES = frozenset({"rows", "bytes", "lengths", "languages"})

    def write(self, table: pa.Table, path: Path) -> None:
        """``table`` to ``path`` as ``ParquetPartWriter`` writes a shard of those rows."""
        writer = ParquetPartWriter(path, self.row_group_rows, self.compression)
        writer.write(table)
        writer.close()

    @staticmethod
    def figures_path(part: Path) -> Path:
        """Where the proof of a part written in a writer's layout lies, beside it."""
        return part.with_suffix(".kept.json")

    def describe(self, path: Path, figures: dict[str, Any], checksum: str) -> None:
        """Write to ``path`` (a temporary for ``figures_path``) that the part whose checksum is
        ``checksum`` was written by ``write`` in this layout, with its rows' ``figures``."""
        path.write_bytes(orjson.dumps({**figures, "layout": self._layout(), "part": checksum}))

    def described(self, part: Path, checksum: str) -> dict[str, Any] | None:
        """The figures beside ``part`` when they say it is the file of ``checksum`` written in
        this layout; else None (the part is decoded and written again)."""
        try:
            found = orjson.loads(self.figures_path(part).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        if not isinstance(found, dict) or not checksum or found.get("part") != checksum \
                or found.get("layout") != self._layout() or not found.keys() >= self.FIGURES:
            return None
        return found

    def _layout(self) -> list[int | str]:
        return [self.row_group_rows, self.compression]


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
