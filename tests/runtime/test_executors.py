"""Executors: GPU-resource tasks land only on workers that offer a GPU; missing GPUs are refused."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from distributed import Nanny, Scheduler, SpecCluster

from curator import Pipeline, ReadJsonl, WriteParquet
from curator.batch import BatchResult
from curator.pipeline import ExecutorConfig
from curator.stages.base import BatchStage
from tests.conftest import assert_accounting, write_shards


class RecordWorker(BatchStage):
    """A stand-in GPU stage: tags each document with the worker that processed it."""

    type = "test_record_worker"

    def resources(self) -> dict[str, float]:
        return {"GPU": 1}

    def process(self, batch: pa.Table) -> BatchResult:
        from distributed import get_worker

        address = get_worker().address
        return BatchResult(kept=batch.append_column("worker", pa.array([address] * len(batch))))


@pytest.fixture
def mixed_cluster():
    """One CPU-only worker and one worker that advertises a GPU, both on loopback."""
    nanny = {"cls": Nanny, "options": {"nthreads": 1, "host": "127.0.0.1"}}
    gpu = {"cls": Nanny, "options": {"nthreads": 1, "host": "127.0.0.1",
                                     "resources": {"GPU": 1}}}
    cluster = SpecCluster(
        scheduler={"cls": Scheduler, "options": {"host": "127.0.0.1", "dashboard_address": None}},
        workers={"cpu": nanny, "gpu": gpu})
    yield cluster
    cluster.close()


def test_gpu_stage_runs_only_on_the_gpu_worker(tmp_path, mixed_cluster):
    inputs = tmp_path / "in"
    write_shards(inputs, 8)
    pipeline = Pipeline([ReadJsonl(path=f"{inputs}/*.jsonl"), RecordWorker(), WriteParquet()])
    assert "[GPU]" in str(pipeline.plan())
    pipeline.run(output=tmp_path / "run", scheduler=mixed_cluster.scheduler_address,
                 progress=False)
    assert_accounting(tmp_path / "run")
    workers = set(pq.read_table(tmp_path / "run" / "write_parquet").column("worker").to_pylist())
    info = mixed_cluster.scheduler_info["workers"]
    gpu_workers = {addr for addr, w in info.items() if w.get("resources", {}).get("GPU")}
    assert workers == gpu_workers and len(gpu_workers) == 1


def test_gpu_stage_without_gpu_workers_is_refused(tmp_path, dask_scheduler):
    inputs = tmp_path / "in"
    write_shards(inputs, 2)
    pipeline = Pipeline([ReadJsonl(path=f"{inputs}/*.jsonl"), RecordWorker()])
    with pytest.raises(RuntimeError, match="no Dask worker offers it"):
        pipeline.run(output=tmp_path / "run", scheduler=dask_scheduler, progress=False)


def test_ray_executor_gives_the_same_output_as_dask(tmp_path):
    pytest.importorskip("ray")
    inputs = tmp_path / "in"
    write_shards(inputs, 4)
    outputs = {}
    for executor in ("ray", "dask"):
        pipeline = Pipeline([ReadJsonl(path=f"{inputs}/*.jsonl"), WriteParquet()])
        pipeline.run(output=tmp_path / executor, executor=executor, workers=2, progress=False)
        assert_accounting(tmp_path / executor)
        outputs[executor] = {p.name: p.read_bytes()
                             for p in sorted((tmp_path / executor / "write_parquet").iterdir())}
    assert outputs["ray"] == outputs["dask"] and len(outputs["ray"]) == 4


def test_existing_cluster_by_scheduler_file(tmp_path, dask_scheduler):
    """A batch job writes the scheduler file; `curate run --scheduler-file` joins that cluster."""
    scheduler_file = tmp_path / "scheduler.json"
    scheduler_file.write_text(f'{{"address": "{dask_scheduler}"}}')
    inputs = tmp_path / "in"
    write_shards(inputs, 3)
    result = Pipeline([ReadJsonl(path=f"{inputs}/*.jsonl"), WriteParquet()]).run(
        output=tmp_path / "run", scheduler_file=str(scheduler_file), progress=False)
    assert result.shards_run == 3
    assert_accounting(tmp_path / "run")


class RecordDevice(RecordWorker):
    """Tags each document with the CUDA device list its worker was given."""

    type = "test_record_device"

    def process(self, batch: pa.Table) -> BatchResult:
        import os

        device = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        return BatchResult(kept=batch.append_column("device", pa.array([device] * len(batch))))


def test_local_cluster_has_one_gpu_worker_per_device(tmp_path, monkeypatch):
    """On a node with GPUs, only one worker per GPU advertises it, pinned to its own device."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    inputs = tmp_path / "in"
    write_shards(inputs, 6)
    Pipeline([ReadJsonl(path=f"{inputs}/*.jsonl"), RecordDevice(), WriteParquet()]).run(
        output=tmp_path / "run", executor="dask", workers=2, progress=False)
    assert_accounting(tmp_path / "run")
    devices = pq.read_table(tmp_path / "run" / "write_parquet").column("device").to_pylist()
    assert set(devices) <= {"0", "1"} and devices


class RecordSpan(BatchStage):
    """A stage that takes a while (and holds the GIL, as stages do by default): tags each
    document with its worker, device and the time span of its task."""

    type = "test_record_span"

    def process(self, batch: pa.Table) -> BatchResult:
        import os
        import time

        from distributed import get_worker

        start = time.time()
        time.sleep(0.4)
        n = len(batch)
        return BatchResult(kept=batch.append_column("worker", pa.array([get_worker().address] * n))
                           .append_column("device", pa.array(
                               [os.environ.get("CUDA_VISIBLE_DEVICES", "")] * n))
                           .append_column("span", pa.array([[start, time.time()]] * n)))


class RecordGpuSlot(RecordSpan):
    """The same as a GPU stage: the span is the time its task held a GPU slot."""

    type = "test_record_gpu_slot"

    def resources(self) -> dict[str, float]:
        return {"GPU": 1}


def _spans_by_worker(tmp_path: Path, stage: BatchStage, shards: int) -> dict[str, list]:
    """Run ``stage`` over ``shards`` on a cluster of worker processes (one CPU worker, the GPU
    workers of CUDA_VISIBLE_DEVICES); each worker's task spans, and every document's device."""
    inputs = tmp_path / "in"
    write_shards(inputs, shards)
    Pipeline([ReadJsonl(path=f"{inputs}/*.jsonl"), stage, WriteParquet()],
             executor=ExecutorConfig(processes=True)).run(
        output=tmp_path / "run", executor="dask", workers=1, progress=False)
    assert_accounting(tmp_path / "run")
    table = pq.read_table(tmp_path / "run" / "write_parquet")
    spans: dict[str, set[tuple[float, float]]] = {}
    for worker, span in zip(table.column("worker").to_pylist(),
                            table.column("span").to_pylist(), strict=True):
        spans.setdefault(worker, set()).add(tuple(span))
    return {"spans": spans, "devices": set(table.column("device").to_pylist())}


def _most_at_once(intervals: set[tuple[float, float]]) -> int:
    return max(sum(s <= t < e for s, e in intervals) for t, _ in intervals)


def test_two_gpu_workers_share_one_card_each_with_parts_in_flight(tmp_path, monkeypatch):
    """CUDA_VISIBLE_DEVICES=0,0: two GPU workers on device 0; each runs up to GPU_TASKS GPU
    tasks at once (parts in flight), never more, and GPU tasks run nowhere else."""
    from curator.runtime.cluster.executors import GPU_TASKS

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,0")
    seen = _spans_by_worker(tmp_path, RecordGpuSlot(), 16)
    assert seen["devices"] == {"0"}
    assert len(seen["spans"]) == 2  # both GPU workers took parts
    in_flight = [_most_at_once(v) for v in seen["spans"].values()]
    assert max(in_flight) > 1 and max(in_flight) <= GPU_TASKS


def test_gil_bound_tasks_run_one_at_a_time_on_a_gpu_worker(tmp_path, monkeypatch):
    """A GPU worker runs GPU_TASKS threads; tasks of a stage that holds the GIL still run one at
    a time in every worker process, the GPU worker included (it takes its share of them)."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    seen = _spans_by_worker(tmp_path, RecordSpan(), 12)
    assert seen["devices"] == {"", "0"}  # the CPU worker and the GPU worker both took tasks
    assert [_most_at_once(v) for v in seen["spans"].values()] == [1, 1]
