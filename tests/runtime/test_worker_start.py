"""Local worker processes start ready: modules the pipeline's stages need are imported once in
the fork server, Dask's profiler is off and its monitors tick slower, and worker processes
already started also run the segments that release the GIL (no second cluster)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from curator.runtime.executors import DaskExecutor, ExecutorPool
from curator.stages.dedup.fuzzy import FuzzyDedup
from curator.stages.extract.html import ExtractHtml
from curator.stages.filters.heuristic import HeuristicFilter

NUMBA = "curator.kernels.numba_ready"


def test_stages_name_numba_only_when_their_work_uses_it():
    assert NUMBA in HeuristicFilter(presets=["gopher_repetition"]).preload()
    assert NUMBA not in HeuristicFilter(presets=["c4", "fineweb"]).preload()
    assert NUMBA in FuzzyDedup().preload()
    assert "curator.stages.filters.heuristic" in HeuristicFilter(presets=["c4"]).preload()
    assert "trafilatura" in ExtractHtml(extractor="trafilatura").preload()
    assert "trafilatura" not in ExtractHtml(extractor="resiliparse").preload()


def test_worker_processes_fork_with_the_preloaded_modules():
    # A fresh interpreter: the fork server is started once per process, with the first list.
    script = textwrap.dedent(f"""
        import sys
        from curator.runtime.executors import DaskExecutor
        ex = DaskExecutor(workers=1, processes=True, preload=[{NUMBA!r}])
        def probe():
            import dask
            return ({NUMBA!r} in sys.modules, "curator.runtime.shard_task" in sys.modules,
                    dask.config.get("distributed.worker.profile.enabled"),
                    dask.config.get("distributed.admin.tick.interval"))
        print(list(ex.client.run(probe).values()))
        ex.close()
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[(True, True, False, '1s')]"


def test_segments_that_release_the_gil_reuse_started_worker_processes():
    with ExecutorPool("dask", 1, None, None, None) as pool:
        processes = pool.get(holds_gil=True)
        assert pool.get(holds_gil=False) is processes
    with ExecutorPool("dask", 1, None, None, None) as pool:
        threads = pool.get(holds_gil=False)
        assert isinstance(threads, DaskExecutor)
        assert pool.get(holds_gil=True) is not threads  # processes are started for GIL work
