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
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import xxhash

from curator import halt
from curator.batch import REASON, TEXT
from curator.commit import (
    Commit,
    DamagedRecord,
    checksum,
    damage,
    facts,
    full_check,
    recording,
)
from curator.counts import StageCount
from curator.io.parquet import PartFormat, read_part
from curator.rejected import ids_and_sample, rewritten
from curator.runtime.cluster.executors import WorkerDied
from curator.runtime.errors import CurationError
from curator.runtime.worker.cpu_clock import cpu_now, cpu_since, task_running
from curator.runtime.worker.memory import memory_returned
from curator.stages.context import Decide, Decisions, PhaseResult, R
from curator.store.doc_index import write_piece
from curator.store.keys import digest
from curator.store.records import PhaseMarker
from curator.store.run_dir import REJECTED_COMPRESSION, RunDir
from curator.store.spec import RunSpec

log = logging.getLogger("curator")


@dataclass
class PhaseContext:
    """Implements :class:`curator.stages.context.DatasetContext` for one stage of one run."""

    run_dir: RunDir
    work_dir: Path
    executor: Any
    stage_name: str
    stage_type: str
    fingerprint: str  # the stage's key: the stage and every part it reads, by content
    spec: RunSpec
    progress: Callable[[str, int, int], None] | None = None
    stage_key: str = ""  # the stage's own key (without its parts): of tasks that read one part
    checksums: dict[str, str] = field(default_factory=dict)  # part path -> content checksum
    phases: dict[str, dict[str, Any]] = field(default_factory=dict)
    resumed: dict[str, set[str]] = field(default_factory=dict)  # phase -> keys an earlier run did
    per_part: set[str] = field(default_factory=set)  # phases whose tasks each read one part
    spans: list[tuple[str, float, float]] = field(default_factory=list)  # phase, wall start, end
    part_format: PartFormat | None = None  # the removal's parts' (``_RemoveTask``)
    tasks_cpu_seconds: float = 0.0  # of the phase tasks run outside the driver's thread
    gpu_seconds: float = 0.0  # of the phase tasks that held a GPU

    @property
    def rejected(self) -> Literal["ids", "documents"]:
        return self.spec.rejected

    @property
    def batch_bytes(self) -> int:
        return self.spec.batch_bytes

    def phase_times(self) -> dict[str, dict[str, Any]]:
        """``{phase: {"seconds": wall seconds, "cpu_seconds": ..., "tasks": tasks}}`` in the
        order they ran."""
        return {name: dict(entry) for name, entry in self.phases.items()}

    def run_phase(self, phase: str, fn: Callable[[Any], R], tasks: list[Any], keys: list[str],
                  result: type[R], resources: dict[str, float] | None = None,
                  reads: list[Path] | None = None) -> list[R]:
        started, cpu, gpu = time.perf_counter(), 0.0, 0.0
        if reads is not None:
            self.per_part.add(phase)
        results: dict[str, R] = {}
        todo = []
        own = self._task_keys(phase, keys, reads)
        for task, key in zip(tasks, keys, strict=True):
            marker = self.run_dir.marker_path(self.work_dir, phase, key)
            saved = self._trusted(marker, own[key])
            if saved is not None:
                try:
                    results[key] = result.from_record(saved.result)
                    continue
                except TypeError as err:
                    log.warning("%s: %s; the task runs again", marker, err)
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
            key, done, files, clock = item
            cpu += clock.cpu
            gpu += clock.wall if (resources or {}).get("GPU") else 0.0
            # a task run in the driver's thread: its thread's seconds are the driver's
            self.tasks_cpu_seconds += clock.cpu - (clock.thread if clock.where == _here() else 0)
            self.gpu_seconds += clock.wall if (resources or {}).get("GPU") else 0.0
            if not isinstance(done, result):
                raise CurationError(f"{self.stage_name}: phase {phase!r} task {key!r} returned "
                                    f"{type(done).__name__}, not {result.__name__}")
            self.run_dir.write_marker(self.run_dir.marker_path(self.work_dir, phase, key),
                                      PhaseMarker(own[key], done.to_record(), files))
            halt.point(f"phase-done:{phase}", key)
            results[key] = done
            self._report(phase, len(results), len(tasks))
        self._time(phase, len(tasks), bool(todo), {
            "seconds": time.perf_counter() - started, "cpu_seconds": cpu,
            **({"gpu_seconds": gpu} if gpu else {})})
        self.spans.append((phase, time.time() - (time.perf_counter() - started), time.time()))
        self.phases[phase]["reused"] = len(self.resumed[phase])
        return [results[k] for k in keys]

    def _task_keys(self, phase: str, keys: list[str], reads: list[Path] | None
                   ) -> dict[str, str]:
        """Each task's key: the stage's key; for a task that reads one part alone (``reads``),
        the stage's own key and that part's content, so that it is reused while its part is
        unchanged whatever the other parts are."""
        if reads is None or not self.stage_key:
            return dict.fromkeys(keys, self.fingerprint)
        out = {}
        for key, path in zip(keys, reads, strict=True):
            checksum = self.checksums.get(str(path))
            out[key] = digest([self.stage_key, phase, checksum]) if checksum else \
                self.fingerprint
        return out

    def _trusted(self, marker: Path, key: str) -> PhaseMarker | None:
        """A task's marker when it was written under ``key`` and the files it records are
        whole; else None (the task runs again), with a warning naming what is damaged."""
        try:
            saved = self.run_dir.read_marker(marker)
        except DamagedRecord as err:
            log.warning("%s; the task runs again", err)
            return None
        if saved is None or saved.key != key:
            return None
        for file in saved.files:
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
            saved = self.run_dir.read_marker(self.run_dir.marker_path(self.work_dir, phase, key))
            checks += [(key, str(self.run_dir.path_of(f["path"])), f)
                       for f in (saved.files if saved else [])]
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
        self.run_dir.marker_path(self.work_dir, phase, key).unlink(missing_ok=True)

    def _time(self, phase: str, tasks: int, ran: bool, timing: dict[str, float]) -> None:
        """Record what the phase took; a phase an earlier run finished keeps that run's."""
        times = self.run_dir.phase_times(self.work_dir, self.fingerprint)
        if not ran and phase in times:
            timing = times[phase]
        timing = {name: round(value, 4) for name, value in timing.items()}
        self.phases[phase] = {**timing, "tasks": tasks}
        times[phase] = timing
        self.run_dir.write_phase_times(self.work_dir, self.fingerprint, times)

    def _report(self, phase: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(f"{self.stage_name}: {phase}", done, total)

    def remove(self, parts: list[Path], decide: Decide,
               resources: dict[str, float] | None = None) -> tuple[list[Path], StageCount]:
        out = self.run_dir.outputs_dir(self.work_dir)
        keys = [p.stem for p in parts]  # each output named after the part it comes from
        tasks = [_RemoveTask(i, key, str(p), str(out), decide, self.stage_name, self.spec,
                             self.part_format)
                 for i, (key, p) in enumerate(zip(keys, parts, strict=True))]
        results = self.run_phase("remove", _remove_part, tasks, keys, _RemoveResult, resources)
        self._retire_parts(set(keys), out)
        count = self.count()
        for result in results:
            count = count.merge(StageCount.from_dict(
                {"failed": 0, **result.count, "name": self.stage_name, "type": self.stage_type}))
        return [out / f"{k}.parquet" for k in keys], count

    def _retire_parts(self, current: set[str], out: Path) -> None:
        """Outputs of parts this configuration no longer has (an input gone, a shard cut into
        other parts): its kept parts and its published rejected files, removed."""
        rejected = self.run_dir.rejected_path(self.stage_name, "part").parent
        rewrites = self.run_dir.rewrites_path(self.stage_name, "part").parent
        for folder in (out, rejected, rewrites):
            for path in folder.glob("part-*.parquet"):
                if path.stem not in current:
                    path.unlink()
        for path in out.glob("part-*.kept.json"):  # PartFormat.figures_path's
            if path.name.removesuffix(".kept.json") not in current:
                path.unlink()

    def output_checksum(self, path: Path) -> str:
        """The checksum the removal phase recorded for its output ``path`` ("" if none)."""
        try:
            saved = self.run_dir.read_marker(self.run_dir.removal_marker(self.work_dir, path.stem))
        except DamagedRecord:
            return ""
        return saved.checksum(self.run_dir.recorded(path)) if saved else ""

    def side_input(self, path: str) -> Path:
        local = Path(path)
        if "://" not in path:
            return local.resolve()
        digest = xxhash.xxh3_64_hexdigest(path.encode())
        target = self.work_dir / "side" / f"{digest}-{path.rsplit('/', 1)[-1]}"
        if not target.exists():
            pending = Commit()
            with fsspec.open(path, "rb") as src, open(pending.temporary_for(target), "wb") as dst:
                while block := src.read(8 << 20):
                    dst.write(block)
            pending.publish()
        return target

    def count(self) -> StageCount:
        return StageCount(self.stage_name, self.stage_type)


@dataclass(frozen=True)
class TaskClock:
    """What a phase task took, and where it ran: its CPU seconds (runtime/worker/cpu_clock.py),
    those of its own thread, wall seconds, process and thread."""

    cpu: float
    thread: float
    wall: float
    where: tuple[int, int]


def _keyed(item: tuple[Callable[[Any], PhaseResult], Any, str, str, str]
           ) -> tuple[str, PhaseResult, list[dict], TaskClock]:
    """Run one phase task; return its key, result, the files it committed (with facts) and
    what it took."""
    fn, task, key, phase, root = item
    with task_running(), memory_returned(), recording() as written:
        cpu, thread, wall = cpu_now(), time.thread_time(), time.perf_counter()
        result = fn(task)
        clock = TaskClock(cpu_since(cpu), time.thread_time() - thread,
                          time.perf_counter() - wall, _here())
    files = [{"path": str(path.relative_to(root)) if path.is_relative_to(root) else str(path),
              **facts(path)} for path in written]
    halt.point(f"phase-task:{phase}", key)
    return key, result, files, clock


def _here() -> tuple[int, int]:
    return os.getpid(), threading.get_ident()


@dataclass(frozen=True)
class _RemoveTask:
    part: int
    key: str
    path: str
    out: str
    decide: Decide
    stage: str
    spec: RunSpec
    part_format: PartFormat | None  # the next segment's writer's, when it is only that writer


def _some(keys: list[str], shown: int = 5) -> str:
    """The first ``shown`` keys, and how many more."""
    more = f", … {len(keys) - shown} more" if len(keys) > shown else ""
    return ", ".join(keys[:shown]) + more


@dataclass(frozen=True)
class _RemoveResult(PhaseResult):
    """One part's count (``StageCount.to_dict``)."""

    count: dict[str, Any]


def _rewritten(table: pa.Table, decisions: Decisions, rejected: str) -> pa.Table | None:
    """What ``rewrites/`` keeps of the rows whose text the decisions rewrite (None for a stage
    that decides no text)."""
    text = decisions.columns.get(TEXT)
    if text is None or TEXT not in table.column_names:
        return None
    return rewritten(table.filter(pc.fill_null(pc.not_equal(table.column(TEXT), text), True)),
                     rejected)


#: Below this many bytes of a part per run of kept rows, ``kept_rows`` copies the rows once
#: (Arrow's filter) rather than handing the writer one slice per run (~13 us each, measured).
RUN_BYTES = 64 << 10


def kept_rows(table: pa.Table, keep: np.ndarray) -> pa.Table:
    """The rows of ``table`` that ``keep`` marks. Where they come in few runs (a dedup that drops
    a few rows of a part) they are zero-copy slices of ``table`` (a writer's bytes do not depend
    on the chunking, ``io.parquet.WRITER_OPTIONS``); else Arrow's filter copies them once."""
    edges = np.flatnonzero(np.diff(np.asarray(keep, bool).view(np.int8), prepend=0, append=0))
    starts, ends = edges[::2], edges[1::2]
    if len(starts) * RUN_BYTES > table.nbytes:
        return table.filter(pa.array(keep))
    if not len(starts):
        return table.slice(0, 0)
    return pa.concat_tables([table.slice(a, b - a) for a, b in zip(starts, ends, strict=True)])


def _remove_part(task: _RemoveTask) -> _RemoveResult:
    table = read_part(task.path)
    decisions = task.decide(task.part, table)
    before = _rewritten(table, decisions, task.spec.rejected)
    for name, values in decisions.columns.items():
        if name in table.column_names:
            table = table.set_column(table.column_names.index(name), name, values)
        else:
            table = table.append_column(name, values)
    drop = decisions.removed
    kept = kept_rows(table, ~drop)
    removed = table.filter(pa.array(drop))
    removed = removed.append_column(REASON, pa.array([decisions.reason] * removed.num_rows,
                                                     pa.string()))
    for name, values in decisions.removed_columns.items():
        removed = removed.append_column(name, values)
    if task.spec.rejected == "ids":
        removed = ids_and_sample(removed, [*decisions.removed_columns, *decisions.columns])
    n_removed = int(np.count_nonzero(drop))
    reasons = Counter({decisions.reason: n_removed} if n_removed else {})
    count = StageCount(task.stage, "", table.num_rows, kept.num_rows, n_removed,
                       removed_by_reason=reasons)
    count.observe_kept(kept)
    key = task.key
    pending = Commit()
    run_dir = RunDir(task.spec.run_dir)
    out = Path(task.out) / f"{key}.parquet"
    if task.part_format is not None and kept.num_rows:
        tmp = pending.temporary_for(out)
        task.part_format.write(kept, tmp)
        task.part_format.describe(pending.temporary_for(PartFormat.figures_path(out)),
                                  count.kept_figures(), checksum(tmp))
    else:
        PartFormat.figures_path(out).unlink(missing_ok=True)  # an earlier run's, fused
        pq.write_table(kept, pending.temporary_for(out),
                       compression=task.spec.intermediate_compression)
    for final, data in ((run_dir.rejected_path(task.stage, key), removed),
                        (run_dir.rewrites_path(task.stage, key), before)):
        if data is not None:
            pq.write_table(data, pending.temporary_for(final), compression=REJECTED_COMPRESSION)
    write_piece(run_dir, f"{task.stage}-{key}", pending.pairs)
    pending.publish()
    return _RemoveResult(count.to_dict())
