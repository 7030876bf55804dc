"""One task: run a segment's fused stages over one shard and commit its output atomically."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from curator.batch import ID, REASON, SOURCE, TEXT, Failure
from curator.commit import Commit
from curator.counts import StageCount
from curator.io.parquet import ParquetPartWriter, RollingPartWriter, read_parquet_batches
from curator.io.records import ColumnMap
from curator.rejected import ids_and_sample, rewritten
from curator.runtime.errors import CurationError
from curator.runtime.worker.budget import FailureBudget
from curator.runtime.worker.cpu_clock import child_cpu, cpu_now, cpu_since, task_running
from curator.runtime.worker.isolation import apply_stage, sandboxed
from curator.runtime.worker.progress import TaskProgress
from curator.runtime.worker.shard_reuse import (
    CHECKPOINT_COMPRESSION,
    Reuse,
    ScoreRecorder,
    ScoreReplay,
    plan_reuse,
)
from curator.stages.base import BatchStage, Filter, Shard, ShardContext, Sink, SinkWriter, Source
from curator.store.doc_index import write_piece
from curator.store.keys import ShardKeys
from curator.store.records import ShardInput, ShardManifest
from curator.store.run_dir import OUT, REJECTED_COMPRESSION, RunDir
from curator.store.spec import RunSpec

INTERMEDIATE_ROW_GROUP = 10_000


@dataclass
class ShardTask:
    """Everything a worker needs to process one shard of one segment (picklable)."""

    segment: int
    stages: list[tuple[str, Any]]  # (name, Stage); the first may be a Source
    shard: Shard
    spec: RunSpec
    keys: ShardKeys  # of what it reads, of each stage's output and scores
    keep_intermediate: bool  # write kept rows for a following dataset stage
    isolate: bool = False  # run every stage in a sandbox (its worker died on this shard)
    previous: ShardManifest | None = None  # the shard's manifest from another configuration

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
        self.rewrites: dict[str, ParquetPartWriter] = {}
        self.errors: dict[str, Any] = {}
        self.columns: dict[str, set[pa.Schema]] = {}  # of batches before a stage's first removal

    def note(self, stage: str, batch: pa.Table, writer: SinkWriter | None = None) -> None:
        """The columns of a batch that reached ``stage``: its writer and its rejected documents
        get them all, even from batches without rows for them, so that a shard's schema does not
        depend on how it was batched."""
        if writer is not None:
            writer.write(batch.slice(0, 0), None)
        if self.task.spec.rejected != "documents" or not batch.num_columns:
            return
        schema = batch.schema.append(pa.field(REASON, pa.string()))
        if stage in self.rejected:
            self.rejected[stage].write(schema.empty_table())
        else:
            self.columns.setdefault(stage, set()).add(schema)

    def reject(self, stage: str, removed: pa.Table) -> None:
        if self.task.spec.rejected == "ids":
            removed = ids_and_sample(removed)
        if stage not in self.rejected:
            path = self.ctx.temporary_for(self.run_dir.rejected_path(stage, self.task.shard.part))
            self.rejected[stage] = ParquetPartWriter(path, INTERMEDIATE_ROW_GROUP,
                                                     REJECTED_COMPRESSION)
            for schema in self.columns.pop(stage, ()):
                self.rejected[stage].write(schema.empty_table())
        for failure in self.rejected[stage].write(removed):
            self.fail(stage, [failure])

    def rewrite(self, stage: str, before: pa.Table, after: pa.Table) -> None:
        """Keep the text before ``stage`` of the documents whose text it changed (``after``: the
        rows it kept, in the order of ``before``'s rows)."""
        if after.num_rows != before.num_rows:
            before = before.filter(pc.is_in(before.column(ID), after.column(ID)))
        if before.num_rows != after.num_rows or TEXT not in before.column_names:
            return
        changed = pc.fill_null(pc.not_equal(before.column(TEXT), after.column(TEXT)), True)
        rows = rewritten(before.filter(changed), self.task.spec.rejected)
        if not rows.num_rows:
            return
        if stage not in self.rewrites:
            path = self.ctx.temporary_for(self.run_dir.rewrites_path(stage, self.task.shard.part))
            self.rewrites[stage] = ParquetPartWriter(path, INTERMEDIATE_ROW_GROUP,
                                                     REJECTED_COMPRESSION)
        for failure in self.rewrites[stage].write(rows):
            self.fail(stage, [failure])

    def fail(self, stage: str, failures: list[Failure]) -> None:
        for failure in failures:
            failure.file = failure.file or self.task.shard.label or self.task.shard.path
        if self.task.spec.on_error == "fail":
            first = failures[0]
            raise CurationError(f"{first.position()}: {first.error} (stage {stage!r}, "
                                "on_error: fail)")
        if stage not in self.errors:
            path = self.ctx.temporary_for(self.run_dir.errors_path(stage, self.task.shard.part))
            self.errors[stage] = open(path, "wb")  # noqa: SIM115 (closed in close())
        self.errors[stage].write(b"".join(orjson.dumps(f.to_dict()) + b"\n" for f in failures))

    def close(self) -> None:
        for writer in [*self.rejected.values(), *self.rewrites.values()]:
            writer.close()
        for handle in self.errors.values():
            handle.close()


def _batches(task: ShardTask, source: Source | None, checkpoint: Path | None):
    if checkpoint is not None:
        yield from read_parquet_batches(Shard(0, str(checkpoint)), task.spec.batch_bytes, "input",
                                        ColumnMap(), on_damage="raise")
    elif source is not None:
        yield from source.read_in_run(task.shard, task.spec.batch_bytes, Path(task.spec.run_dir))
    else:
        yield from read_parquet_batches(task.shard, task.spec.batch_bytes, "input", ColumnMap(),
                                        on_damage="raise")  # the run's own file: never a record


def _adopt(task: ShardTask, run_dir: RunDir, batch_stages: list[tuple[str, Any]],
           reuse: Reuse, signals: _Signals, pending: Commit) -> StageCount | None:
    """Publish the shard as it is when it is a dataset stage's part that the stage's removal
    wrote in the layout of this segment's only stage, a Parquet writer (``PartFormat``: the
    bytes that writer would write from those rows), as the figures beside the part prove
    (``PartFormat.described``: the layout, and the checksum the removal recorded for the part):
    hard-linked (copied across file systems) under the writer's name, instead of decoded and
    encoded again. Returns the writer's count, from those figures; None where the shard is
    written as usual."""
    if task.keep_intermediate or reuse.checkpoint is not None or len(task.stages) != 1 \
            or len(batch_stages) != 1 or signals.checkpoint_stage is not None or signals.scores:
        return None
    name, stage = batch_stages[0]
    layout = stage.part_format() if isinstance(stage, Sink) else None
    part = Path(task.shard.path)
    if layout is None or name in reuse.skipped or part.parent.name != OUT \
            or not part.is_relative_to(run_dir.root):
        return None
    figures = layout.described(part, task.shard.digest)
    if figures is None:
        return None
    started, cpu = time.perf_counter(), _cpu_mark()
    ctx = ShardContext(run_dir.root, name, task.shard, pending)
    tmp = ctx.temporary_for(stage.output_dir(run_dir.root, name) / f"{task.shard.part}.parquet")
    try:
        os.link(part, tmp)
    except OSError:  # another file system, or one without hard links
        shutil.copyfile(part, tmp)
    count = StageCount(name, stage.type, figures["rows"], figures["rows"])
    count.add_kept_figures(figures)
    count.seconds = time.perf_counter() - started
    _charge(count, stage, cpu, started)
    return count


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


def run_shard_task(task: ShardTask) -> ShardManifest:
    """Process one shard through the segment's stages; return its committed manifest. A task
    that stops leaves none of its temporary files."""
    pending = Commit()
    try:
        with task_running():
            return _process(task, pending)
    except BaseException:
        pending.discard()
        raise


def _process(task: ShardTask, pending: Commit) -> ShardManifest:
    run_dir = RunDir(task.spec.run_dir)
    started_at = time.time()
    reuse = plan_reuse(run_dir, task.segment, task.shard.part, task.stages, task.keys,
                       task.previous)
    first = task.stages[0][1]
    source = first if isinstance(first, Source) and reuse.checkpoint is None else None
    source_name = (first.source or task.stages[0][0]) if source is not None else ""
    batch_stages = [(name, s if sandboxed(s, task.isolate) else _prepared(s))
                    for i, (name, s) in enumerate(task.stages)
                    if not isinstance(s, Source) and i > reuse.through]
    counts = {name: StageCount(name, stage.type) for name, stage in task.stages}
    budgets = {name: FailureBudget(name, task.shard.path, task.spec.max_failed_fraction)
               for name, _ in task.stages}  # a source's too: a reader failing is a broken stage
    outputs = _ShardOutputs(task, run_dir, ShardContext(run_dir.root, "", task.shard, pending))
    signals = _Signals(task, run_dir, reuse, pending)
    adopted = _adopt(task, run_dir, batch_stages, reuse, signals, pending)
    writers: dict[str, SinkWriter] = {
        name: stage.open(ShardContext(run_dir.root, name, task.shard, pending))
        for name, stage in batch_stages
        if isinstance(stage, Sink) and name not in reuse.skipped and adopted is None}
    intermediate = None
    parts: list[str] = []  # the intermediate files, in order
    if task.keep_intermediate:
        folder = run_dir.work_dir(task.segment)

        def part_path(k: int) -> Path:
            parts.append(f"{task.shard.part}-{k:04d}.parquet")
            return pending.temporary_for(folder / parts[-1])

        intermediate = RollingPartWriter(part_path, INTERMEDIATE_ROW_GROUP,
                                         task.spec.intermediate_compression,
                                         task.spec.part_bytes)
    rows_out = 0
    progress = TaskProgress(task.key)
    if adopted is not None:
        counts[adopted.name] = adopted
        rows_out = adopted.kept
        progress.add(adopted.kept, Path(task.shard.path).stat().st_size)
    started, cpu = time.perf_counter(), _cpu_mark()
    for batch in _batches(task, source, reuse.checkpoint) if adopted is None else ():
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
            _charge(count, source, cpu, started)
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
            signals.after(task.stages[0][0], table)
        for name, stage in batch_stages:
            if name in reuse.skipped:  # its files are this configuration's already
                continue
            if table.num_rows == 0:  # emptied: the stage's files still get its columns
                outputs.note(name, table, writers.get(name))
                signals.after(name, table)
                continue
            clock, cpu = time.perf_counter(), _cpu_mark()
            table = _run_stage(name, stage, table, counts[name], outputs, writers.get(name),
                               budgets[name], task.isolate, signals)
            counts[name].seconds += time.perf_counter() - clock
            _charge(counts[name], stage, cpu, clock)
            signals.after(name, table)
        if intermediate is not None:
            for failure in intermediate.write(table):
                raise CurationError(f"intermediate write failed: {failure.error}")
        rows_out += table.num_rows
        started, cpu = time.perf_counter(), _cpu_mark()
    progress.send()
    for budget in budgets.values():
        budget.check_shard()
    sinks = {name: info for name, writer in writers.items() if (info := writer.close())}
    sinks.update(reuse.sinks)
    if intermediate is not None:
        intermediate.close()
    outputs.close()
    kept = signals.close()
    for name, entry in reuse.counts.items():
        counts[name] = StageCount.from_dict(entry)
    names = [name for name, _ in task.stages]
    checkpoint, scores = kept
    manifest = ShardManifest(
        task.segment, task.shard.part, task.keys.final,
        dict(zip(names, task.keys.stages, strict=True)),
        ShardInput(task.shard.path, task.shard.size, task.shard.source),
        [counts[name].to_dict() for name in names], rows_out, sinks, parts,
        checkpoint=checkpoint, scores=scores)
    write_piece(run_dir, f"segment-{task.segment:02d}-{task.shard.part}", pending.pairs)
    committed = run_dir.commit(pending, manifest, reuse.carried,
                               task.previous.files if task.previous else ())
    # when and where the task ran, and what it took from earlier runs: for the driver's
    # timeline and stats, not on disk (a resumed run's manifests stay byte-identical)
    committed.clock = [started_at, time.time(), os.getpid()]
    committed.ran = [name for i, name in enumerate(names)
                     if i > reuse.through and name not in reuse.skipped]
    committed.reused = reuse.summary()
    return committed


class _Signals:
    """The shard's checkpoint (the rows after the checkpoint stage) and each filter's scores:
    written as the task computes them, replayed where an earlier run kept them."""

    def __init__(self, task: ShardTask, run_dir: RunDir, reuse: Reuse,
                 pending: Commit) -> None:
        self.task, self.run_dir, self.reuse, self.pending = task, run_dir, reuse, pending
        names = [name for name, _ in task.stages]
        self.scores = {names[i]: key for i, key in enumerate(task.keys.scores) if key}
        self.replays = {name: ScoreReplay(path) for name, path in reuse.replays.items()}
        self.recorders: dict[str, ScoreRecorder] = {}
        c = task.keys.checkpoint
        self.checkpoint_stage = names[c] if c is not None and reuse.checkpoint is None else None
        self.checkpoint: ParquetPartWriter | None = None

    def replay(self, name: str, ids: Any) -> dict[str, pa.Array] | None:
        """Kept scores for these rows, if any (a mismatch: computed from here on)."""
        replay = self.replays.get(name)
        if replay is None:
            return None
        scores = replay.take(ids)
        if scores is None:  # computed from here on; no file would hold the whole shard's
            del self.replays[name]
            self.reuse.replays.pop(name, None)
            self.scores.pop(name, None)
        return scores

    def record(self, name: str, ids: Any, signals: dict[str, pa.Array]) -> None:
        if name not in self.scores or name in self.reuse.replays:
            return
        if name not in self.recorders:
            final = self.run_dir.scores_path(name, self.task.shard.part)
            self.recorders[name] = ScoreRecorder(self.pending.temporary_for(final))
        self.recorders[name].add(ids, signals)

    def after(self, name: str, table: pa.Table) -> None:
        """Rows leaving stage ``name``: kept as the checkpoint when it is the checkpoint stage."""
        if name != self.checkpoint_stage:
            return
        if self.checkpoint is None:
            path = self.run_dir.checkpoint_path(self.task.segment, self.task.shard.part)
            self.checkpoint = ParquetPartWriter(self.pending.temporary_for(path),
                                                INTERMEDIATE_ROW_GROUP, CHECKPOINT_COMPRESSION)
        self.checkpoint.write(table)

    def close(self) -> tuple[str | None, dict[str, str]]:
        """The manifest's entries: the checkpoint's key and each kept scores file's key."""
        checkpoint = None
        if self.checkpoint is not None:
            self.checkpoint.close()
        c = self.task.keys.checkpoint
        if c is not None and (self.checkpoint is not None or self.reuse.checkpoint is not None):
            checkpoint = self.task.keys.stages[c]
        kept = {name: self.scores[name] for name in self.reuse.replays}
        for name, recorder in self.recorders.items():
            if recorder.close():
                kept[name] = self.scores[name]
            else:  # not every row's scores: not kept
                self.pending.drop(recorder.path)
        return checkpoint, dict(sorted(kept.items()))


def _cpu_mark() -> tuple[float, float]:
    """Where the process's and this thread's sandbox children's CPU seconds stand now."""
    return cpu_now(), child_cpu()


def _charge(count: StageCount, stage: BatchStage, mark: tuple[float, float],
            clock: float) -> None:
    """Charge a stage the CPU seconds since ``mark`` (its sandbox child's too) and, for a
    stage that holds a GPU, the wall seconds since ``clock``."""
    count.cpu_seconds += cpu_since(mark[0]) + child_cpu() - mark[1]
    if stage.resources().get("GPU"):
        count.gpu_seconds += time.perf_counter() - clock


def _run_stage(name: str, stage: BatchStage, table: pa.Table, count: StageCount,
               outputs: _ShardOutputs, writer: SinkWriter | None, budget: FailureBudget,
               isolate: bool, signals: _Signals) -> pa.Table:
    """Apply one stage to a batch, count the outcome, route removed and failed rows; a filter
    whose scores an earlier run kept decides on them."""
    count.n_in += table.num_rows
    outputs.note(name, table)
    scores = signals.replay(name, table.column(ID)) if isinstance(stage, Filter) else None
    if scores is not None:
        result = stage.decide(table, scores)
    else:
        result = apply_stage(stage, table, name, budget, isolate)
        if isinstance(stage, Filter):
            signals.record(name, table.column(ID), result.signals)
    if stage.rewrites_text:
        outputs.rewrite(name, table, result.kept)
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
