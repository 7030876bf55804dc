"""``read_warc``: WARC files (local, globs, http(s)://, s3://) -> HTML documents."""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import Field

from curator.batch import Shard, SourceBatch
from curator.io.files import list_shards
from curator.io.warc import WarcLimits, read_warc_batches
from curator.stages.base import Source


class ReadWarc(Source):
    """Read the HTML ``response`` records of WARC files (plain or gzip; ARC through warcio),
    one shard per file. ``text`` is the page's decoded HTML: follow with ``extract_html``.
    Columns: id (WARC-Record-ID), text, date, url, warc_file, warc_record_id."""

    type = "read_warc"
    version = 3  # 3: a record with damaged framing is never kept; bounded records (WarcLimits)
    requires = {"fastwarc": "extract", "warcio": "extract", "resiliparse": "extract"}

    path: str | list[str] = Field(description="WARC file, glob or list of them (local, "
                                  "http(s)://, s3://).")
    max_record_bytes: int = Field(64 << 20, gt=0, description="An HTML response's block (and "
                                  "its decoded payload) over this fails unread (record_too_large).")
    max_ratio: float = Field(100.0, gt=1, description="An HTTP body inflating more than this many "
                             "times its size fails (decompression_bomb).")

    def shards(self) -> list[Shard]:
        return list_shards(self.path)

    def read(self, shard: Shard, batch_bytes: int) -> Iterator[SourceBatch]:
        yield from read_warc_batches(shard, batch_bytes, self.name or self.type,
                                     WarcLimits(self.max_record_bytes, self.max_ratio))
