"""Sink stages that write documents: JSON Lines and Parquet, one part per input shard."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from curator.io.jsonl import JsonlPartWriter
from curator.io.parquet import ParquetPartWriter, PartFormat
from curator.stages.base import ShardContext, Sink


class WriteJsonl(Sink):
    """Write kept documents as JSON Lines, one ``part-NNNNN.jsonl[.gz|.zst]`` per shard."""

    type = "write_jsonl"

    path: str | None = Field(None, description="Output directory; default <output>/<stage name>.")
    compression: Literal["none", "gzip", "zstd"] = "none"

    def open(self, ctx: ShardContext) -> JsonlPartWriter:
        suffix = {"none": "", "gzip": ".gz", "zstd": ".zst"}[self.compression]
        final = self.output_dir(ctx.run_dir, ctx.stage_name) / f"{ctx.shard.part}.jsonl{suffix}"
        return JsonlPartWriter(ctx.temporary_for(final), self.compression)


class WriteParquet(Sink):
    """Write kept documents to Parquet, one ``part-NNNNN.parquet`` per shard; all parts share
    one schema (a shard without some column gets it as nulls)."""

    type = "write_parquet"
    holds_gil = False

    path: str | None = Field(None, description="Output directory; default <output>/<stage name>.")
    compression: Literal["snappy", "zstd", "gzip", "lz4", "none"] = "snappy"
    row_group_rows: int = Field(10_000, gt=0, description="Rows per row group.")

    def open(self, ctx: ShardContext) -> ParquetPartWriter:
        final = self.output_dir(ctx.run_dir, ctx.stage_name) / f"{ctx.shard.part}.parquet"
        return ParquetPartWriter(ctx.temporary_for(final), self.row_group_rows, self.compression)

    def parquet_parts(self, run_dir: Path, stage_name: str) -> tuple[Path, str] | None:
        return self.output_dir(run_dir, stage_name), self.compression

    def part_format(self) -> PartFormat:
        return PartFormat(self.row_group_rows, self.compression)
