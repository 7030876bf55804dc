"""Every output's schema and column order are a function of the input and the config alone:
``id``, ``text``, then the other columns by name; shards with different columns give one
dataset that reads whole; the bytes do not depend on batching, workers or resume."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator import ExactDedup, LengthFilter, Pipeline, ReadJsonl, WriteParquet
from curator.commit import checksum
from tests.conftest import sample_documents
from tests.published import part_files, shard_parts

DOCS = sample_documents()


def _write_jsonl(path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                    encoding="utf-8")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Four files: ``url`` in one, ``lang`` in another, ``score`` int in a third and float in
    the fourth, where ``late`` first appears after 40 lines; field order varies by line."""
    folder = tmp_path_factory.mktemp("schema-in")
    files = {"a": [], "b": [], "c": [], "d": []}
    for i, doc in enumerate(DOCS):
        name = "abcd"[i % 4]
        record = {"id": f"{name}-{i:04d}", "text": doc["text"]}
        if name == "a":
            record["url"] = f"https://example.org/{i}"
        elif name == "b":
            record["lang"] = "ja" if doc["text"].count(" ") < 50 else "en"
        else:
            record["score"] = i if name == "c" else i + 0.5
        if name == "d" and i >= 4 * 40:
            record["late"] = {"z": i, "a": [i]}
        if i % 3 == 0:  # another field order
            record = dict(reversed(record.items()))
        files[name].append(record)
    for name, records in files.items():
        _write_jsonl(folder / f"{name}.jsonl", records)
    return folder


def _pipeline(folder, batch_bytes: int = 32 << 20, **writer) -> Pipeline:
    return Pipeline([ReadJsonl(path=f"{folder}/*.jsonl"), LengthFilter(min_chars=3000),
                     WriteParquet(**writer)], name="schema", batch_bytes=batch_bytes,
                    rejected="documents")


def _outputs(run) -> dict[str, bytes]:
    files = sorted((run / "write_parquet").glob("part-*")) + sorted(
        (run / "rejected").rglob("part-*"))
    return {str(p.relative_to(run)): p.read_bytes() for p in files}


def test_shards_with_different_columns_read_as_one_table(inputs, tmp_path):
    run = tmp_path / "run"
    _pipeline(inputs).run(output=run, executor="local", progress=False)
    table = pq.read_table(run / "write_parquet")
    assert table.column_names == ["id", "text", "lang", "late", "score", "source", "url"]
    assert table.schema.field("score").type == pa.float64()
    assert table.schema.field("late").type == pa.struct([("a", pa.list_(pa.int64())),
                                                         ("z", pa.int64())])
    rows = {r["id"]: r for r in table.to_pylist()}
    kept = [(i, d) for i, d in enumerate(DOCS) if len(d["text"]) >= 3000]
    assert len(rows) == len(kept)
    for i, _ in kept:
        row = rows[f"{'abcd'[i % 4]}-{i:04d}"]
        assert (row["url"] is not None) == (i % 4 == 0)
        assert (row["lang"] is not None) == (i % 4 == 1)
        assert row["score"] == (None if i % 4 < 2 else i if i % 4 == 2 else i + 0.5)
        assert row["late"] == ({"z": i, "a": [i]} if i % 4 == 3 and i >= 160 else None)
    rejected = pq.read_table(run / "rejected" / "length_filter")
    assert rejected.column_names == ["id", "text", "lang", "late", "reason", "score", "source",
                                     "url"]
    assert rejected.num_rows == len(DOCS) - len(kept)


def test_bytes_do_not_depend_on_batching_or_workers(inputs, tmp_path, dask_scheduler):
    runs = {"local, one batch per file": dict(executor="local", batch_bytes=32 << 20),
            "local, 16 KiB batches": dict(executor="local", batch_bytes=16 << 10),
            "dask 2 workers, 64 KiB batches": dict(scheduler=dask_scheduler,
                                                   batch_bytes=64 << 10)}
    outputs = {}
    for label, options in runs.items():
        run = tmp_path / label.replace(" ", "_").replace(",", "")
        _pipeline(inputs, options.pop("batch_bytes")).run(output=run, progress=False, **options)
        outputs[label] = _outputs(run)
    first = next(iter(outputs.values()))
    assert len(first) == 8
    for label, output in outputs.items():
        assert output == first, label


@pytest.mark.parametrize("row_group_rows", [10_000, 30])
def test_a_field_first_seen_late_gives_the_bytes_of_one_batch(tmp_path, row_group_rows):
    """One file: rows batched 16 KiB at a time (a new column, then a type promotion, arrive
    mid-shard, after whole row groups were written when they hold 30 rows) give the bytes of
    one whole-file batch."""
    folder = tmp_path / "in"
    folder.mkdir()
    records = [{"id": f"doc-{i:04d}", "text": doc["text"]} for i, doc in enumerate(DOCS)]
    for i, record in enumerate(records[100:], start=100):
        record["tag"] = i if i < 150 else f"t{i}"
    _write_jsonl(folder / "one.jsonl", records)
    outputs = []
    for batch_bytes in (32 << 20, 16 << 10):
        run = tmp_path / f"run-{batch_bytes}"
        Pipeline([ReadJsonl(path=f"{folder}/*.jsonl"), WriteParquet(row_group_rows=row_group_rows)],
                 name="late", batch_bytes=batch_bytes).run(output=run, executor="local",
                                                           progress=False)
        outputs.append(part_files(run / "write_parquet")[0].read_bytes())
        table = pq.read_table(run / "write_parquet")
        assert table.column_names == ["id", "text", "source", "tag"]
        assert table.column("tag").to_pylist() == [None] * 100 + [str(i) for i in range(100, 150)] \
            + [f"t{i}" for i in range(150, len(DOCS))]
        assert not list(run.rglob("*.tmp"))
    assert outputs[0] == outputs[1]


def test_a_run_killed_while_unifying_resumes_to_the_same_bytes(inputs, tmp_path):
    """As after a kill in the writer's rewrite: part 1 not yet rewritten (its manifest says so),
    part 2 rewritten in its manifest but not renamed (a temporary file left behind)."""
    reference = tmp_path / "reference"
    _pipeline(inputs).run(output=reference, executor="local", progress=False)
    shard_level = {}
    for k, name in ((1, "b"), (2, "c")):  # each part as its shard alone writes it
        alone = tmp_path / f"alone-{name}"
        alone.mkdir()
        shutil.copy(inputs / f"{name}.jsonl", alone / f"{name}.jsonl")
        _pipeline(alone).run(output=tmp_path / f"run-{name}", executor="local", progress=False)
        shard_level[k] = part_files(tmp_path / f"run-{name}" / "write_parquet")[0]
        assert pq.read_schema(shard_level[k]) != pq.read_schema(
            part_files(reference / "write_parquet")[k])
    run = tmp_path / "run"
    shutil.copytree(reference, run)
    parts = shard_parts(run)
    manifest_1 = run / "_manifests" / "segment-00" / f"{parts[1]}.json"
    shutil.copy(shard_level[1], run / "write_parquet" / f"{parts[1]}.parquet")
    manifest = json.loads(manifest_1.read_text())
    for file in manifest["files"]:
        if file["path"] == f"write_parquet/{parts[1]}.parquet":  # the shard's own file, recorded
            file.update(bytes=shard_level[1].stat().st_size, xxh3_128=checksum(shard_level[1]))
    manifest_1.write_text(json.dumps(manifest))
    shutil.copy(shard_level[2], run / "write_parquet" / f"{parts[2]}.parquet")
    shutil.copy(reference / "write_parquet" / f"{parts[2]}.parquet",
                run / "write_parquet" / f".{parts[2]}.parquet.1-0.tmp")
    (run / "stats.json").unlink()
    assert shard_level[2].stat().st_size != (reference / "write_parquet" /
                                             f"{parts[2]}.parquet").stat().st_size

    resumed = _pipeline(inputs).run(output=run, executor="local", progress=False)
    assert resumed.shards_run == 1  # part 2: its file does not match its manifest
    assert _outputs(run) == _outputs(reference)
    manifests = sorted((run / "_manifests").rglob("part-*.json"))
    def files(manifest) -> list[dict]:  # what was written, not where or when ("seen")
        return [{k: v for k, v in f.items() if k != "seen"}
                for f in json.loads(manifest.read_text())["files"]]

    assert [files(m) for m in manifests] == [files(reference / m.relative_to(run))
                                             for m in manifests]
    assert not list(run.rglob("*.tmp"))
    again = _pipeline(inputs).run(output=run, executor="local", progress=False)
    assert again.shards_run == 0 and _outputs(run) == _outputs(reference)


def test_exact_dedup_over_shards_with_different_columns(inputs, tmp_path, dask_scheduler):
    """The barrier reads parts whose shards had different columns; its output reads whole."""
    folder = tmp_path / "in"
    shutil.copytree(inputs, folder)
    records = [json.loads(line) for line in (folder / "a.jsonl").read_text().splitlines()]
    _write_jsonl(folder / "e.jsonl", [{"id": f"copy-{r['id']}", "text": r["text"],
                                       "extra": True} for r in records[:5]])
    run = tmp_path / "run"
    Pipeline([ReadJsonl(path=f"{folder}/*.jsonl"), ExactDedup(), WriteParquet()],
             name="dedup").run(output=run, scheduler=dask_scheduler, progress=False)
    table = pq.read_table(run / "write_parquet")
    assert table.column_names == ["id", "text", "extra", "lang", "late", "score", "source", "url"]
    assert table.num_rows == len(DOCS)
    assert sorted(pq.read_table(run / "rejected" / "exact_dedup").column("id").to_pylist()) == \
        sorted(f"copy-{r['id']}" for r in records[:5])


def test_row_groups_of_thousands_of_rows_do_not_depend_on_batching(tmp_path):
    """Parquet cuts pages every 1024 rows of each chunk it is given: a row group is written
    from one contiguous table, so batches of 16 KiB and one batch give the same bytes."""
    folder = tmp_path / "in"
    folder.mkdir()
    records = [{"id": f"doc-{i:05d}", "n": i,
                "text": DOCS[i % len(DOCS)]["text"][i % 300:i % 300 + 100 + i % 400]}
               for i in range(4000)]
    _write_jsonl(folder / "many.jsonl", records)
    outputs = []
    for batch_bytes in (32 << 20, 16 << 10):
        run = tmp_path / f"run-{batch_bytes}"
        Pipeline([ReadJsonl(path=f"{folder}/*.jsonl"), WriteParquet()], name="many",
                 batch_bytes=batch_bytes).run(output=run, executor="local", progress=False)
        outputs.append(part_files(run / "write_parquet")[0].read_bytes())
    assert outputs[0] == outputs[1]
