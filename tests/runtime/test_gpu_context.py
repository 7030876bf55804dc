"""GPU workers make their CUDA contexts ahead of their first tasks, when a stage of the run uses
the GPU; CPU workers never touch CUDA."""

from __future__ import annotations

import importlib.util

import pytest

from curator.runtime.cluster.executors import GPU_TASKS, ExecutorPool


def _tried(pool: ExecutorPool, asked: bool) -> dict[str, bool]:
    """Per worker (its kind, ``gpu`` or ``cpu``, and address): whether it tried to make a
    context (a GPU worker that was ``asked`` given a minute to get there, none otherwise)."""
    client = pool.get(True).client

    def tried() -> bool:
        import os

        from curator.runtime.cluster.gpu_context import TRIED

        return TRIED.wait(60 if asked and os.environ.get("CUDA_VISIBLE_DEVICES") else 0)

    info = client.scheduler_info(n_workers=-1)["workers"]
    kinds = {address: "gpu" if w["resources"].get("GPU") else "cpu" for address, w in info.items()}
    return {f"{kinds[address]} {address}": done for address, done in client.run(tried).items()}


def test_only_gpu_workers_try_to_make_a_context_and_only_when_asked(monkeypatch):
    # a worker given a card this machine lacks still starts; it tries, and fails quietly
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with ExecutorPool("dask", GPU_TASKS, None, None, True) as pool:
        pool.make_gpu_contexts()  # before the cluster starts: it asks as it starts
        tried = _tried(pool, asked=True)
    assert sorted(kind.split()[0] for kind, done in tried.items() if done) == ["gpu"]
    assert sorted(kind.split()[0] for kind in tried) == ["cpu"] * GPU_TASKS + ["gpu"]
    with ExecutorPool("dask", GPU_TASKS, None, None, True) as pool:
        pool.get(True)
        assert not any(_tried(pool, asked=False).values())  # a run without GPU stages
        pool.make_gpu_contexts()  # after it started: at once
        assert [k.split()[0] for k, done in _tried(pool, asked=True).items() if done] == ["gpu"]


@pytest.mark.skipif(importlib.util.find_spec("cupy") is None, reason="needs CuPy and a GPU")
def test_a_gpu_worker_holds_its_context_before_any_task():
    with ExecutorPool("dask", GPU_TASKS, None, None, True) as pool:
        pool.make_gpu_contexts()
        client = pool.get(True).client
        info = client.scheduler_info(n_workers=-1)["workers"]
        gpu = [address for address, w in info.items() if w["resources"].get("GPU")]

        def pool_bytes() -> int:
            import cupy

            from curator.runtime.cluster.gpu_context import TRIED

            TRIED.wait(60)
            return cupy.get_default_memory_pool().total_bytes()

        assert all(held > 0 for held in client.run(pool_bytes, workers=gpu).values())
