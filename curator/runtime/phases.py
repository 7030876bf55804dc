"""The runtime's side of a dataset stage: restartable phases (each task commits its files and
then a marker; a restarted run skips tasks whose marker matches the configuration), the shared
removal phase, side inputs.

Each phase's wall seconds and task count are kept (``phase_times``: the stage's
``stats.json`` entry lists them under ``phases``). A phase that an earlier, cut run of the
same configuration finished whole reports the seconds that run saved for it (the segment's
``_manifests/segment-NN/phases.json``, beside the manifests: timings, not output); a phase
resumed part-way reports this run's seconds only."""

from __future__ import annotations

import logging
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
from curator.commit import (
    DamagedRecord,
    commit_files,
    damage,
    facts,
    full_check,
    read_json,
    recording,
    temporary_for,
    write_json_atomic,
)
from curator.counts import StageCount
from curator.io.parquet import read_part
from curator.runtime.errors import CurationError
from curator.runtime.executors import WorkerDied
from curator.runtime.memory import memory_returned
from curator.runtime.rundir import MANIFESTS, REJECTED_COMPRESSION, RunDir
from curator.stages.context import Decide

log = logging.getLogger("curator")


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
    resumed: dict[str, set[str]] = field(default_factory=dict)  # phase -> keys an earlier run did

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
            saved = self._trusted(markers / f"{key}.json")
            if saved is not None:
                results[key] = saved["result"]
                continue
            todo.append((task, key))
        self.resumed[phase] = set(results)
        if results and todo:
            log.info("%s: %s: %d of %d tasks run again (%s)", self.stage_name, phase, len(todo),
                     len(tasks), _some([key for _, key in todo]))
        self._report(phase, len(results), len(tasks))
        run_keys = [f"{self.stage_name}-{phase}-{key}" for _, key in todo]
        finished = self.executor.map(_keyed, [(fn, task, key, phase, self.run_dir.root)
                                              for task, key in todo],
                                     run_keys, resources or {})
        for item in finished:
            if isinstance(item, WorkerDied):
                raise CurationError(f"{self.stage_name}: a worker died each time it ran phase "
                                    f"{phase!r} task {item.task[2]!r}")
            key, result, files = item
            write_json_atomic(markers / f"{key}.json",
                              {"fingerprint": self.fingerprint, "result": result, "files": files})
            halt.point(f"phase-done:{phase}", key)
            results[key] = result
            self._report(phase, len(results), len(tasks))
        self._time(phase, len(tasks), bool(todo), time.perf_counter() - started)
        return [results[k] for k in keys]

    def _trusted(self, marker: Path) -> dict | None:
        """A task's marker when this configuration wrote it and the files it records are whole;
        else None (the task runs again), with a warning naming what is damaged."""
        if not marker.exists():
            return None
        try:
            saved = read_json(marker)
        except DamagedRecord as err:
            log.warning("%s; the task runs again", err)
            return None
        if saved.get("fingerprint") != self.fingerprint:
            return None
        for file in saved.get("files", []):
            why = damage(self.run_dir.root / file["path"], file)
            if why is not None:
                log.warning("%s: %s; the phase task that wrote it runs again", file["path"], why)
                return None
        return saved

    def damaged_outputs(self, phase: str, keys: list[str]) -> list[str]:
        """Tasks of ``phase`` among ``keys`` whose recorded files are not whole, by checksum
        (checked in parallel on the executor)."""
        checks = []
        for key in keys:
            saved = read_json(self.work_dir / phase / "_done" / f"{key}.json")
            checks += [(key, str(self.run_dir.root / f["path"]), f) for f in saved["files"]]
        damaged = set()
        names = [f"verify-{key}-{Path(path).name}" for key, path, _ in checks]
        for outcome in self.executor.map(full_check, checks, names, {}):
            key, path, why = outcome if isinstance(outcome, tuple) else ("", "", None)
            if why is not None:
                log.warning("%s: %s; the %s task that wrote it runs again", path, why, phase)
                damaged.add(key)
        return sorted(damaged)

    def forget(self, phase: str, key: str) -> None:
        """Drop a task's marker: the next pass over the phase runs it again."""
        (self.work_dir / phase / "_done" / f"{key}.json").unlink(missing_ok=True)

    def _time(self, phase: str, tasks: int, ran: bool, seconds: float) -> None:
        """Record the phase's seconds; a phase an earlier run finished keeps that run's."""
        path = self.run_dir.root / MANIFESTS / self.work_dir.name / "phases.json"
        saved: dict[str, Any] = {}
        if path.exists():
            try:
                saved = read_json(path)
            except DamagedRecord:  # timings only: written again below
                saved = {}
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


def _keyed(item: tuple[Callable[[Any], dict], Any, str, str, str]
           ) -> tuple[str, dict, list[dict]]:
    """Run one phase task; return its key, result and the files it committed (with facts)."""
    fn, task, key, phase, root = item
    with memory_returned(), recording() as written:
        result = fn(task)
    files = [{"path": str(path.relative_to(root)) if path.is_relative_to(root) else str(path),
              **facts(path)} for path in written]
    halt.point(f"phase-task:{phase}", key)
    return key, result, files


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


def _some(keys: list[str], shown: int = 5) -> str:
    """The first ``shown`` keys, and how many more."""
    more = f", … {len(keys) - shown} more" if len(keys) > shown else ""
    return ", ".join(keys[:shown]) + more


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
