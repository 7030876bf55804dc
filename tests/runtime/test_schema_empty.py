"""A shard whose every row is removed still writes its columns: in the writer's part and in the
part handed to a barrier, so ``exact_dedup(score_field=...)`` works when a shard is emptied."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from curator import ExactDedup, LengthFilter, Pipeline, ReadJsonl, WriteParquet
from curator.cli import app
from tests.conftest import assert_accounting, sample_documents
from tests.published import part_files

LONG = 5000


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """``a``: long documents with ``score`` and ``url``; ``b``: only short ones, with ``score``
    and ``lang`` (every one removed by a length filter); ``c``: copies of ``a``'s documents
    with higher scores."""
    folder = tmp_path_factory.mktemp("empty-in")
    docs = sample_documents()
    long = [d["text"] for d in docs if len(d["text"]) >= LONG][:12]
    short = [d["text"] for d in docs if len(d["text"]) < LONG][:6]
    files = {
        "a": [{"id": f"a-{i:02d}", "text": t, "score": 1.0, "url": f"u{i}"}
              for i, t in enumerate(long)],
        "b": [{"id": f"b-{i:02d}", "text": t, "score": 9, "lang": "x"}
              for i, t in enumerate(short)],
        "c": [{"id": f"c-{i:02d}", "text": t, "score": 2.0} for i, t in enumerate(long[:4])],
    }
    for name, records in files.items():
        (folder / f"{name}.jsonl").write_text(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return folder


def test_an_emptied_shard_writes_its_columns(inputs, tmp_path):
    run = tmp_path / "run"
    Pipeline([ReadJsonl(path=f"{inputs}/b.jsonl"), LengthFilter(min_chars=LONG),
              WriteParquet()], name="empty").run(output=run, executor="local", progress=False)
    [part] = [pq.read_table(p) for p in part_files(run / "write_parquet")]
    assert part.num_rows == 0
    assert part.column_names == ["id", "text", "lang", "score", "source"]


def test_exact_dedup_by_score_when_a_shard_is_emptied(inputs, tmp_path, dask_scheduler):
    run = tmp_path / "run"
    Pipeline([ReadJsonl(path=f"{inputs}/*.jsonl"), LengthFilter(min_chars=LONG),
              ExactDedup(score_field="score"), WriteParquet()], name="empty").run(
        output=run, scheduler=dask_scheduler, progress=False)
    assert_accounting(run)
    emptied = pq.read_table(part_files(run / "_work" / "segment-00")[1])
    assert emptied.num_rows == 0
    assert emptied.column_names == ["id", "text", "lang", "score", "source", "url"]
    kept = pq.read_table(run / "write_parquet")
    assert sorted(kept.column("id").to_pylist()) == [f"a-{i:02d}" for i in range(4, 12)] + [
        f"c-{i:02d}" for i in range(4)]  # the copies score higher
    assert kept.column_names == ["id", "text", "lang", "score", "source", "url"]


def test_a_score_field_no_shard_has_fails_with_one_line_naming_it(inputs, tmp_path):
    config = tmp_path / "p.yaml"
    config.write_text(f"executor: {{type: local}}\nstages:\n"
                      f"  - {{type: read_jsonl, path: '{inputs}/*.jsonl'}}\n"
                      f"  - {{type: exact_dedup, score_field: quality}}\n"
                      f"  - {{type: write_parquet}}\n")
    result = CliRunner().invoke(app, ["run", str(config), "--output", str(tmp_path / "r")])
    assert result.exit_code == 1
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.output
    assert errors[0].startswith("error: exact_dedup: score_field 'quality' is not a column of "
                                "the dataset (columns: id, text, lang, score, source, url)")
    assert "KeyError" not in result.output
