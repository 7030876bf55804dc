"""Shard tasks on an executor, with their two ways of going wrong handled on the driver:

* a task that stops the run (``CurationError``: ``on_error: fail``, a failure budget) comes back
  as a value and is raised here, so the cluster neither retries it nor logs its traceback;
* a task whose worker died each time it was tried runs again with every stage in a sandbox, so
  that the documents that kill a process fail alone (reason ``worker_died``) and the rest of the
  shard goes on;
* a task whose input cannot be had in this run (``InputUnavailable``: a download that failed for
  good) comes back as :class:`Left`: its shard is not committed, the others go on.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator

from curator.batch import InputUnavailable
from curator.runtime.cluster.executors import Executor, WorkerDied
from curator.runtime.errors import CurationError
from curator.runtime.worker.memory import memory_returned
from curator.runtime.worker.shard_task import ShardTask, run_shard_task
from curator.store.records import ShardManifest

log = logging.getLogger("curator")


@dataclasses.dataclass
class _Stopped:
    error: CurationError


@dataclasses.dataclass
class Left:
    """A shard left not done: its input could not be had (``url``, ``error``, ``reason``)."""

    part: str
    label: str
    url: str
    error: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return dataclasses.asdict(self)


def _run(task: ShardTask) -> ShardManifest | _Stopped | Left:
    with memory_returned():
        try:
            return run_shard_task(task)
        except CurationError as err:
            return _Stopped(err)
        except InputUnavailable as err:
            return Left(task.shard.part, task.shard.label or task.shard.path, err.url, err.error,
                        err.reason)


def run_shard_tasks(ex: Executor, tasks: list[ShardTask],
                    resources: dict[str, float]) -> Iterator[ShardManifest | Left]:
    """Each task's manifest (or :class:`Left`), as tasks complete; those whose worker died are
    re-run isolated."""
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


def _manifest(result: ShardManifest | _Stopped | Left) -> ShardManifest | Left:
    if isinstance(result, _Stopped):
        raise result.error
    return result
