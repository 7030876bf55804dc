"""Parquet reader and writer. Row groups are cut at fixed row counts, so a shard's bytes do not
depend on how the pipeline batched it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field

from curator.batch import Failure, concat, conform
from curator.io.files import open_binary
from curator.io.records import ColumnMap
from curator.stages.base import FileSource, Shard, ShardContext, Sink, SourceBatch


class ReadParquet(FileSource):
    """Read Parquet files (local, http(s)://, s3://), one shard per file."""

    type = "read_parquet"
    holds_gil = False

    columns: list[str] | None = Field(None, description="Columns to read; default all.")

    def read(self, shard: Shard, batch_bytes: int) -> Iterator[SourceBatch]:
        yield from read_parquet_batches(shard, batch_bytes, self.name or self.type,
                                        ColumnMap(self.text_field, self.id_field), self.columns)


def read_parquet_batches(shard: Shard, batch_bytes: int, stage: str, columns: ColumnMap,
                         selected: list[str] | None = None) -> Iterator[SourceBatch]:
    """Stream a Parquet file in batches of about ``batch_bytes``."""
    with open_binary(shard.path) as raw:
        file = pq.ParquetFile(raw)
        meta = file.metadata
        rows_per_batch = max(1, batch_bytes // _bytes_per_row(meta))
        start = 0
        for record_batch in file.iter_batches(batch_size=rows_per_batch, columns=selected):
            table = pa.Table.from_batches([record_batch])
            positions = np.arange(start, start + table.num_rows)
            start += table.num_rows
            yield columns.normalise(table, positions, stage, shard)


def _bytes_per_row(meta: pq.FileMetaData) -> int:
    total = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    return max(1, total // max(1, meta.num_rows))


class ParquetPartWriter:
    """Buffers rows and writes row groups of exactly ``row_group_rows`` rows."""

    def __init__(self, path: Path, row_group_rows: int, compression: str, stage: str) -> None:
        self.path, self.row_group_rows, self.compression = path, row_group_rows, compression
        self.stage = stage
        self.writer: pq.ParquetWriter | None = None
        self.buffer: list[pa.Table] = []
        self.buffered = 0

    def write(self, table: pa.Table, payload: object = None) -> list[Failure]:
        if table.num_rows == 0:
            return []
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.path, table.schema, compression=self.compression)
        try:
            table = conform(table, self.writer.schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as err:
            return _schema_failures(table, self.stage, err)
        self.buffer.append(table)
        self.buffered += table.num_rows
        if self.buffered >= self.row_group_rows:
            self._flush(final=False)
        return []

    def _flush(self, final: bool) -> None:
        data = concat(self.buffer)
        cut = data.num_rows if final else data.num_rows - data.num_rows % self.row_group_rows
        for start in range(0, cut, self.row_group_rows):
            group = data.slice(start, min(self.row_group_rows, cut - start))
            self.writer.write_table(group, row_group_size=self.row_group_rows)
        rest = data.slice(cut)
        self.buffer, self.buffered = ([rest], rest.num_rows) if rest.num_rows else ([], 0)

    def close(self) -> None:
        if self.writer is None:
            pq.write_table(pa.table({"id": pa.array([], pa.string()),
                                     "text": pa.array([], pa.string())}), self.path)
            return
        if self.buffered:
            self._flush(final=True)
        self.writer.close()


def _schema_failures(table: pa.Table, stage: str, err: Exception) -> list[Failure]:
    error = f"schema differs from earlier rows of this shard: {err}"
    return [Failure(stage=stage, error=error, id=i) for i in table.column("id").to_pylist()]


class WriteParquet(Sink):
    """Write kept documents to Parquet, one ``part-NNNNN.parquet`` per shard."""

    type = "write_parquet"
    holds_gil = False

    path: str | None = Field(None, description="Output directory; default <output>/<stage name>.")
    compression: Literal["snappy", "zstd", "gzip", "lz4", "none"] = "snappy"
    row_group_rows: int = Field(10_000, gt=0, description="Rows per row group.")

    def open(self, ctx: ShardContext) -> ParquetPartWriter:
        final = self.output_dir(ctx.run_dir, ctx.stage_name) / f"{ctx.shard.part}.parquet"
        return ParquetPartWriter(ctx.temporary_for(final), self.row_group_rows, self.compression,
                              ctx.stage_name)
