"""Hostile input at the readers (issue 27): every decompression and parse is bounded by the
limits of docs/limits.md, and an input past one fails alone with its reason and position.
Small bombs against small configured limits; ``tests/hostile`` runs the real-size ones through
``curate run``."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from curator.batch import Shard
from curator.io import streams
from curator.io.jsonl import MAX_JSON_FIELDS, read_jsonl_batches
from curator.io.parquet import read_parquet_batches, row_group_shards
from curator.io.records import ColumnMap
from curator.stages.decontaminate import readers
from curator.stages.decontaminate.readers import TaskFileError
from curator.stages.decontaminate.tasks import Task, task_items
from tests.conftest import ROOT

COMPRESS = {"gzip": lambda b: gzip.compress(b, 6),
            "zstd": lambda b: zstandard.ZstdCompressor(level=3).compress(b),
            "bz2": bz2.compress, "xz": lambda b: lzma.compress(b, preset=1)}
EXT = {"gzip": "gz", "zstd": "zst", "bz2": "bz2", "xz": "xz"}
GRACE = 1 << 20  # the ratio's grace in these tests


@pytest.fixture(autouse=True)
def small_grace(monkeypatch):
    monkeypatch.setattr(streams, "RATIO_GRACE_BYTES", GRACE)


def _read(path, **options) -> tuple[list[str], list]:
    batches = list(read_jsonl_batches(Shard(0, str(path), label=path.name), 1 << 20, "read",
                                      ColumnMap(), options.pop("max_line_bytes", 1 << 20),
                                      **options))
    texts = [t for b in batches if b.table.num_rows for t in b.table.column("text").to_pylist()]
    return texts, [f for b in batches for f in b.failed]


# --------------------------------------------------------------------------- decompression
@pytest.mark.parametrize("codec", list(COMPRESS))
def test_a_decompression_bomb_stops_at_the_ratio_in_bounded_steps(codec):
    bomb = COMPRESS[codec](b"\0" * (64 << 20))  # 64 MiB from a few KB
    out, largest = 0, 0
    with pytest.raises(streams.OverLimit, match="max_expansion_ratio=10 times"):
        for chunk in streams.decompressed_chunks(io.BytesIO(bomb), codec, max_ratio=10):
            out += len(chunk)
            largest = max(largest, len(chunk))
    assert out <= GRACE + 10 * len(bomb)
    assert largest <= streams.OUT_CHUNK


@pytest.mark.parametrize("codec", list(COMPRESS))
def test_concatenated_members_and_padding_still_read_whole(codec):
    data = b"".join(f'{{"text": "line {i}"}}\n'.encode() for i in range(20_000))
    packed = COMPRESS[codec](data) + COMPRESS[codec](data) + b"\0" * 100
    out = b"".join(streams.decompressed_chunks(io.BytesIO(packed), codec))
    assert out == data + data


@pytest.mark.parametrize("codec", list(COMPRESS))
def test_a_compressed_jsonl_bomb_fails_alone_after_the_lines_before_it(tmp_path, codec):
    path = tmp_path / f"bomb.jsonl.{EXT[codec]}"
    head = b'{"text": "one"}\n{"text": "two"}\n'
    path.write_bytes(COMPRESS[codec](head) + COMPRESS[codec](b'{"text": "' + b"a" * (32 << 20)))
    texts, failed = _read(path, max_line_bytes=8 << 20, max_expansion_ratio=10)
    assert texts == ["one", "two"]
    assert failed[-1].reason == "over_limit" and "max_expansion_ratio=10" in failed[-1].error
    assert failed[-1].line >= 3 and failed[-1].offset >= len(head)


@pytest.mark.parametrize("codec", ["bz2", "xz"])
def test_bz2_and_xz_jsonl_are_read(tmp_path, codec):
    path = tmp_path / f"ok.jsonl.{EXT[codec]}"
    path.write_bytes(COMPRESS[codec](b'{"text": "one"}\n{"text": "two"}\n'))
    assert _read(path) == (["one", "two"], [])


def test_a_task_file_bomb_is_refused_in_one_line(tmp_path, monkeypatch):
    path = tmp_path / "qa.jsonl.gz"
    line = json.dumps({"question": "q " * 500, "answer": "a"}).encode() + b"\n"
    path.write_bytes(gzip.compress(line * 20_000))  # 20 MB: ratio ~500
    task = Task(name="gsm8k", path=str(path))
    with pytest.raises(TaskFileError, match=r"qa\.jsonl\.gz: refused.*max_expansion_ratio"):
        list(task_items(task, path, "qa.jsonl.gz"))
    monkeypatch.setattr(streams, "RATIO_GRACE_BYTES", 64 << 20)
    monkeypatch.setattr(readers, "MAX_TASK_FILE_BYTES", 4 << 20)
    with pytest.raises(TaskFileError, match=r"refused.*MAX_TASK_FILE_BYTES=4194304"):
        list(task_items(task, path, "qa.jsonl.gz"))


@pytest.mark.parametrize("name,content", [
    ("deep.json", b"[" * 100_000 + b"]" * 100_000),
    ("deep.jsonl", b'{"question": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n")])
def test_a_task_file_nested_too_deeply_fails_in_one_line(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    task = Task(name="t", path=str(path), fields=["question"])
    with pytest.raises(TaskFileError, match="nested too deeply"):
        list(task_items(task, path, name))


def test_a_parquet_task_file_is_counted_before_it_is_decoded(tmp_path):
    path = tmp_path / "qa.parquet"
    questions = pa.DictionaryArray.from_arrays(pa.array([0] * 4096, pa.int32()),
                                               pa.array(["q" * (64 << 10)]))  # 256 MiB
    pq.write_table(pa.table({"question": questions}), path, compression="zstd",
                   store_schema=False)
    task = Task(name="t", path=str(path), fields=["question"])
    with pytest.raises(TaskFileError, match="refused at row 0"):
        list(task_items(task, path, "qa.parquet"))


# ------------------------------------------------------------------------------ JSON parse
def test_deep_nesting_fails_its_line_without_crashing_the_parser(tmp_path):
    """Arrow's JSON parser crashes the process on ~5,000 levels: the reader never gives it one
    (run in a child process, so that a crash fails this test instead of the session)."""
    path = tmp_path / "deep.jsonl"
    deep = b'{"text": "x", "m": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"
    path.write_bytes(b'{"text": "before"}\n' + deep + b'\n{"text": "after"}\n')
    code = ("import sys; from pathlib import Path; from tests.io.test_hostile_readers import "
            "_read; t, f = _read(Path(sys.argv[1])); print([t, [(x.line, x.reason) for x in f]])")
    done = subprocess.run([sys.executable, "-c", code, str(path)], cwd=ROOT, text=True,
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[['before', 'after'], [(2, 'too_deep')]]"


def test_nesting_and_keys_past_the_limits_fail_their_line(tmp_path):
    path = tmp_path / "shapes.jsonl"
    lines = [{"text": "ok", "m": [[[1]]]}, {"text": "deep", "m": json.loads("[" * 150 + "]" * 150)},
             {"text": "wide", **{f"k{i}": 0 for i in range(MAX_JSON_FIELDS + 1)}},
             {"text": "brackets in text are no nesting " + "[{" * 600}]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    texts, failed = _read(path)
    assert texts == ["ok", lines[3]["text"]]
    assert [(f.line, f.reason) for f in failed] == [(2, "too_deep"), (3, "too_many_fields")]
    assert all(f.offset is not None for f in failed)


# --------------------------------------------------------------------------------- Parquet
def _parquet(path, groups: list[pa.Table], **options) -> Shard:
    with pq.ParquetWriter(path, groups[0].schema, **options) as writer:
        for group in groups:
            writer.write_table(group)
    return Shard(0, str(path), label=path.name)


def _read_parquet(shard: Shard, **options) -> tuple[list[str], list]:
    batches = [b for s in row_group_shards(shard, 1 << 30)
               for b in read_parquet_batches(s, 1 << 20, "read", ColumnMap(), **options)]
    return ([i for b in batches if b.table.num_rows for i in b.table.column("id").to_pylist()],
            [f for b in batches for f in b.failed])


def _rows(first: int, n: int, text: str | None = None) -> pa.Table:
    return pa.table({"id": [f"r{i}" for i in range(first, first + n)],
                     "text": [text or f"row {i}" for i in range(first, first + n)]})


def test_a_parquet_row_group_that_expands_too_much_fails_alone(tmp_path):
    shard = _parquet(tmp_path / "bomb.parquet",
                     [_rows(0, 2), _rows(2, 1, "a" * (8 << 20)), _rows(3, 2)], compression="zstd")
    ids, failed = _read_parquet(shard, max_expansion_ratio=10)
    assert ids == ["r0", "r1", "r3", "r4"]
    assert [(f.line, f.reason) for f in failed] == [(2, "over_limit")]
    assert "row group 1" in failed[0].error


@pytest.mark.parametrize("store_schema", [True, False])
@pytest.mark.parametrize("then", ["small", "large"])  # large: stored bytes enough for the bomb
def test_a_parquet_dictionary_bomb_fails_alone(tmp_path, store_schema, then):
    repeated = pa.DictionaryArray.from_arrays(pa.array([0] * 4096, pa.int32()),
                                              pa.array(["b" * (16 << 10)]))  # 64 MiB
    bomb = pa.table({"id": [f"d{i}" for i in range(4096)], "text": repeated})
    schema = bomb.schema
    after = _rows(4098, 2, os.urandom(4 << 20).hex() if then == "large" else None)
    shard = _parquet(tmp_path / "dict.parquet", [_rows(0, 2).cast(schema), bomb,
                                                 after.cast(schema)],
                     compression="zstd", store_schema=store_schema)
    ids, failed = _read_parquet(shard, max_expansion_ratio=10)
    assert ids == ["r0", "r1", "r4098", "r4099"]
    assert [(f.line, f.reason) for f in failed] == [(2, "over_limit")]


def test_a_damaged_parquet_row_group_loses_only_its_rows(tmp_path):
    path = tmp_path / "pages.parquet"
    shard = _parquet(path, [_rows(0, 3), _rows(3, 3), _rows(6, 3)], compression="none")
    page = pq.ParquetFile(path).metadata.row_group(1).column(1).data_page_offset
    raw = bytearray(path.read_bytes())
    raw[page:page + 16] = b"\xff" * 16  # the text page header of the middle row group
    path.write_bytes(bytes(raw))
    ids, failed = _read_parquet(shard)
    assert ids == ["r0", "r1", "r2", "r6", "r7", "r8"]
    assert [(f.line, f.reason) for f in failed] == [(3, "damaged")]
    assert failed[0].error.startswith("rows 3-5: damaged Parquet data")


def test_parquet_text_that_is_not_utf8_fails_its_row(tmp_path):
    values = [b"fine", b"caf\xe9", b"also fine"]
    offsets = pa.array([0, 4, 8, 17], pa.int32())
    text = pa.Array.from_buffers(pa.string(), 3, [None, offsets.buffers()[1],
                                                  pa.py_buffer(b"".join(values))])
    pq.write_table(pa.table({"id": ["a", "b", "c"], "text": text}), tmp_path / "u.parquet")
    ids, failed = _read_parquet(Shard(0, str(tmp_path / "u.parquet"), label="u.parquet"))
    assert ids == ["a", "c"] and [(f.line, f.reason) for f in failed] == [(1, "bad_utf8")]


def test_a_categorical_text_column_is_read(tmp_path):
    text = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0], pa.int32()), pa.array(["x", "y"]))
    pq.write_table(pa.table({"id": ["a", "b", "c"], "text": text}), tmp_path / "c.parquet")
    ids, failed = _read_parquet(Shard(0, str(tmp_path / "c.parquet"), label="c.parquet"))
    assert ids == ["a", "b", "c"] and not failed


def test_files_the_run_wrote_itself_still_raise(tmp_path):
    (tmp_path / "part.parquet").write_bytes(b"not parquet")
    with pytest.raises(pa.ArrowInvalid):
        list(read_parquet_batches(Shard(0, str(tmp_path / "part.parquet")), 1 << 20, "input",
                                  ColumnMap(), on_damage="raise"))
