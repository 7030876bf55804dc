"""One task: run a segment's fused stages over one shard and commit its output atomically."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from curator.batch import ID, REASON, SOURCE, Failure
from curator.commit import temporary_for
from curator.counts import StageCount
from curator.io.parquet import ParquetPartWriter, RollingPartWriter, read_parquet_batches
from curator.io.records import ColumnMap
from curator.runtime.budget import FailureBudget
from curator.runtime.errors import CurationError
from curator.runtime.isolation import apply_stage, sandboxed
from curator.runtime.progress import TaskProgress
from curator.runtime.rundir import REJECTED_COMPRESSION, RunDir
from curator.stages.base import BatchStage, Filter, Shard, ShardContext, Sink, SinkWriter, Source

INTERMEDIATE_ROW_GROUP = 10_000


@dataclass
class ShardTask:
    """Everything a worker needs to process one shard of one segment (picklable)."""

    segment: int
    stages: list[tuple[str, Any]]  # (name, Stage); the first may be a Source
    shard: Shard
    run_dir: str
    fingerprint: str
    on_error: str
    rejected: str
    batch_bytes: int
    keep_intermediate: bool  # write kept rows for a following dataset stage
    max_failed_fraction: float = 0.1
    part_bytes: int = 64 << 20  # text per intermediate part (a new file past it)
    intermediate_compression: str = "none"
    isolate: bool = False  # run every stage in a sandbox (its worker died on this shard)

    @property
    def key(self) -> str:
        return f"segment-{self.segment:02d}-{self.shard.part}"


_PREPARED: dict[str, BatchStage] = {}


def _prepared(stage: BatchStage) -> BatchStage:
    """The worker's set-up copy of ``stage`` (models load once per worker, not per task)."""
    key = f"{type(stage).__name__}:{stage.fingerprint()}"
    if key not in _PREPARED:
        stage.setup()
        _PREPARED[key] = stage
    return _PREPARED[key]


class _ShardOutputs:
    """Rejected and error files of one shard, opened lazily, committed with the shard."""

    def __init__(self, task: ShardTask, run_dir: RunDir, ctx: ShardContext) -> None:
        self.task, self.run_dir, self.ctx = task, run_dir, ctx
        self.rejected: dict[str, ParquetPartWriter] = {}
        self.errors: dict[str, Any] = {}
        self.columns: dict[str, set[pa.Schema]] = {}  # of batches before a stage's first removal

    def note(self, stage: str, batch: pa.Table, writer: SinkWriter | None = None) -> None:
        """The columns of a batch that reached ``stage``: its writer and its rejected documents
        get them all, even from batches without rows for them, so that a shard's schema does not
        depend on how it was batched."""
        if writer is not None:
            writer.write(batch.slice(0, 0), None)
        if self.task.rejected != "documents" or not batch.num_columns:
            return
        schema = batch.schema.append(pa.field(REASON, pa.string()))
        if stage in self.rejected:
            self.rejected[stage].write(schema.empty_table())
        else:
            self.columns.setdefault(stage, set()).add(schema)

    def reject(self, stage: str, removed: pa.Table) -> None:
        if self.task.rejected == "ids":
            removed = removed.select([ID, REASON])
        if stage not in self.rejected:
            path = self.ctx.temporary_for(self.run_dir.rejected_path(stage, self.task.shard.part))
            self.rejected[stage] = ParquetPartWriter(path, INTERMEDIATE_ROW_GROUP,
                                                     REJECTED_COMPRESSION)
            for schema in self.columns.pop(stage, ()):
                self.rejected[stage].write(schema.empty_table())
        for failure in self.rejected[stage].write(removed):
            self.fail(stage, [failure])

    def fail(self, stage: str, failures: list[Failure]) -> None:
        for failure in failures:
            failure.file = failure.file or self.task.shard.label or self.task.shard.path
        if self.task.on_error == "fail":
            first = failures[0]
            raise CurationError(f"{first.position()}: {first.error} (stage {stage!r}, "
                                "on_error: fail)")
        if stage not in self.errors:
            path = self.ctx.temporary_for(self.run_dir.errors_path(stage, self.task.shard.part))
            self.errors[stage] = open(path, "wb")  # noqa: SIM115 (closed in close())
        self.errors[stage].write(b"".join(orjson.dumps(f.to_dict()) + b"\n" for f in failures))

    def close(self) -> None:
        for writer in self.rejected.values():
            writer.close()
        for handle in self.errors.values():
            handle.close()


def _batches(task: ShardTask, source: Source | None):
    if source is not None:
        yield from source.read_in_run(task.shard, task.batch_bytes, Path(task.run_dir))
    else:
        yield from read_parquet_batches(task.shard, task.batch_bytes, "input", ColumnMap(),
                                        on_damage="raise")  # the run's own file: never a record


def with_source(table: pa.Table, source: str) -> pa.Table:
    """The ``source`` column: the source's name, where a document does not carry its own."""
    if table.num_rows == 0 and not table.column_names:
        return table
    name = pa.scalar(source, pa.string())
    if SOURCE not in table.column_names:
        return table.add_column(min(2, table.num_columns), SOURCE,
                                pa.array([source] * table.num_rows, pa.string()))
    index = table.column_names.index(SOURCE)
    own = table.column(SOURCE).cast(pa.string())
    return table.set_column(index, SOURCE, pc.coalesce(own, name))


def run_shard_task(task: ShardTask) -> dict[str, Any]:
    """Process one shard through the segment's stages; return its committed manifest. A task
    that stops leaves none of its temporary files."""
    pending: list[tuple[Path, Path]] = []
    try:
        return _process(task, pending)
    except BaseException:
        for tmp, _ in pending:
            tmp.unlink(missing_ok=True)
        raise


def _process(task: ShardTask, pending: list[tuple[Path, Path]]) -> dict[str, Any]:
    run_dir = RunDir(task.run_dir)
    started_at = time.time()
    first = task.stages[0][1]
    source = first if isinstance(first, Source) else None
    source_name = (first.source or task.stages[0][0]) if source is not None else ""
    batch_stages = [(name, s if sandboxed(s, task.isolate) else _prepared(s))
                    for name, s in task.stages if not isinstance(s, Source)]
    counts = {name: StageCount(name, stage.type) for name, stage in task.stages}
    budgets = {name: FailureBudget(name, task.shard.path, task.max_failed_fraction)
               for name, _ in task.stages}  # a source's too: a reader failing is a broken stage
    outputs = _ShardOutputs(task, run_dir, ShardContext(run_dir.root, "", task.shard, pending))
    writers: dict[str, SinkWriter] = {
        name: stage.open(ShardContext(run_dir.root, name, task.shard, pending))
        for name, stage in batch_stages if isinstance(stage, Sink)}
    intermediate = None
    parts: list[str] = []  # the intermediate files, in order
    if task.keep_intermediate:
        folder = run_dir.work_dir(task.segment)

        def part_path(k: int) -> Path:
            parts.append(f"{task.shard.part}-{k:04d}.parquet")
            return temporary_for(folder / parts[-1], pending)

        intermediate = RollingPartWriter(part_path, INTERMEDIATE_ROW_GROUP,
                                         task.intermediate_compression,
                                         task.part_bytes)
    rows_out = 0
    progress = TaskProgress(task.key)
    started = time.perf_counter()
    for batch in _batches(task, source):
        progress.add(batch.table.num_rows + len(batch.failed),
                     batch.table.get_total_buffer_size())
        table = batch.table
        if source is not None:
            count = counts[task.stages[0][0]]
            count.n_in += batch.table.num_rows + len(batch.failed)
            count.kept += batch.table.num_rows
            count.observe_kept(batch.table)
            count.failed += len(batch.failed)
            count.notes.update(batch.notes)
            count.seconds += time.perf_counter() - started
            if batch.failed:
                outputs.fail(task.stages[0][0], batch.failed)
            if batch.removed is not None and batch.removed.num_rows:
                count.n_in += batch.removed.num_rows
                count.removed += batch.removed.num_rows
                count.removed_by_reason.update(batch.removed.column(REASON).to_pylist())
                outputs.reject(task.stages[0][0], with_source(batch.removed, source_name))
            removed = batch.removed.num_rows if batch.removed is not None else 0
            budgets[task.stages[0][0]].record(batch.table.num_rows + len(batch.failed) + removed,
                                              batch.failed)
            table = with_source(table, source_name)
        for name, stage in batch_stages:
            if table.num_rows == 0:  # emptied: the stage's files still get its columns
                outputs.note(name, table, writers.get(name))
                continue
            clock = time.perf_counter()
            table = _run_stage(name, stage, table, counts[name], outputs, writers.get(name),
                               budgets[name], task.isolate)
            counts[name].seconds += time.perf_counter() - clock
        if intermediate is not None:
            for failure in intermediate.write(table):
                raise CurationError(f"intermediate write failed: {failure.error}")
        rows_out += table.num_rows
        started = time.perf_counter()
    progress.send()
    for budget in budgets.values():
        budget.check_shard()
    sinks = {name: info for name, writer in writers.items() if (info := writer.close())}
    if intermediate is not None:
        intermediate.close()
    outputs.close()
    manifest = {"segment": task.segment, "part": task.shard.part, "fingerprint": task.fingerprint,
                "input": {"path": task.shard.path, "bytes": task.shard.size,
                          "source": task.shard.source},
                "stages": [counts[name].to_dict() for name, _ in task.stages],
                "rows_out": rows_out, "sinks": sinks, "intermediate": parts}
    committed = run_dir.commit(pending, manifest, task.segment)
    # when and where the task ran: for the driver's timeline, not on disk (a resumed run's
    # manifests stay byte-identical)
    return {**committed, "clock": [started_at, time.time(), os.getpid()]}


def _run_stage(name: str, stage: BatchStage, table: pa.Table, count: StageCount,
               outputs: _ShardOutputs, writer: SinkWriter | None, budget: FailureBudget,
               isolate: bool) -> pa.Table:
    """Apply one stage to a batch, count the outcome, route removed and failed rows."""
    count.n_in += table.num_rows
    outputs.note(name, table)
    result = apply_stage(stage, table, name, budget, isolate)
    if writer is not None:
        write_failures = writer.write(result.kept, result.payload)
        if write_failures:
            bad = pa.array([f.id for f in write_failures], pa.string())
            result.kept = result.kept.filter(pc.invert(pc.is_in(result.kept.column(ID), bad)))
            result.failed += write_failures
    if result.n_removed:
        count.removed += result.n_removed
        reasons = result.removed.column(REASON).to_pylist()
        count.removed_by_reason.update(reasons)
        outputs.reject(name, result.removed)
    if result.failed:
        count.failed += len(result.failed)
        outputs.fail(name, result.failed)
    budget.record(table.num_rows, result.failed)
    count.kept += result.kept.num_rows
    count.observe_kept(result.kept)
    count.rules.update(result.rule_failures)
    count.notes.update(result.notes)
    if isinstance(stage, Filter) and result.scores:
        kept = pc.is_in(table.column(ID), result.kept.column(ID)).to_numpy(zero_copy_only=False)
        for score, values in result.scores.items():
            count.add_histogram(score, stage.score_bins[score],
                                values.to_numpy(zero_copy_only=False),
                                kept if len(values) == len(kept) else None)
    count.check()
    return result.kept
