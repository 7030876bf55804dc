"""A Parquet part's bytes are a function of its rows, not of how they were chunked."""

from __future__ import annotations

import random
from itertools import pairwise

import pyarrow as pa

from curator.io.parquet import ParquetPartWriter


def _write(path, tables: list[pa.Table]) -> bytes:
    writer = ParquetPartWriter(path, 10_000, "snappy")
    for table in tables:
        writer.write(table)
    writer.close()
    return path.read_bytes()


def test_page_cuts_do_not_follow_the_chunking(tmp_path):
    rng = random.Random(1)
    texts = ["".join(rng.choice("abcdefghij ") for _ in range(rng.randint(50, 3000)))
             for _ in range(5000)]
    rows = pa.table({"id": [str(i) for i in range(5000)], "text": texts})
    whole = _write(tmp_path / "whole.parquet", [rows])
    for cuts in ([700, 2300, 4100], [333], [1024, 2048, 4999]):
        bounds = [0, *cuts, rows.num_rows]
        pieces = [rows.slice(a, b - a).combine_chunks() for a, b in pairwise(bounds)]
        assert _write(tmp_path / "cut.parquet", pieces) == whole, cuts
        # the same pieces handed over as one chunked table
        assert _write(tmp_path / "chunked.parquet", [pa.concat_tables(pieces)]) == whole, cuts
