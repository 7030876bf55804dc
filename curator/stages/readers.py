"""Source stages over files: JSON Lines and Parquet, one shard per file."""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import Field

from curator.batch import Shard, SourceBatch
from curator.io.jsonl import read_jsonl_batches
from curator.io.parquet import read_parquet_batches
from curator.io.records import ColumnMap
from curator.stages.base import FileSource


class ReadJsonl(FileSource):
    """Read JSON Lines files (plain, .gz, .zst; local, http(s)://, s3://), one shard per file."""

    type = "read_jsonl"
    holds_gil = False

    max_line_bytes: int = Field(512 << 20, gt=0, description="Longer lines fail and are skipped.")

    def read(self, shard: Shard, batch_bytes: int) -> Iterator[SourceBatch]:
        yield from read_jsonl_batches(shard, batch_bytes, self.name or self.type,
                                      ColumnMap(self.text_field, self.id_field),
                                      self.max_line_bytes)


class ReadParquet(FileSource):
    """Read Parquet files (local, http(s)://, s3://), one shard per file."""

    type = "read_parquet"
    holds_gil = False

    columns: list[str] | None = Field(None, description="Columns to read; default all.")

    def read(self, shard: Shard, batch_bytes: int) -> Iterator[SourceBatch]:
        yield from read_parquet_batches(shard, batch_bytes, self.name or self.type,
                                        ColumnMap(self.text_field, self.id_field), self.columns)
