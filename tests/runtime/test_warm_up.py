"""A stage's ``warm_up`` runs on a background thread of the process that runs its tasks, while
the run goes on; where tasks run in other processes it is left to them."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import ClassVar

import pyarrow as pa
import pytest

from curator import Pipeline, ReadJsonl, WriteParquet
from curator.batch import BatchResult
from curator.pipeline import ExecutorConfig
from curator.stages.base import BatchStage
from tests.conftest import assert_accounting, write_shards


class WarmedStage(BatchStage):
    """Records where its warm-up ran (``note``); a failing warm-up must not fail the run."""

    type = "test_warmed_stage"
    holds_gil: ClassVar[bool] = False
    note: str
    fail: bool = False

    def warm_up(self) -> None:
        with open(self.note, "w") as f:
            json.dump({"pid": os.getpid(), "thread": threading.current_thread().name}, f)
        if self.fail:
            raise RuntimeError("no such device")

    def process(self, batch: pa.Table) -> BatchResult:
        return BatchResult(kept=batch)


def _run(tmp_path, name: str, executor: str, processes: bool | None, fail: bool = False):
    inputs = tmp_path / "in"
    if not inputs.exists():
        write_shards(inputs, 3)
    note = tmp_path / f"{name}.json"
    Pipeline([ReadJsonl(path=f"{inputs}/*.jsonl"), WarmedStage(note=str(note), fail=fail),
              WriteParquet()], executor=ExecutorConfig(processes=processes)).run(
        output=tmp_path / name, executor=executor, workers=2, progress=False)
    assert_accounting(tmp_path / name)
    for _ in range(50):  # a daemon thread: give it a moment after a very short run
        if note.exists():
            return json.loads(note.read_text())
        time.sleep(0.1)
    return None


@pytest.mark.parametrize("executor", ["local", "dask"])
def test_warm_up_runs_on_a_background_thread_where_the_tasks_run(tmp_path, executor):
    seen = _run(tmp_path, executor, executor, None)
    assert seen == {"pid": os.getpid(), "thread": "curator-warm-up"}


def test_a_failing_warm_up_leaves_the_run_to_its_tasks(tmp_path):
    assert _run(tmp_path, "failing", "local", None, fail=True)["thread"] == "curator-warm-up"


def test_no_warm_up_in_this_process_when_tasks_run_in_worker_processes(tmp_path):
    assert _run(tmp_path, "processes", "dask", True) is None
