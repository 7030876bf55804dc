"""GPUs: CPU workers of the local cluster see none; ``device: auto`` is decided on the driver from
what the cluster offers, and stats.json says what was used. Threads: each worker gets its share of
the cores, and the driver's own environment is left as it was."""

from __future__ import annotations

import importlib.util
import os

import pyarrow as pa
import pyarrow.parquet as pq

from curator import FuzzyDedup, Pipeline, ReadJsonl, WriteParquet
from curator.batch import BatchResult
from curator.pipeline import ExecutorConfig
from curator.runtime.cluster.executors import gpu_count
from curator.stages.base import BatchStage
from tests.conftest import assert_accounting, write_shards

CUPY = importlib.util.find_spec("cupy") is not None


class RecordWorkerEnvironment(BatchStage):
    """Tags each document with the CUDA_VISIBLE_DEVICES and OMP_NUM_THREADS of the (CPU) worker
    that saw it."""

    type = "test_record_worker_environment"

    def process(self, batch: pa.Table) -> BatchResult:
        columns = {"visible": "CUDA_VISIBLE_DEVICES", "threads": "OMP_NUM_THREADS"}
        for column, name in columns.items():
            seen = os.environ.get(name, "<unset>")
            batch = batch.append_column(column, pa.array([seen] * len(batch)))
        return BatchResult(kept=batch)


def _worker_environment(tmp_path, run: str, column: str = "visible") -> list[str]:
    inputs = tmp_path / "in"
    if not inputs.exists():
        write_shards(inputs, 8)
    Pipeline([ReadJsonl(path=f"{inputs}/*.jsonl"), RecordWorkerEnvironment(), WriteParquet()],
             executor=ExecutorConfig(processes=True)).run(
        output=tmp_path / run, executor="dask", workers=2, progress=False)
    assert_accounting(tmp_path / run)
    return pq.read_table(tmp_path / run / "write_parquet").column(column).to_pylist()


def test_cpu_workers_see_no_gpu(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    own_devices = {str(g) for g in range(gpu_count())}  # none here; one per GPU worker elsewhere
    assert set(_worker_environment(tmp_path, "this-node")) <= {""} | own_devices
    # a node with two GPU workers (one card named twice: the machine may have a single GPU,
    # and a worker given a card it lacks cannot start); none sees both names
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,0")
    assert set(_worker_environment(tmp_path, "gpu-node")) <= {"", "0"}


def test_workers_get_their_share_of_threads_and_the_driver_keeps_its_environment(
        tmp_path, monkeypatch):
    # Dask's nannies set OMP_NUM_THREADS=1 (and more) in the process that starts them, where
    # torch, a later in-process run or the user's notebook would read it
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "MALLOC_TRIM_THRESHOLD_"):
        monkeypatch.delenv(name, raising=False)
    shares = set(_worker_environment(tmp_path, "run", column="threads"))
    assert shares == {str(max(1, (os.cpu_count() or 1) // 2))}
    assert [os.environ.get(name) for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                              "MALLOC_TRIM_THRESHOLD_")] == [None] * 3


def test_device_auto_is_resolved_from_the_cluster():
    auto = FuzzyDedup()
    assert auto.for_cluster(gpus=False).device == "cpu"
    on_gpus = auto.for_cluster(gpus=True)
    assert on_gpus.device == ("gpu" if CUPY else "cpu")  # GPU workers, and CuPy to drive them
    assert on_gpus.resources() == ({"GPU": 1} if CUPY else {})
    assert auto.device == "auto"  # a copy: the configured stage is unchanged
    assert FuzzyDedup(device="cpu").for_cluster(gpus=True).device == "cpu"
    assert FuzzyDedup(device="gpu").for_cluster(gpus=False).device == "gpu"


def test_stats_say_which_device_auto_chose(tmp_path):
    inputs = tmp_path / "in"
    write_shards(inputs, 2, copies=2)
    Pipeline([ReadJsonl(path=f"{inputs}/*.jsonl"), FuzzyDedup(), WriteParquet()]).run(
        output=tmp_path / "run", executor="local", progress=False)
    stats = assert_accounting(tmp_path / "run")
    dedup = next(s for s in stats["stages"] if s["type"] == "fuzzy_dedup")
    assert dedup["removed"] > 0
    assert dedup["dedup"]["device"] == ("gpu" if CUPY and gpu_count() else "cpu")
