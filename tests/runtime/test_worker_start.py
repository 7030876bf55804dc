"""Local worker processes start ready: modules the pipeline's stages need are imported once in
the fork server, Dask's profiler is off and its monitors tick slower, and worker processes
already started also run the segments that release the GIL (no second cluster)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap

import pytest

import curator
from curator.runtime.cluster.executors import (
    GPU_TASKS,
    WORKERS_PER_GPU_UP_TO,
    DaskExecutor,
    ExecutorPool,
    gpu_workers_per_device,
)
from curator.runtime.cluster.threads import THREADS_UP_TO
from curator.stages import BUILTIN_STAGES, BuiltinStage
from curator.stages.base import stage_class
from curator.stages.dedup.fuzzy import FuzzyDedup
from curator.stages.extract.html import ExtractHtml
from curator.stages.filters.heuristic import HeuristicFilter

NUMBA = "curator.kernels.numba_ready"


def test_stages_preload_their_module_and_the_libraries_their_tasks_import():
    assert HeuristicFilter().preload() == ("curator.stages.filters.heuristic", NUMBA)
    assert NUMBA in FuzzyDedup().preload()
    assert "trafilatura" in ExtractHtml().preload()


@pytest.mark.parametrize("entry", BUILTIN_STAGES, ids=lambda entry: entry.type)
def test_the_stage_table_agrees_with_the_stage_classes(entry: BuiltinStage):
    """curator.launch decides from the table before any stage class is imported."""
    cls = stage_class(entry.type)
    assert cls.type == entry.type and getattr(importlib.import_module(entry.module),
                                              entry.cls) is cls
    assert cls.__name__ == entry.cls and getattr(curator, entry.cls) is cls
    assert entry.releases_gil == (not cls.holds_gil)
    for module in entry.preload:
        importlib.import_module(module)  # what the fork server will import


def test_types_are_declared_once():
    types = [entry.type for entry in BUILTIN_STAGES]
    assert len(types) == len(set(types))


def test_worker_processes_fork_with_the_preloaded_modules():
    # A fresh interpreter: the fork server is started once per process, with the first list.
    script = textwrap.dedent(f"""
        import sys
        from curator.runtime.cluster.executors import DaskExecutor
        ex = DaskExecutor(workers=1, processes=True, preload=[{NUMBA!r}])
        def probe():
            import dask
            return ({NUMBA!r} in sys.modules, "curator.runtime.worker.shard_task" in sys.modules,
                    dask.config.get("distributed.worker.profile.enabled"),
                    dask.config.get("distributed.admin.tick.interval"))
        print(list(ex.client.run(probe).values()))
        ex.close()
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[(True, True, False, '1s')]"


@pytest.mark.parametrize("workers", [THREADS_UP_TO, THREADS_UP_TO + 1])
def test_gil_free_segments_run_on_threads_only_on_a_small_cluster(workers):
    with ExecutorPool("dask", workers, None, None, None) as pool:
        small = workers <= THREADS_UP_TO
        assert pool.runs_here(holds_gil=False) is small
        assert pool.runs_here(holds_gil=True) is False
        assert (pool.get(holds_gil=False) is pool.get(holds_gil=True)) is not small
    with ExecutorPool("dask", THREADS_UP_TO + 1, None, None, False) as pool:
        assert pool.runs_here(holds_gil=False)  # threads when the configuration says so


def test_segments_that_release_the_gil_reuse_started_worker_processes():
    with ExecutorPool("dask", 1, None, None, None) as pool:
        processes = pool.get(holds_gil=True)
        assert pool.get(holds_gil=False) is processes
    with ExecutorPool("dask", 1, None, None, None) as pool:
        threads = pool.get(holds_gil=False)
        assert isinstance(threads, DaskExecutor)
        assert pool.get(holds_gil=True) is not threads  # processes are started for GIL work


def _early(tmp_path, yaml_text: str, *options: str) -> str:
    """What ``curator.launch.start_early`` does for ``curate run CONFIG OPTIONS`` in a fresh
    interpreter: whether it started the fork server, and the server's import list."""
    config = tmp_path / "p.yaml"
    config.write_text(yaml_text)
    script = textwrap.dedent("""
        import sys
        from multiprocessing import forkserver
        from curator.launch import start_early
        started = start_early(sys.argv[1:])
        print(started, forkserver._forkserver._forkserver_pid is not None,
              " ".join(forkserver._forkserver._preload_modules))
    """)
    out = subprocess.run([sys.executable, "-c", script, "run", str(config), *options],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip()


EXTRACT = "stages:\n  - {type: read_warc, path: x}\n  - {type: extract_html}\n"


def test_curate_run_starts_the_fork_server_before_the_cli_loads(tmp_path):
    started, running, modules = _early(tmp_path, EXTRACT).split(" ", 2)
    assert (started, running) == ("True", "True")
    assert {"curator.stages.extract.html", "trafilatura", "curator.runtime.worker.shard_task"} <= \
        set(modules.split())


GIL_FREE = "stages:\n  - {type: read_jsonl, path: x}\n  - {type: write_parquet}\n"


@pytest.mark.parametrize(("yaml_text", "options"), [
    (f"executor: {{workers: {THREADS_UP_TO + 1}}}\n" + GIL_FREE, ()),
    (GIL_FREE, ("--workers", str(THREADS_UP_TO + 1))),
    ("executor: {workers: 1}\n" + GIL_FREE, (f"--workers={THREADS_UP_TO + 1}",)),
])
def test_a_larger_cluster_starts_the_fork_server_for_a_pipeline_that_releases_the_gil(
        tmp_path, yaml_text, options):
    assert _early(tmp_path, yaml_text, *options).startswith("True True")


@pytest.mark.parametrize(("yaml_text", "options"), [
    (f"executor: {{workers: {THREADS_UP_TO}}}\n" + GIL_FREE, ()),  # threads
    (f"executor: {{workers: {THREADS_UP_TO + 1}}}\n" + GIL_FREE, ("--workers", "1")),
    (EXTRACT, ("--scheduler", "tcp://127.0.0.1:1")),  # joins a cluster
    (EXTRACT, ("--set", "executor.type=ray")),
    ("executor: {type: local}\n" + EXTRACT, ()),
    ("stages: [unclosed\n", ()),  # the CLI reports it
])
def test_no_fork_server_where_the_run_has_no_local_worker_processes(tmp_path, yaml_text,
                                                                    options):
    assert _early(tmp_path, yaml_text, *options).startswith("False False")


def _gpu_workers(pool: ExecutorPool) -> list[str]:
    """The ``CUDA_VISIBLE_DEVICES`` of each worker of the pool's cluster that offers ``GPU``."""
    client = pool.get(holds_gil=True).client
    info = client.scheduler_info(n_workers=-1)["workers"]
    gpu = [address for address, worker in info.items() if worker["resources"].get("GPU")]
    seen = client.run(lambda: __import__("os").environ.get("CUDA_VISIBLE_DEVICES"),
                      workers=gpu)
    return sorted(seen.values())


def test_each_card_gets_gpu_worker_processes_by_the_cpu_workers_it_has(monkeypatch):
    # the host work of a GPU phase (reading, decoding, writing) runs in its workers'
    # interpreters: one per GPU_TASKS CPU workers a card has, at most WORKERS_PER_GPU_UP_TO
    assert [gpu_workers_per_device(cpus, 1) for cpus in (1, 4, 8, 16, 64)] == [
        1, 1, 2, WORKERS_PER_GPU_UP_TO, WORKERS_PER_GPU_UP_TO]
    assert gpu_workers_per_device(48 * 4, 4) == WORKERS_PER_GPU_UP_TO  # a TSUBAME4 node
    assert gpu_workers_per_device(16, 1, asked=7) == 7
    # a worker given a card this machine lacks still starts (it touches no GPU here)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with ExecutorPool("dask", 2 * GPU_TASKS, None, None, True) as pool:
        assert _gpu_workers(pool) == ["0", "0"]
    with ExecutorPool("dask", 2, None, None, True, workers_per_gpu=3) as pool:
        assert _gpu_workers(pool) == ["0", "0", "0"]
