"""Each stage's CPU seconds in stats.json: the CPU a stage burns is charged to it, whether it
runs in the worker process or in a sandbox child, on the local executor and on Dask worker
processes; a dataset stage is charged its phases' tasks and its driver work; the report gives
CPU- and node-hours."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from curator import ExactDedup, Pipeline, ReadJsonl, WriteParquet
from curator.batch import BatchResult
from curator.cli import app
from curator.stages.base import BatchStage
from tests.conftest import write_shards

N_SHARDS = 3
#: CPU seconds the burner spends per document (a sandbox calls it a document at a time).
BURN = 0.003


class Burner(BatchStage):
    """Spends ``BURN`` CPU seconds of its own thread per document, keeps every document."""

    type = "test_cpu_burner"

    def process(self, batch: pa.Table) -> BatchResult:
        end = time.thread_time() + BURN * batch.num_rows
        while time.thread_time() < end:
            pass
        return BatchResult(kept=batch)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    folder = tmp_path_factory.mktemp("compute-in")
    write_shards(folder, N_SHARDS, copies=2, with_ids=True)
    return folder


def _stage(stats: dict, stage_type: str) -> dict:
    return next(s for s in stats["stages"] if s["type"] == stage_type)


@pytest.mark.parametrize("sandboxed", [False, True], ids=["in-process", "sandboxed"])
@pytest.mark.parametrize("where", ["local", "dask"])
def test_a_stage_is_charged_the_cpu_it_burns(shards, tmp_path, dask_scheduler, where,
                                             sandboxed):
    burner = Burner(timeout_s=60.0) if sandboxed else Burner()
    pipeline = Pipeline([ReadJsonl(path=f"{shards}/*.jsonl"), burner, WriteParquet()])
    run = {"executor": "local"} if where == "local" else {"scheduler": dask_scheduler}
    stats = pipeline.run(output=tmp_path / "run", progress=False, **run).stats
    burned = _stage(stats, "test_cpu_burner")["cpu_seconds"]
    expected = BURN * _stage(stats, "test_cpu_burner")["in"]
    assert 0.95 * expected <= burned <= 1.4 * expected, burned
    assert _stage(stats, "read_jsonl")["cpu_seconds"] < expected / 2
    assert "gpu_seconds" not in _stage(stats, "test_cpu_burner")  # no GPU held
    assert stats["nodes"] == 1


def test_a_dataset_stage_is_charged_its_phases(shards, tmp_path, dask_scheduler):
    pipeline = Pipeline([ReadJsonl(path=f"{shards}/*.jsonl"), ExactDedup(buckets=2),
                         WriteParquet()])
    run = tmp_path / "run"
    stats = pipeline.run(output=run, scheduler=dask_scheduler, progress=False).stats
    dedup = _stage(stats, "exact_dedup")
    phases = dedup["phases"]
    assert all(p["cpu_seconds"] >= 0 for p in phases.values())
    assert phases["hash"]["cpu_seconds"] > 0
    assert dedup["cpu_seconds"] >= sum(p["cpu_seconds"] for p in phases.values()) - 1e-3
    shown = CliRunner().invoke(app, ["report", str(run)])
    assert shown.exit_code == 0, shown.output
    assert "CPU-hours" in shown.output and "node-hours" in shown.output
    assert "hash" in shown.output and "CPU-s" in shown.output
    html = (run / "report.html").read_text(encoding="utf-8")
    assert "<h2>Compute</h2>" in html and "node-hours" in html
