"""Restartable phases of a dataset-wide stage: each task commits its files and a marker, and a
restarted run skips the tasks whose marker matches the configuration."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curator.commit import write_json_atomic
from curator.runtime.errors import CurationError
from curator.runtime.executors import WorkerDied
from curator.runtime.rundir import RunDir


@dataclass
class DatasetContext:
    """What a dataset-wide stage gets: its work directory and the executor to map tasks on."""

    run_dir: RunDir
    work_dir: Path
    executor: Any
    stage_name: str
    fingerprint: str
    on_error: str
    rejected: str
    batch_bytes: int

    def run_phase(self, phase: str, fn: Callable[[Any], dict], tasks: list[Any],
                  keys: list[str], resources: dict[str, float] | None = None) -> list[dict]:
        """Run ``fn`` over ``tasks`` (skipping those already done); return every task's result.

        ``fn`` must commit its own files atomically and return a JSON-able dict; the marker
        holding that dict is written after it returns, so a task cut short is simply redone.
        """
        markers = self.work_dir / phase / "_done"
        results: dict[str, dict] = {}
        todo = []
        for task, key in zip(tasks, keys, strict=True):
            marker = markers / f"{key}.json"
            if marker.exists():
                saved = json.loads(marker.read_text(encoding="utf-8"))
                if saved.get("fingerprint") == self.fingerprint:
                    results[key] = saved["result"]
                    continue
            todo.append((task, key))
        run = [t for t, _ in todo]
        run_keys = [f"{self.stage_name}-{phase}-{k}" for _, k in todo]
        finished = self.executor.map(_keyed, [(fn, t, k) for t, (_, k) in zip(run, todo,
                                                                               strict=True)],
                                     run_keys, resources or {})
        for item in finished:
            if isinstance(item, WorkerDied):
                raise CurationError(f"{self.stage_name}: a worker died each time it ran phase "
                                    f"{phase!r} task {item.task[2]!r}")
            key, result = item
            write_json_atomic(markers / f"{key}.json",
                              {"fingerprint": self.fingerprint, "result": result})
            results[key] = result
        return [results[k] for k in keys]


def _keyed(item: tuple[Callable[[Any], dict], Any, str]) -> tuple[str, dict]:
    fn, task, key = item
    return key, fn(task)
