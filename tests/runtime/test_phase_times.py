"""stats.json lists every phase of a dataset stage with its wall seconds and task count; a
rerun that finds every phase done reports the seconds the first run saved; `curate report`
shows them."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from curator import ExactDedup, FuzzyDedup, Pipeline, ReadJsonl, WriteParquet
from curator.cli import app
from tests.conftest import write_shards

N_SHARDS = 3


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    folder = tmp_path_factory.mktemp("phase-in")
    write_shards(folder, N_SHARDS, copies=2, with_ids=True)
    return folder


def _stage(stats: dict, stage_type: str) -> dict:
    return next(s for s in stats["stages"] if s["type"] == stage_type)


def _check(phases: dict, expected_tasks: dict[str, int]) -> None:
    for name, tasks in expected_tasks.items():
        assert phases[name]["tasks"] == tasks, (name, phases[name])
    for name, entry in phases.items():
        assert entry["seconds"] >= 0, (name, entry)


def test_exact_dedup_phases_and_resume(shards, tmp_path, dask_scheduler):
    pipeline = Pipeline([ReadJsonl(path=f"{shards}/*.jsonl"), ExactDedup(buckets=2),
                         WriteParquet()], name="phases")
    run = tmp_path / "run"
    stats = pipeline.run(output=run, scheduler=dask_scheduler, progress=False).stats
    phases = _stage(stats, "exact_dedup")["phases"]
    assert list(phases) == ["hash", "group", "remove"]
    _check(phases, {"hash": N_SHARDS, "group": 2, "remove": N_SHARDS})
    assert sum(p["seconds"] for p in phases.values()) > 0
    assert sum(p["seconds"] for p in phases.values()) <= _stage(stats, "exact_dedup")["seconds"]

    # The same command again: every phase is found done and keeps the first run's seconds.
    again = pipeline.run(output=run, scheduler=dask_scheduler, progress=False).stats
    assert _stage(again, "exact_dedup")["phases"] == {
        name: {**entry, "reused": entry["tasks"]} for name, entry in phases.items()}
    assert all(entry["reused"] == 0 for entry in phases.values())

    # A run cut after the group phase: hash and group keep their seconds, remove is run anew.
    saved = json.loads(next((run / "_manifests").glob("segment-*/phases.json")).read_text())
    assert set(saved["phases"]) == {"hash", "group", "remove"}
    for marker in (run / "_work").glob("segment-*/remove/_done/*.json"):
        marker.unlink()
    resumed = _stage(pipeline.run(output=run, scheduler=dask_scheduler, progress=False).stats,
                     "exact_dedup")["phases"]
    for name in ("hash", "group"):
        assert resumed[name] == {**phases[name], "reused": phases[name]["tasks"]}
    assert resumed["remove"]["tasks"] == N_SHARDS and resumed["remove"]["reused"] == 0

    result = CliRunner().invoke(app, ["report", str(run)])
    assert result.exit_code == 0, result.output
    assert "exact_dedup phases: hash" in result.output
    assert "<h2>Phases</h2>" in (run / "report.html").read_text()


def test_fuzzy_dedup_phases(shards, tmp_path, dask_scheduler):
    pipeline = Pipeline([ReadJsonl(path=f"{shards}/*.jsonl"), FuzzyDedup(buckets=2),
                         WriteParquet()], name="phases")
    stats = pipeline.run(output=tmp_path / "run", scheduler=dask_scheduler,
                         progress=False).stats
    stage = _stage(stats, "fuzzy_dedup")
    phases = stage["phases"]
    assert stage["dedup"]["component_rounds"] == 0  # a small graph: one task, no rounds
    assert list(phases) == ["signatures", "edges", "components", "remove"]
    _check(phases, {"signatures": N_SHARDS, "edges": 2, "components": 1, "remove": N_SHARDS})


def test_timeline_lists_each_shard_task_of_this_run(shards, tmp_path, dask_scheduler):
    pipeline = Pipeline([ReadJsonl(path=f"{shards}/*.jsonl"), ExactDedup(buckets=2),
                         WriteParquet()], name="timeline")
    run = tmp_path / "run"
    stats = pipeline.run(output=run, scheduler=dask_scheduler, progress=False).stats
    # segment 0 (read, before the dedup barrier) and segment 2 (write) each ran every shard
    assert sorted({t[0] for t in stats["timeline"]}) == [0, 2]
    assert [t[0] for t in stats["timeline"]].count(0) == N_SHARDS
    for _, start, end, pid in stats["timeline"]:
        assert 0 <= start <= end <= stats["seconds"] and pid > 0
    assert stats["executor_start_seconds"] >= 0
    # a rerun that finds every shard done ran no task
    again = pipeline.run(output=run, scheduler=dask_scheduler, progress=False).stats
    assert again["timeline"] == []
