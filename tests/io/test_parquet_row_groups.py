"""A Parquet file whose row groups hold more than ``shard_bytes`` is read by several tasks, each
a run of consecutive row groups: the documents, their generated ids and the failures' positions
are those of the file read whole, and a rerun skips every run."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from curator import Pipeline, ReadParquet, WriteParquet
from tests.conftest import assert_accounting, sample_documents

ROWS_PER_GROUP = 10


def _big_file(path) -> int:
    """The sample (no id column; every 7th text null) in row groups of ROWS_PER_GROUP rows."""
    texts = [d["text"] for d in sample_documents()]
    texts = [None if i % 7 == 3 else t for i, t in enumerate(texts)]
    pq.write_table(pa.table({"text": texts, "n": list(range(len(texts)))}), path,
                   row_group_size=ROWS_PER_GROUP)
    return pq.ParquetFile(path).metadata.num_row_groups


def _run(src, tmp_path, name: str, shard_bytes: int) -> tuple[list, list, object]:
    run = tmp_path / name
    # every 7th text is null: 14 % of the file fails in the reader, over the default budget
    result = Pipeline([ReadParquet(path=str(src), shard_bytes=shard_bytes), WriteParquet()],
                      output=str(run), max_failed_fraction=0.2).run(executor="dask", workers=2,
                                                                    progress=False)
    assert_accounting(run)
    rows = pq.read_table(run / "write_parquet").sort_by("n").to_pylist()
    errors = sorted((e["file"], e["line"]) for p in (run / "errors").rglob("*.jsonl")
                    for e in map(json.loads, p.read_text().splitlines()))
    return rows, errors, result


def test_row_group_runs_read_as_the_whole_file(tmp_path):
    src = tmp_path / "big.parquet"
    groups = _big_file(src)
    meta = pq.ParquetFile(src).metadata
    stored = sum(meta.row_group(i).column(j).total_compressed_size
                 for i in range(groups) for j in range(meta.num_columns))

    shards = ReadParquet(path=str(src), shard_bytes=1).shards()  # each row group a run
    assert len(shards) == groups > 10
    assert [s.index for s in shards] == list(range(groups))
    assert {s.label for s in shards} == {"big.parquet"}
    assert sum(s.size for s in shards) == stored  # progress counts the file's bytes once
    assert len(ReadParquet(path=str(src)).shards()) == 1  # 64 MiB: the file whole
    half = sum(meta.row_group(i).total_byte_size for i in range(groups)) // 2
    assert len(ReadParquet(path=str(src), shard_bytes=half).shards()) == 2

    whole_rows, whole_errors, _ = _run(src, tmp_path, "whole", 1 << 30)
    split_rows, split_errors, first = _run(src, tmp_path, "split", 1)
    assert first.stats["shards"] == len(shards) and first.shards_run == len(shards)
    assert split_rows == whole_rows  # ids from positions: ``big.parquet:<row in the file>``
    assert whole_rows[-1]["id"] == f"big.parquet:{meta.num_rows - 1}"
    assert split_errors == whole_errors
    assert [line for _, line in split_errors] == list(range(3, meta.num_rows, 7))

    _, _, again = _run(src, tmp_path, "split", 1)
    assert again.shards_run == 0 and again.shards_skipped == len(shards)


def test_a_file_that_is_not_parquet_is_named_when_the_shards_are_listed(tmp_path):
    pq.write_table(pa.table({"text": ["a document"]}), tmp_path / "good.parquet")
    (tmp_path / "broken.parquet").write_bytes(b"not a parquet file")
    shards = ReadParquet(path=str(tmp_path / "*.parquet")).shards()
    assert sorted(Path(s.path).name for s in shards) == ["broken.parquet", "good.parquet"]
    run = tmp_path / "run"
    Pipeline([ReadParquet(path=str(tmp_path / "*.parquet")), WriteParquet()],
             output=str(run), max_failed_fraction=1.0).run(executor="local", progress=False)
    [error] = [json.loads(line) for f in (run / "errors").rglob("*.jsonl")
               for line in f.read_text().splitlines()]
    assert error["reason"] == "unreadable_file" and "broken.parquet" in error["file"]
    assert pq.read_table(run / "write_parquet").column("text").to_pylist() == ["a document"]
