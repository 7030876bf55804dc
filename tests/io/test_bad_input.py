"""Bad input is counted and quarantined with file and line; the run finishes. Or it stops, when
the pipeline says ``on_error: fail``."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from curator import Pipeline, ReadJsonl, ReadParquet, WriteParquet
from curator.runtime.worker.shard_task import CurationError
from tests.conftest import assert_accounting, sample_documents


def _lines(n: int, start: int = 0) -> list[bytes]:
    docs = sample_documents()
    return [json.dumps({"id": f"doc-{start + i}", "text": docs[i % len(docs)]["text"]}).encode()
            for i in range(n)]


@pytest.fixture
def bad_inputs(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    good = _lines(30)
    # line 5: malformed JSON; line 9: invalid UTF-8 inside a string; line 12 blank
    broken = [*good[:4], b'{"id": "x", "text": "unterminated', *good[4:7],
              b'{"id": "bad-utf8", "text": "caf\xe9 au lait"}', b"", *good[7:12]]
    (folder / "a_mixed.jsonl").write_bytes(b"\n".join(broken) + b"\n")
    whole = gzip.compress(b"\n".join(_lines(40, start=100)) + b"\n")
    (folder / "b_truncated.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    (folder / "c_good.jsonl.zst").write_bytes(
        zstandard.ZstdCompressor().compress(b"\n".join(_lines(10, start=200)) + b"\n"))
    return folder


def test_bad_records_are_counted_quarantined_and_the_run_finishes(bad_inputs, tmp_path,
                                                                   dask_scheduler):
    run_dir = tmp_path / "run"
    pipeline = Pipeline([ReadJsonl(path=f"{bad_inputs}/*"), WriteParquet()], name="bad")
    result = pipeline.run(output=run_dir, scheduler=dask_scheduler, progress=False)
    stats = assert_accounting(run_dir)
    reader = stats["stages"][0]
    errors = [json.loads(line) for p in sorted((run_dir / "errors" / "read_jsonl").glob("*.jsonl"))
              for line in p.read_text().splitlines()]
    by_file = {(e["file"], e["line"]): e["error"] for e in errors}
    assert "invalid JSON" in by_file[("a_mixed.jsonl", 5)]
    assert "invalid UTF-8" in by_file[("a_mixed.jsonl", 9)]
    truncated = [e for e in errors if e["file"] == "b_truncated.jsonl.gz"]
    assert len(truncated) == 1 and "truncated gzip" in truncated[0]["error"]
    assert truncated[0]["line"] > 1 and truncated[0]["offset"] > 0
    assert reader["failed"] == 3 == len(errors)
    kept = pq.read_table(run_dir / "write_parquet").column("id").to_pylist()
    assert len(kept) == reader["kept"] == result.stats["stages"][-1]["kept"]
    # every complete line before the truncation point survived, in order
    truncated_ids = [i for i in kept if int(i.split("-")[1]) >= 100 and int(i.split("-")[1]) < 200]
    assert truncated_ids == [f"doc-{100 + k}" for k in range(truncated[0]["line"] - 1)]
    assert sorted(i for i in kept if int(i.split("-")[1]) >= 200) == sorted(
        f"doc-{200 + k}" for k in range(10))
    assert len([i for i in kept if int(i.split("-")[1]) < 100]) == 12


def test_on_error_fail_stops_with_file_and_line(bad_inputs, tmp_path):
    pipeline = Pipeline([ReadJsonl(path=f"{bad_inputs}/a_mixed.jsonl"), WriteParquet()],
                        on_error="fail")
    with pytest.raises(CurationError, match=r"a_mixed\.jsonl:5: invalid JSON"):
        pipeline.run(output=tmp_path / "run", executor="local", progress=False)
    assert not list((tmp_path / "run").rglob("part-*.parquet")), "a failed shard committed"


def test_cli_on_error_fail_exits_nonzero_naming_file_and_line(bad_inputs, tmp_path):
    from typer.testing import CliRunner

    from curator.cli import app

    config = tmp_path / "p.yaml"
    config.write_text(f"on_error: fail\nexecutor: {{type: local}}\nstages:\n"
                      f"  - {{type: read_jsonl, path: '{bad_inputs}/a_mixed.jsonl'}}\n")
    result = CliRunner().invoke(app, ["run", str(config), "--output", str(tmp_path / "r")])
    assert result.exit_code == 1
    assert "a_mixed.jsonl:5" in " ".join(result.output.split())


def test_ids_from_path_and_line_are_stable_and_blank_lines_do_not_shift_them(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "x.jsonl").write_text('{"text": "one"}\n\n   \n{"text": "four"}\n{"text": "five"}')
    reader = ReadJsonl(path=str(folder / "*.jsonl"))
    for batch in (4, 1 << 20):
        ids = [i for b in reader.read(reader.shards()[0], batch) if b.table.num_rows
               for i in b.table.column("id").to_pylist()]
        assert ids == ["x.jsonl:1", "x.jsonl:4", "x.jsonl:5"], batch


def test_a_50_mb_single_line_document_is_read(tmp_path):
    path = tmp_path / "huge.jsonl"
    text = "<html>" + "x" * (50 << 20) + "</html>"
    path.write_text(json.dumps({"text": text}) + "\n" + json.dumps({"text": "small"}) + "\n")
    reader = ReadJsonl(path=str(path))
    batches = list(reader.read(reader.shards()[0], 1 << 20))
    lengths = [len(t) for b in batches for t in b.table.column("text").to_pylist()]
    assert lengths == [len(text), 5]
    assert not [f for b in batches for f in b.failed]


def test_a_line_over_max_line_bytes_fails_alone(tmp_path):
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps({"text": "y" * 300_000}) + "\n" + json.dumps({"text": "ok"}) + "\n")
    reader = ReadJsonl(path=str(path), max_line_bytes=100_000)
    batches = list(reader.read(reader.shards()[0], 50_000))
    failed = [f for b in batches for f in b.failed]
    assert [(f.line, "max_line_bytes" in f.error) for f in failed] == [(1, True)]
    assert [i for b in batches if b.table.num_rows
            for i in b.table.column("id").to_pylist()] == ["long.jsonl:2"]


# Issue 27, defect 7: wrong-type text names its type and position; a bad file of any reader
# fails alone, named and counted, and the other files go on.
@pytest.mark.parametrize("value,named", [("42", "a number"), ('["a"]', "an array"),
                                         ('{"a": 1}', "an object"), ("true", "a boolean")])
@pytest.mark.parametrize("block", [4, 1 << 20])  # a block alone, or among good lines
def test_text_of_the_wrong_type_fails_with_its_type_line_and_offset(tmp_path, value, named,
                                                                    block):
    path = tmp_path / "t.jsonl"
    path.write_text(f'{{"text": "good"}}\n{{"id": "bad", "text": {value}}}\n{{"text": "ok"}}\n')
    reader = ReadJsonl(path=str(path))
    batches = list(reader.read(reader.shards()[0], block))
    [failure] = [f for b in batches for f in b.failed]
    assert (failure.reason, failure.line, failure.offset) == ("bad_text_type", 2, 17)
    assert failure.error == f"field 'text' is {named}, expected a string"
    assert [t for b in batches if b.table.num_rows
            for t in b.table.column("text").to_pylist()] == ["good", "ok"]


def _run_folder(folder, reader, tmp_path) -> tuple[dict, list[dict], list[str]]:
    run_dir = tmp_path / "run"
    Pipeline([reader, WriteParquet()], name="bad-files").run(output=run_dir, executor="local",
                                                            progress=False)
    stats = assert_accounting(run_dir)
    errors = [json.loads(line) for p in sorted((run_dir / "errors").rglob("*.jsonl"))
              for line in p.read_text().splitlines()]
    kept = pq.read_table(run_dir / "write_parquet").column("id").to_pylist()
    return stats, errors, kept


def test_a_0_byte_jsonl_file_fails_alone_named_and_counted(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.jsonl").write_bytes(b"\n".join(_lines(3)) + b"\n")
    (folder / "b_empty.jsonl").write_bytes(b"")
    (folder / "c_empty.jsonl.gz").write_bytes(b"")
    stats, errors, kept = _run_folder(folder, ReadJsonl(path=f"{folder}/*"), tmp_path)
    assert sorted((e["file"], e["reason"], e["offset"]) for e in errors) == [
        ("b_empty.jsonl", "empty_file", 0), ("c_empty.jsonl.gz", "empty_file", 0)]
    assert stats["stages"][0]["failed"] == 2 and sorted(kept) == ["doc-0", "doc-1", "doc-2"]


def test_a_0_byte_or_corrupt_parquet_file_fails_alone_and_the_others_go_on(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    pq.write_table(pa.table({"id": ["p-0", "p-1"], "text": ["one", "two"]}), folder / "a.parquet")
    (folder / "b_empty.parquet").write_bytes(b"")
    whole = (folder / "a.parquet").read_bytes()
    (folder / "c_footer.parquet").write_bytes(whole[:-10])  # the footer cut
    (folder / "d_text.parquet").write_bytes(b"not parquet at all")
    stats, errors, kept = _run_folder(folder, ReadParquet(path=f"{folder}/*.parquet"), tmp_path)
    assert sorted((e["file"], e["reason"]) for e in errors) == [
        ("b_empty.parquet", "empty_file"), ("c_footer.parquet", "unreadable_file"),
        ("d_text.parquet", "unreadable_file")]
    assert all("not a readable Parquet file" in e["error"] or "0 bytes" in e["error"]
               for e in errors)
    assert stats["stages"][0]["failed"] == 3 and sorted(kept) == ["p-0", "p-1"]


def test_parquet_text_of_the_wrong_type_names_its_type_and_row(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    pq.write_table(pa.table({"text": [1, 2]}), folder / "ints.parquet")
    pq.write_table(pa.table({"text": ["fine"]}), folder / "strings.parquet")
    _, errors, kept = _run_folder(folder, ReadParquet(path=f"{folder}/*.parquet"), tmp_path)
    assert [(e["file"], e["line"], e["reason"], e["error"]) for e in errors] == [
        ("ints.parquet", row, "bad_text_type", "field 'text' is int64, expected a string")
        for row in (0, 1)]
    assert kept == ["strings.parquet:0"]
