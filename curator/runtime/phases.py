"""The runtime's side of a dataset stage: restartable phases (each task commits its files and
then a marker; a restarted run skips tasks whose marker matches the configuration), the shared
removal phase, side inputs.

Each phase's wall seconds and task count are kept (``phase_times``: the stage's
``stats.json`` entry lists them under ``phases``). A phase that an earlier, cut run of the
same configuration finished whole reports the seconds that run saved for it (the segment's
``_manifests/segment-NN/phases.json``, beside the manifests: timings, not output); a phase
resumed part-way reports this run's seconds only."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

from curator import halt
from curator.batch import ID, REASON
from curator.commit import commit_files, temporary_for, write_json_atomic
from curator.counts import StageCount
from curator.io.parquet import read_part
from curator.runtime.errors import CurationError
from curator.runtime.executors import WorkerDied
from curator.runtime.memory import memory_returned
from curator.runtime.rundir import MANIFESTS, REJECTED_COMPRESSION, RunDir
from curator.stages.context import Decide


@dataclass
class PhaseContext:
    """Implements :class:`curator.stages.context.DatasetContext` for one stage of one run."""

    run_dir: RunDir
    work_dir: Path
    executor: Any
    stage_name: str
    stage_type: str
    fingerprint: str
    on_error: str
    rejected: Literal["ids", "documents"]
    batch_bytes: int
    progress: Callable[[str, int, int], None] | None = None
    intermediate_compression: str = "none"  # of the kept parts the removal phase writes
    phases: dict[str, dict[str, Any]] = field(default_factory=dict)

    def phase_times(self) -> dict[str, dict[str, Any]]:
        """``{phase: {"seconds": wall seconds, "tasks": tasks}}`` in the order they ran."""
        return {name: dict(entry) for name, entry in self.phases.items()}

    def run_phase(self, phase: str, fn: Callable[[Any], dict], tasks: list[Any],
                  keys: list[str], resources: dict[str, float] | None = None) -> list[dict]:
        started = time.perf_counter()
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
        self._report(phase, len(results), len(tasks))
        run_keys = [f"{self.stage_name}-{phase}-{key}" for _, key in todo]
        finished = self.executor.map(_keyed, [(fn, task, key, phase) for task, key in todo],
                                     run_keys, resources or {})
        for item in finished:
            if isinstance(item, WorkerDied):
                raise CurationError(f"{self.stage_name}: a worker died each time it ran phase "
                                    f"{phase!r} task {item.task[2]!r}")
            key, result = item
            write_json_atomic(markers / f"{key}.json",
                              {"fingerprint": self.fingerprint, "result": result})
            halt.point(f"phase-done:{phase}", key)
            results[key] = result
            self._report(phase, len(results), len(tasks))
        self._time(phase, len(tasks), bool(todo), time.perf_counter() - started)
        return [results[k] for k in keys]

    def _time(self, phase: str, tasks: int, ran: bool, seconds: float) -> None:
        """Record the phase's seconds; a phase an earlier run finished keeps that run's."""
        path = self.run_dir.root / MANIFESTS / self.work_dir.name / "phases.json"
        saved: dict[str, Any] = {}
        if path.exists():
            saved = json.loads(path.read_text(encoding="utf-8"))
            if saved.get("fingerprint") != self.fingerprint:
                saved = {}
        times = saved.get("phases", {})
        if not ran and phase in times:
            seconds = times[phase]["seconds"]
        self.phases[phase] = {"seconds": round(seconds, 4), "tasks": tasks}
        times[phase] = {"seconds": round(seconds, 4)}
        write_json_atomic(path, {"fingerprint": self.fingerprint, "phases": times})

    def _report(self, phase: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(f"{self.stage_name}: {phase}", done, total)

    def remove(self, parts: list[Path], decide: Decide,
               resources: dict[str, float] | None = None) -> tuple[list[Path], StageCount]:
        out = self.work_dir / "out"
        tasks = [_RemoveTask(i, str(p), str(out), decide, str(self.run_dir.root),
                             self.stage_name, self.rejected, self.intermediate_compression)
                 for i, p in enumerate(parts)]
        keys = [f"part-{i:05d}" for i in range(len(parts))]
        results = self.run_phase("remove", _remove_part, tasks, keys, resources)
        count = self.count()
        for result in results:
            count = count.merge(StageCount.from_dict(
                {"failed": 0, **result, "name": self.stage_name, "type": self.stage_type}))
        return [out / f"{k}.parquet" for k in keys], count

    def side_input(self, path: str) -> Path:
        local = Path(path)
        if "://" not in path:
            return local.resolve()
        digest = xxhash.xxh3_64_hexdigest(path.encode())
        target = self.work_dir / "side" / f"{digest}-{path.rsplit('/', 1)[-1]}"
        if not target.exists():
            pending: list[tuple[Path, Path]] = []
            with fsspec.open(path, "rb") as src, open(temporary_for(target, pending), "wb") as dst:
                while block := src.read(8 << 20):
                    dst.write(block)
            commit_files(pending)
        return target

    def count(self) -> StageCount:
        return StageCount(self.stage_name, self.stage_type)


def _keyed(item: tuple[Callable[[Any], dict], Any, str, str]) -> tuple[str, dict]:
    fn, task, key, phase = item
    with memory_returned():
        result = fn(task)
    halt.point(f"phase-task:{phase}", key)
    return key, result


@dataclass(frozen=True)
class _RemoveTask:
    part: int
    path: str
    out: str
    decide: Decide
    run_dir: str
    stage: str
    rejected: str
    compression: str


def _remove_part(task: _RemoveTask) -> dict:
    table = read_part(task.path)
    decisions = task.decide(task.part, table)
    for name, values in decisions.columns.items():
        if name in table.column_names:
            table = table.set_column(table.column_names.index(name), name, values)
        else:
            table = table.append_column(name, values)
    drop = decisions.removed
    kept = table.filter(pa.array(~drop))
    removed = table.filter(pa.array(drop))
    removed = removed.append_column(REASON, pa.array([decisions.reason] * removed.num_rows,
                                                     pa.string()))
    for name, values in decisions.removed_columns.items():
        removed = removed.append_column(name, values)
    if task.rejected == "ids":
        removed = removed.select([ID, REASON, *decisions.removed_columns, *decisions.columns])
    key = f"part-{task.part:05d}"
    pending: list[tuple[Path, Path]] = []
    for final, data, compression in (
            (Path(task.out) / f"{key}.parquet", kept, task.compression),
            (RunDir(task.run_dir).rejected_path(task.stage, key), removed,
             REJECTED_COMPRESSION)):
        pq.write_table(data, temporary_for(final, pending), compression=compression)
    commit_files(pending)
    n_removed = int(np.count_nonzero(drop))
    reasons = Counter({decisions.reason: n_removed} if n_removed else {})
    count = StageCount(task.stage, "", table.num_rows, kept.num_rows, n_removed,
                       removed_by_reason=reasons)
    count.observe_kept(kept)
    return count.to_dict()
