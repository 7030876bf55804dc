"""``curate show``: removed documents of a stage and reason with their text (all of them with
``rejected: documents``; the 1 % sample with ``rejected: ids``), and kept ones."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
from typer.testing import CliRunner

from curator import LengthFilter, Pipeline, ReadJsonl, WriteParquet
from curator.cli import app
from curator.rejected import SAMPLE_EVERY, in_sample
from tests.conftest import write_shards

runner = CliRunner()


def _run(tmp_path, rejected: str):
    inputs = tmp_path / "in"
    if not inputs.exists():
        write_shards(inputs, 3)
        short = [{"id": f"short-{i}", "text": f"a short page number {i}"} for i in range(1500)]
        (inputs / "short.jsonl").write_text("".join(json.dumps(r) + "\n" for r in short),
                                            encoding="utf-8")
    run_dir = tmp_path / rejected
    Pipeline([ReadJsonl(path=f"{inputs}/*.jsonl"), LengthFilter(min_chars=2000),
              WriteParquet()], rejected=rejected).run(output=run_dir, executor="local",
                                                      progress=False)
    return run_dir


def test_show_prints_removed_documents_of_a_reason_with_their_text(tmp_path):
    run_dir = _run(tmp_path, "documents")
    removed = pq.read_table(run_dir / "rejected" / "length_filter")
    result = runner.invoke(app, ["show", str(run_dir), "--stage", "length_filter",
                                 "--reason", "too_short", "-n", "3"])
    assert result.exit_code == 0, result.output
    first = sorted(removed.column("id").to_pylist())[:3]
    for id_ in first:
        assert f"id={id_}" in result.output
    text = dict(zip(removed.column("id").to_pylist(), removed.column("text").to_pylist(),
                    strict=True))[first[0]]
    assert " ".join(text.split())[:40] in result.output
    assert f"3 of {removed.num_rows:,} removed documents shown" in result.output

    kept = runner.invoke(app, ["show", str(run_dir), "--kept", "-n", "2"])
    assert kept.exit_code == 0 and "2 of" in kept.output and "kept documents" in kept.output
    none = runner.invoke(app, ["show", str(run_dir), "--reason", "no_such_reason"])
    assert "0 of 0 removed documents shown" in none.output


def test_ids_only_keeps_the_text_of_a_deterministic_sample(tmp_path):
    run_dir = _run(tmp_path, "ids")
    removed = pq.read_table(run_dir / "rejected" / "length_filter")
    sampled = in_sample(removed.column("id"))
    assert 0 < sampled.sum() < removed.num_rows / SAMPLE_EVERY * 4
    text = removed.column("text").to_pylist()
    assert [t is not None for t in text] == sampled.tolist()  # text for the sample alone
    result = runner.invoke(app, ["show", str(run_dir), "--stage", "length_filter", "-n", "100"])
    assert f"{int(sampled.sum())} of {removed.num_rows:,} removed documents shown" in result.output
    assert f"{removed.num_rows - int(sampled.sum()):,} of them have no text kept" in result.output
