"""Source stages over files: JSON Lines (one shard per file) and Parquet (one or more)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from pydantic import Field

from curator.batch import Shard, SourceBatch
from curator.io.jsonl import read_jsonl_batches
from curator.io.parquet import read_parquet_batches, row_group_shards
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
    """Read Parquet files (local, http(s)://, s3://): a file is one shard, or several where its
    row groups hold more than ``shard_bytes`` (each shard a run of consecutive row groups)."""

    type = "read_parquet"
    holds_gil = False

    columns: list[str] | None = Field(None, description="Columns to read; default all.")
    shard_bytes: int = Field(
        64 << 20, gt=0, description="Uncompressed bytes of row groups per shard: a larger file "
        "is read by several tasks at once (ids and error positions stay the file's).")

    def shards(self) -> list[Shard]:
        files = super().shards()
        with ThreadPoolExecutor(min(16, len(files))) as pool:  # footers of remote files
            split = list(pool.map(lambda f: row_group_shards(f, self.shard_bytes), files))
        return [replace(s, index=i) for i, s in enumerate(s for runs in split for s in runs)]

    def read(self, shard: Shard, batch_bytes: int) -> Iterator[SourceBatch]:
        yield from read_parquet_batches(shard, batch_bytes, self.name or self.type,
                                        ColumnMap(self.text_field, self.id_field), self.columns)
