"""A pipeline's ``imports:`` on a Dask cluster: loaded by the scheduler (which unpickles the
tasks) and by every worker, including workers that start later (a restarted one, say), before
they unpickle a task whose stages come from those modules."""

from __future__ import annotations

from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin, WorkerPlugin

from curator.plugins import load_imports
from curator.runtime.errors import CurationError


class _WorkerImports(WorkerPlugin):
    def __init__(self, imports: list[str]) -> None:
        self.imports = imports

    def setup(self, worker: Any) -> None:
        load_imports(self.imports)


class _SchedulerImports(SchedulerPlugin):
    def __init__(self, imports: list[str]) -> None:
        self.imports = imports

    async def start(self, scheduler: Any) -> None:
        load_imports(self.imports)


def import_on_cluster(client: Any, imports: list[str]) -> None:
    """Load ``imports`` (resolved: absolute paths, module names) on the scheduler and workers."""
    try:
        client.register_plugin(_SchedulerImports(imports), name="curator-imports")
        client.register_plugin(_WorkerImports(imports), name="curator-imports")
    except Exception as err:  # an import the driver loaded fails on the cluster
        raise CurationError(f"the Dask cluster could not load the pipeline's imports: "
                            f"{type(err).__name__}: {err}") from None
