"""Sandbox children fork from the worker (everything it imported comes along), except for GPU
stages; a forked child that never gets ready is replaced by a fresh interpreter."""

from __future__ import annotations

import pyarrow as pa
import pytest

from curator.runtime import sandbox
from curator.runtime.sandbox import Sandbox
from tests.runtime import fault_stages
from tests.runtime.fault_stages import Marked


def _batch(n: int = 3) -> pa.Table:
    return pa.table({"id": [f"d{i}" for i in range(n)], "text": ["x" * (i + 1) for i in range(n)]})


@pytest.fixture
def marked(monkeypatch):
    monkeypatch.setattr(fault_stages, "MARK", "set-by-the-test")


def test_a_child_forks_from_the_worker_with_its_state(marked):
    box = Sandbox(Marked(), "marked")
    try:
        result = box.run(_batch())
        assert box.fork
        assert result.kept.column("mark").to_pylist() == ["set-by-the-test"] * 3
        assert result.kept.column("id").to_pylist() == ["d0", "d1", "d2"]
    finally:
        box.release()


def test_a_forked_child_that_never_gets_ready_is_replaced_by_a_fresh_interpreter(
        marked, monkeypatch):
    monkeypatch.setattr(sandbox, "FORK_READY_S", 1.0)
    box = Sandbox(Marked(hang_if_forked=True), "marked")
    try:
        result = box.run(_batch())
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
