"""Shard tasks on an executor, with their two ways of going wrong handled on the driver:

* a task that stops the run (``CurationError``: ``on_error: fail``, a failure budget) comes back
  as a value and is raised here, so the cluster neither retries it nor logs its traceback;
* a task whose worker died each time it was tried runs again with every stage in a sandbox, so
  that the documents that kill a process fail alone (reason ``worker_died``) and the rest of the
  shard goes on.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator
from typing import Any

from curator.runtime.errors import CurationError
from curator.runtime.executors import Executor, WorkerDied
from curator.runtime.memory import memory_returned
from curator.runtime.shard_task import ShardTask, run_shard_task

log = logging.getLogger("curator")


@dataclasses.dataclass
class _Stopped:
    error: CurationError


def _run(task: ShardTask) -> dict[str, Any] | _Stopped:
    with memory_returned():
        try:
            return run_shard_task(task)
        except CurationError as err:
            return _Stopped(err)


def run_shard_tasks(ex: Executor, tasks: list[ShardTask],
                    resources: dict[str, float]) -> Iterator[dict[str, Any]]:
    """Each task's manifest, as tasks complete; those whose worker died are re-run isolated."""
    died = []
    for result in ex.map(_run, tasks, [t.key for t in tasks], resources):
        if isinstance(result, WorkerDied):
            log.warning("%s: its worker died each time it was tried; running it again with its "
                        "stages in a sandbox", result.task.shard.path)
            died.append(dataclasses.replace(result.task, isolate=True))
        else:
            yield _manifest(result)
    if not died:
        return
    for result in ex.map(_run, died, [f"{t.key}-isolated" for t in died], resources):
        if isinstance(result, WorkerDied):
            raise CurationError(f"{result.task.shard.path}: the worker died even with the "
                                "stages in a sandbox: reading or writing this shard kills it")
        yield _manifest(result)


def _manifest(result: dict[str, Any] | _Stopped) -> dict[str, Any]:
    if isinstance(result, _Stopped):
        raise result.error
    return result
