"""One task: run a segment's fused stages over one shard and commit its output atomically."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from curator.batch import ID, REASON, Failure
from curator.io.parquet import _ParquetWriter, read_parquet_batches
from curator.io.records import ColumnMap
from curator.runtime.budget import FailureBudget
from curator.runtime.errors import CurationError
from curator.runtime.isolation import apply_stage, sandboxed
from curator.runtime.rundir import RunDir
from curator.stages.base import BatchStage, Shard, ShardContext, Sink, SinkWriter, Source

INTERMEDIATE_ROW_GROUP = 10_000


@dataclass
class StageCount:
    """Per-stage, per-shard accounting: ``in == kept + removed + failed``."""

    name: str
    type: str
    n_in: int = 0
    kept: int = 0
    removed: int = 0
    failed: int = 0
    removed_by_reason: Counter = field(default_factory=Counter)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "in": self.n_in, "kept": self.kept,
                "removed": self.removed, "failed": self.failed,
                "removed_by_reason": dict(sorted(self.removed_by_reason.items())),
                "seconds": round(self.seconds, 4)}


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
        self.rejected: dict[str, _ParquetWriter] = {}
        self.errors: dict[str, Any] = {}

    def reject(self, stage: str, removed: pa.Table) -> None:
        if self.task.rejected == "ids":
            removed = removed.select([ID, REASON])
        if stage not in self.rejected:
            path = self.ctx.temporary_for(self.run_dir.rejected_path(stage, self.task.shard.part))
            self.rejected[stage] = _ParquetWriter(path, INTERMEDIATE_ROW_GROUP, "zstd", stage)
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
        yield from source.read(task.shard, task.batch_bytes)
    else:
        yield from read_parquet_batches(task.shard, task.batch_bytes, "input", ColumnMap())


def run_shard_task(task: ShardTask) -> dict[str, Any]:
    """Process one shard through the segment's stages; return its committed manifest."""
    run_dir = RunDir(task.run_dir)
    ctx = ShardContext(run_dir=run_dir.root, stage_name="", shard=task.shard)
    first = task.stages[0][1]
    source = first if isinstance(first, Source) else None
    batch_stages = [(name, s if sandboxed(s, task.isolate) else _prepared(s))
                    for name, s in task.stages if not isinstance(s, Source)]
    counts = {name: StageCount(name, stage.type) for name, stage in task.stages}
    budgets = {name: FailureBudget(name, task.shard.path, task.max_failed_fraction)
               for name, _ in batch_stages}
    outputs = _ShardOutputs(task, run_dir, ctx)
    writers: dict[str, SinkWriter] = {}
    for name, stage in batch_stages:
        if isinstance(stage, Sink):
            ctx.stage_name = name
            writers[name] = stage.open(ctx)
    intermediate = None
    if task.keep_intermediate:
        final = run_dir.work_dir(task.segment) / f"{task.shard.part}.parquet"
        intermediate = _ParquetWriter(ctx.temporary_for(final), INTERMEDIATE_ROW_GROUP, "zstd",
                                      "intermediate")
    rows_out = 0
    started = time.perf_counter()
    for batch in _batches(task, source):
        if source is not None:
            count = counts[task.stages[0][0]]
            count.n_in += batch.table.num_rows + len(batch.failed)
            count.kept += batch.table.num_rows
            count.failed += len(batch.failed)
            count.seconds += time.perf_counter() - started
            if batch.failed:
                outputs.fail(task.stages[0][0], batch.failed)
        table = batch.table
        for name, stage in batch_stages:
            if table.num_rows == 0:
                break
            clock = time.perf_counter()
            table = _run_stage(name, stage, table, counts[name], outputs, writers.get(name),
                               budgets[name], task.isolate)
            counts[name].seconds += time.perf_counter() - clock
        if intermediate is not None and table.num_rows:
            for failure in intermediate.write(table):
                raise CurationError(f"intermediate write failed: {failure.error}")
        rows_out += table.num_rows
        started = time.perf_counter()
    for budget in budgets.values():
        budget.check_shard()
    sinks = {name: info for name, writer in writers.items() if (info := writer.close())}
    if intermediate is not None:
        intermediate.close()
    outputs.close()
    manifest = {"segment": task.segment, "part": task.shard.part, "fingerprint": task.fingerprint,
                "input": {"path": task.shard.path, "bytes": task.shard.size},
                "stages": [counts[name].to_dict() for name, _ in task.stages],
                "rows_out": rows_out, "sinks": sinks}
    return run_dir.commit(ctx.pending, manifest, task.segment)


def _run_stage(name: str, stage: BatchStage, table: pa.Table, count: StageCount,
               outputs: _ShardOutputs, writer: SinkWriter | None, budget: FailureBudget,
               isolate: bool) -> pa.Table:
    """Apply one stage to a batch, count the outcome, route removed and failed rows."""
    count.n_in += table.num_rows
    result = apply_stage(stage, table, name, budget, isolate)
    if writer is not None:
        write_failures = writer.write(result.kept)
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
    if count.n_in != count.kept + count.removed + count.failed:
        raise AssertionError(f"stage {name!r} lost documents: in={count.n_in} kept={count.kept} "
                             f"removed={count.removed} failed={count.failed}")
    return result.kept
