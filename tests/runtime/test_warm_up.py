"""A stage's ``warm_up`` runs on a background thread of the process that runs its tasks, while
the run goes on; where tasks run in worker processes it runs on a background thread of the
driver (numba's on-disk cache then serves the workers) while the segments before the stage's
own run, and that segment waits for it; it says that it compiles and, every few seconds, how
long it has been at it."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import ClassVar

import pyarrow as pa
import pytest

from curator import ExactDedup, Pipeline, ReadJsonl, WriteParquet
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


def test_warm_up_in_the_driver_when_tasks_run_in_worker_processes(tmp_path):
    seen = _run(tmp_path, "processes", "dask", True)
    assert seen == {"pid": os.getpid(), "thread": "curator-warm-up"}


class _Marking(BatchStage):
    """Writes ``marker`` when its first batch comes (in a worker process)."""

    type = "test_marking_stage"
    marker: str

    def process(self, batch: pa.Table) -> BatchResult:
        with open(self.marker, "a") as f:
            f.write(f"{batch.num_rows}\n")
        return BatchResult(kept=batch)


class _WaitingWarmUp(BatchStage):
    """A warm-up that lasts until the segment before its stage's has begun (``marker``) and
    then writes ``note``; its stage notes, for each batch, whether the warm-up had ended."""

    type = "test_waiting_warm_up"
    marker: str
    note: str

    def warm_up(self) -> None:
        deadline = time.monotonic() + 60
        while not os.path.exists(self.marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        with open(self.note, "w") as f:
            json.dump({"saw_marker": os.path.exists(self.marker)}, f)

    def process(self, batch: pa.Table) -> BatchResult:
        with open(self.note + ".batches", "a") as f:
            f.write(f"{os.path.exists(self.note)}\n")
        return BatchResult(kept=batch)


def test_earlier_segments_run_while_the_driver_warms_a_later_stage(tmp_path):
    write_shards(tmp_path / "in", 3)
    marker, note = tmp_path / "segment-0-ran", tmp_path / "warm.json"
    Pipeline([ReadJsonl(path=f"{tmp_path / 'in'}/*.jsonl"), _Marking(marker=str(marker)),
              ExactDedup(), _WaitingWarmUp(marker=str(marker), note=str(note)), WriteParquet()],
             executor=ExecutorConfig(processes=True)).run(
        output=tmp_path / "run", executor="dask", workers=2, progress=False)
    assert_accounting(tmp_path / "run")
    assert json.loads(note.read_text())["saw_marker"]  # segment 0 ran during the warm-up
    batches = (tmp_path / "warm.json.batches").read_text().split()
    assert batches and set(batches) == {"True"}  # the warmed stage's segment waited for it


class _Compiling(BatchStage):
    """A warm-up that lasts until the run has said that it still compiles."""

    type = "test_compiling_stage"
    said: ClassVar[threading.Event] = threading.Event()

    def warm_up(self) -> None:
        assert self.said.wait(60), "the warm-up was never announced"

    def process(self, batch: pa.Table) -> BatchResult:
        return BatchResult(kept=batch)


def test_a_long_warm_up_says_that_it_compiles_and_when_it_is_done(monkeypatch):
    from curator.runtime.driver import warm_up

    class Heard(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())
            if "still compiling its kernels" in record.getMessage():
                _Compiling.said.set()

    lines: list[str] = []
    monkeypatch.setattr(warm_up, "SLOW_S", 0.01)
    monkeypatch.setattr(warm_up, "STILL_S", 0.05)
    log = logging.getLogger("curator")
    handler, level = Heard(), log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        warm_up.warm_up_in_background([_Compiling()]).join(60)
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
    assert lines[0].startswith("test_compiling_stage: compiling its kernels (the first run")
    assert lines[1].startswith("test_compiling_stage: still compiling its kernels (")
    assert lines[-1].startswith("test_compiling_stage: kernels ready in ")
