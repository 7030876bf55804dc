"""The server that local Dask worker processes fork from (``multiprocessing``'s forkserver).

Forking from it takes half the start-up of a fresh interpreter per worker (2.3 s -> 1.0 s for 8
workers), and whatever it imported, every worker starts with: Dask, curator's task runner and
the pipeline's stage modules, imported once instead of once per worker."""

from __future__ import annotations

from multiprocessing import forkserver, get_context

#: What the server imports (distributed's own list, then ours), before the stages' modules.
WORKER_MODULES = ("distributed", "dask", "msgpack", "cloudpickle", "tornado", "toolz", "numpy",
                  "curator.runtime.cluster.worker_setup", "curator.runtime.worker.shard_task",
                  "curator.runtime.driver.phases", "pyarrow.parquet")


def start_fork_server(modules: list[str]) -> None:
    """Start the server; it imports ``WORKER_MODULES`` and ``modules`` in the background while
    this process goes on. A server already running (started earlier in this process) keeps what
    it has."""
    get_context("forkserver").set_forkserver_preload(
        list(dict.fromkeys((*WORKER_MODULES, *modules))))
    forkserver.ensure_running()
