"""Sandbox children fork from the worker (everything it imported comes along), except for GPU
stages; a forked child that never gets ready is replaced by a fresh interpreter. One child serves
every stage of a segment; a marking stage gets chunks; a document that never finishes fails at
``timeout_s`` alone; a child killed under a document runs it again alone (issue 27)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import ClassVar

import pyarrow as pa
import pytest

from curator.batch import BatchResult
from curator.runtime.worker import sandbox
from curator.runtime.worker.sandbox import Sandbox, each_document, run_sandboxed
from curator.stages.base import BatchStage
from tests.runtime import fault_stages
from tests.runtime.fault_stages import Marked


def _batch(n: int = 3) -> pa.Table:
    return pa.table({"id": [f"d{i}" for i in range(n)], "text": ["x" * (i + 1) for i in range(n)]})


@pytest.fixture
def marked(monkeypatch):
    monkeypatch.setattr(fault_stages, "MARK", "set-by-the-test")


def test_a_child_forks_from_the_worker_with_its_state(marked):
    box = Sandbox()
    try:
        result = box.run(Marked(), "marked", _batch())
        assert box.fork
        assert result.kept.column("mark").to_pylist() == ["set-by-the-test"] * 3
        assert result.kept.column("id").to_pylist() == ["d0", "d1", "d2"]
    finally:
        box.release()


def test_a_forked_child_that_never_gets_ready_is_replaced_by_a_fresh_interpreter(
        marked, monkeypatch):
    monkeypatch.setattr(sandbox, "FORK_READY_S", 1.0)
    box = Sandbox()
    try:
        result = box.run(Marked(hang_if_forked=True), "marked", _batch())
        assert not box.fork
        assert result.kept.column("mark").to_pylist() == ["imported"] * 3  # re-imported
    finally:
        box.release()


def test_gpu_stages_never_fork():
    class GpuMarked(Marked):
        type = "test_gpu_marked"

        def resources(self) -> dict[str, float]:
            return {"GPU": 1}

    assert not sandbox.forks(GpuMarked())
    assert sandbox.forks(Marked())


# ---- issue 27: one child per segment, chunks marked document by document, deaths judged alone
class Counting(BatchStage):
    """Adds each text's length; writes ``pid rows`` to ``calls`` on every call. HANG never
    returns; DIE kills its process; WAIT waits for ``folder/go`` after writing
    ``folder/started-<pid>``; BOOM kills its process when it is not alone in the call."""

    marks_documents: ClassVar[bool] = True
    calls: str
    folder: str = ""

    def process(self, batch: pa.Table) -> BatchResult:
        with open(self.calls, "a") as f:
            f.write(f"{os.getpid()} {batch.num_rows}\n")
        lengths = []
        texts = batch.column("text").to_pylist()
        for text in each_document(texts):
            if text == "HANG":
                time.sleep(10**6)
            if text == "DIE":
                os._exit(3)
            if text == "WAIT":
                Path(self.folder, f"started-{os.getpid()}").touch()
                while not Path(self.folder, "go").exists():
                    time.sleep(0.02)
            lengths.append(len(text))
        if "BOOM" in texts and len(texts) > 1:  # outside any one document
            os._exit(4)
        return BatchResult(kept=batch.append_column("n", pa.array(lengths)))


class RowByRow(Counting):
    """The same without marking: the sandbox gives it one row at a time."""

    marks_documents: ClassVar[bool] = False


def _texts(*texts: str) -> pa.Table:
    return pa.table({"id": [f"d{i}" for i in range(len(texts))], "text": list(texts)})


def _calls(path: Path) -> list[tuple[int, int]]:
    return [tuple(map(int, line.split())) for line in path.read_text().splitlines()]


def test_one_child_serves_every_stage_of_a_segment(tmp_path):
    first, second = Counting(calls=str(tmp_path / "a")), RowByRow(calls=str(tmp_path / "b"))
    for _ in range(2):  # batch after batch
        kept = run_sandboxed(first, "first", _texts("x", "yy")).kept
        kept = run_sandboxed(second, "second", kept.drop_columns(["n"])).kept
        assert kept.column("n").to_pylist() == [1, 2]
    pids = {pid for pid, _ in _calls(tmp_path / "a") + _calls(tmp_path / "b")}
    assert len(pids) == 1 and os.getpid() not in pids


def test_a_marking_stage_gets_chunks_of_rows_in_one_call(tmp_path):
    box = Sandbox()
    try:
        result = box.run(Counting(calls=str(tmp_path / "calls")), "c", _texts(*["ab"] * 300))
        assert result.kept.num_rows == 300
        assert [rows for _, rows in _calls(tmp_path / "calls")] == [sandbox.CHUNK_ROWS, 44]
    finally:
        box.release()


@pytest.mark.parametrize("stage", [Counting, RowByRow])
def test_a_document_that_never_finishes_fails_at_timeout_s_alone(tmp_path, stage):
    box = Sandbox()
    try:
        result = box.run(stage(calls=str(tmp_path / "calls"), timeout_s=1), "c",
                         _texts("a", "bb", "HANG", "cccc", "d"))
        assert result.kept.column("id").to_pylist() == ["d0", "d1", "d3", "d4"]
        [failure] = result.failed
        assert (failure.id, failure.reason) == ("d2", "timeout")
        assert "still running after 1 s" in failure.error
    finally:
        box.release()


@pytest.mark.parametrize("stage", [Counting, RowByRow])
def test_a_child_killed_from_outside_runs_its_document_again_alone(tmp_path, stage):
    """Issue 27, defect 5: a sandbox child killed from outside lost its page for good. The
    document waits (provably: until the test says go) while its child is killed; run again
    alone in a new child, it is kept."""
    box = Sandbox()
    done: list = []
    work = threading.Thread(target=lambda: done.append(box.run(
        stage(calls=str(tmp_path / "calls"), folder=str(tmp_path)), "c",
        _texts("a", "WAIT", "b"))))
    work.start()
    try:
        deadline = time.monotonic() + 60
        while not (started := list(tmp_path.glob("started-*"))):
            assert work.is_alive() and time.monotonic() < deadline, done
            time.sleep(0.02)
        os.kill(int(started[0].name.split("-")[1]), signal.SIGKILL)
        (tmp_path / "go").touch()
        work.join(60)
        [result] = done
        assert result.failed == []
        assert result.kept.column("id").to_pylist() == ["d0", "d1", "d2"]
    finally:
        (tmp_path / "go").touch()
        work.join(60)
        box.release()


@pytest.mark.parametrize("stage", [Counting, RowByRow])
def test_a_document_that_kills_every_child_is_worker_died(tmp_path, stage):
    box = Sandbox()
    try:
        result = box.run(stage(calls=str(tmp_path / "calls")), "c", _texts("a", "DIE", "b"))
        assert result.kept.column("id").to_pylist() == ["d0", "d2"]
        [failure] = result.failed
        assert (failure.id, failure.reason) == ("d1", "worker_died")
        assert "exited with code 3" in failure.error
    finally:
        box.release()


def test_a_chunk_lost_outside_its_documents_is_run_again_row_by_row(tmp_path):
    box = Sandbox()
    try:
        result = box.run(Counting(calls=str(tmp_path / "calls")), "c",
                         _texts("a", "BOOM", "b"))
        assert (result.kept.column("n").to_pylist(), result.failed) == ([1, 4, 1], [])
        assert [rows for _, rows in _calls(tmp_path / "calls")] == [3, 1, 1, 1]
    finally:
        box.release()
