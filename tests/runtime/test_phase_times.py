"""stats.json lists every phase of a dataset stage with its wall seconds and task count; a
rerun that finds every phase done reports the seconds the first run saved; `curate report`
shows them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pytest
from typer.testing import CliRunner

from curator import (
    DatasetResult,
    DatasetStage,
    ExactDedup,
    FuzzyDedup,
    Pipeline,
    ReadJsonl,
    WriteParquet,
)
from curator.cli import app
from curator.runtime.errors import CurationError
from curator.stages.context import PhaseResult
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

    # The finished stage's work folder holds its per-part work (hash), its outputs and removal
    # markers, nothing per bucket. Without its record and removal markers the stage runs again:
    # the kept hash tasks are reused with their first seconds, group and remove run anew.
    work = next((run / "_work").glob("segment-*/hash")).parent
    assert sorted(p.name for p in work.iterdir()) == ["hash", "out", "remove"]
    saved = json.loads((run / "_manifests" / work.name / "phases.json").read_text())
    assert set(saved["phases"]) == {"hash", "group", "remove"}
    (run / "_manifests" / work.name / "dataset.json").unlink()
    for marker in work.glob("remove/_done/*.json"):
        marker.unlink()
    resumed = _stage(pipeline.run(output=run, scheduler=dask_scheduler, progress=False).stats,
                     "exact_dedup")["phases"]
    assert resumed["hash"] == {**phases["hash"], "reused": phases["hash"]["tasks"]}
    assert resumed["group"]["tasks"] == 2 and resumed["group"]["reused"] == 0
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


def test_a_saved_result_of_another_form_makes_its_task_run_again(shards, tmp_path,
                                                                   dask_scheduler):
    """A marker whose result is not the phase's type (an older run's) counts as no marker."""
    pipeline = Pipeline([ReadJsonl(path=f"{shards}/*.jsonl"), ExactDedup(buckets=2),
                         WriteParquet()], name="old-markers")
    run = tmp_path / "run"
    first = _stage(pipeline.run(output=run, scheduler=dask_scheduler, progress=False).stats,
                   "exact_dedup")
    markers = sorted((run / "_work").glob("segment-*/hash/_done/*.json"))  # kept per part
    assert len(markers) == N_SHARDS
    for marker in markers:
        saved = json.loads(marker.read_text())
        marker.write_text(json.dumps({**saved, "result": {"rows": "old"}}))
    for marker in (run / "_work").glob("segment-*/remove/_done/*.json"):
        marker.unlink()
    again = _stage(pipeline.run(output=run, scheduler=dask_scheduler, progress=False).stats,
                   "exact_dedup")
    assert again["phases"]["hash"]["reused"] == 0
    assert again["phases"]["group"]["reused"] == 0  # trimmed after the first run
    assert again["dedup"] == first["dedup"] and again["removed"] == first["removed"]


@dataclass(frozen=True)
class _Seen(PhaseResult):
    rows: int


def _untyped(path: str) -> dict:
    return {"rows": 1}


class _Untyped(DatasetStage):
    """A dataset stage whose phase returns a dict, not the result type it names."""

    type = "untyped_probe"
    holds_gil: ClassVar[bool] = True

    def run_dataset(self, parts: list[Path], ctx) -> DatasetResult:
        ctx.run_phase("see", _untyped, [str(p) for p in parts], [p.stem for p in parts], _Seen)
        raise AssertionError("the phase should have failed")


def test_a_task_returning_another_type_fails_loudly(shards, tmp_path, dask_scheduler):
    pipeline = Pipeline([ReadJsonl(path=f"{shards}/*.jsonl"), _Untyped(), WriteParquet()],
                        name="untyped")
    with pytest.raises(CurationError, match=r"untyped_probe: phase 'see' task 'part-[^']+' "
                                            r"returned dict, not _Seen"):
        pipeline.run(output=tmp_path / "run", scheduler=dask_scheduler, progress=False)
