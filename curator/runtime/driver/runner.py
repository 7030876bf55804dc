"""Runs a planned pipeline: segment by segment, shard by shard, resuming what was committed."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from curator import halt
from curator.batch import Shard
from curator.commit import DamagedRecord, full_check
from curator.io.parquet import PartFormat
from curator.pipeline import PipelineModel, Segment
from curator.plugins import load_imports
from curator.runtime.cluster.executors import GIL, ExecutorPool
from curator.runtime.cluster.main_guard import leave_if_importing_main
from curator.runtime.driver.live_progress import LiveProgress
from curator.runtime.driver.phases import PhaseContext
from curator.runtime.driver.recovery import Left, run_shard_tasks
from curator.runtime.driver.requirements import check_requirements
from curator.runtime.driver.run_keys import RunKeys, shard_name
from curator.runtime.driver.run_lock import run_lock
from curator.runtime.driver.run_log import run_log
from curator.runtime.driver.schemas import unify_segment
from curator.runtime.driver.stats import write_stats
from curator.runtime.driver.warm_up import WarmUpAhead, warm_up_in_background
from curator.runtime.errors import CurationError
from curator.runtime.worker.progress import ProgressReporter
from curator.runtime.worker.shard_task import ShardTask
from curator.stages.base import Sink, Source, Stage
from curator.store.doc_index import build_index, merge_pieces_if_many
from curator.store.keys import digest
from curator.store.records import DatasetRecord, ShardManifest
from curator.store.run_dir import RunDir
from curator.store.spec import RunSpec

log = logging.getLogger("curator")
#: Set to 0 to have a dataset stage's removal write its parts in the run's own format even
#: where a Parquet writer alone follows it (the writer then decodes and encodes them again).
FUSE_WRITER = "CURATOR_FUSE_WRITER"


@dataclass
class RunResult:
    output: Path
    stats: dict[str, Any]
    shards_run: int  # input shards that some task of this run worked on
    shards_skipped: int  # input shards whose every task an earlier run had committed


def list_input_shards(pipeline: PipelineModel) -> list[Shard]:
    """Every source's shards in pipeline order, numbered globally; with several sources a
    shard's label (the prefix of positional ids) starts with its source's name."""
    sources = pipeline.sources()
    shards = []
    for name, source in sources:
        listed = source.shards()
        labels = Counter(shard.path.partition("#")[2] + shard.label for shard in listed)
        for shard in listed:
            label = f"{name}/{shard.label}" if len(sources) > 1 else shard.label
            shared = labels[shard.path.partition("#")[2] + shard.label] > 1
            shards.append(replace(shard, index=len(shards), label=label, source=name,
                                  name=shard_name(name, replace(shard, label=label), shared)))
    return shards


def run_pipeline(pipeline: PipelineModel, output: str | Path | None = None,
                 executor: str | None = None, workers: int | None = None,
                 scheduler: str | None = None, scheduler_file: str | None = None,
                 force: bool = False, progress: bool = True) -> RunResult:
    """Run ``pipeline`` into its run directory; committed shards of this config are skipped.
    Raises :class:`RunIncomplete` when some shards' inputs could not be had (the rest is done)."""
    leave_if_importing_main()
    check_requirements(pipeline.named_stages())
    root = output or pipeline.output
    if not root:
        raise ValueError("no run directory: set 'output' in the pipeline or pass --output")
    with run_lock(Path(root), pipeline.lock_stale_s):
        run_dir = RunDir(root)
        shards = _prepare(pipeline, run_dir, force)
        with run_log(run_dir, pipeline.name):
            live = LiveProgress(run_dir.progress_file, len(pipeline.plan().segments))
            try:
                result = _run_locked(pipeline, run_dir, executor, workers, scheduler,
                                     scheduler_file, progress, shards, live)
            except BaseException as err:
                live.finish("stopped", str(err).splitlines()[0] if str(err)
                            else type(err).__name__)
                raise
            live.finish("finished")
            return result


def _prepare(pipeline: PipelineModel, run_dir: RunDir, force: bool) -> list[Shard]:
    """List the input shards and prepare the run directory for them (``RunDir.prepare``)."""
    shards = list_input_shards(pipeline)
    inputs = [[s.path, s.size] for s in shards]
    fingerprint = _fingerprint(pipeline, inputs)
    dataset_files = [path for name, stage in pipeline.named_stages() if isinstance(stage, Sink)
                     for path in stage.dataset_files(run_dir.root, name)]
    run_dir.prepare(fingerprint, {**pipeline.to_dict(), "inputs": inputs},
                    {**pipeline.decisive(), "inputs": inputs}, force, dataset_files)
    return shards


def _run_locked(pipeline: PipelineModel, run_dir: RunDir, executor: str | None,
                workers: int | None, scheduler: str | None, scheduler_file: str | None,
                progress: bool, shards: list[Shard], live: LiveProgress) -> RunResult:
    """The run once its directory is prepared (its log open): every segment, then stats."""
    plan = pipeline.plan()
    inputs = [[s.path, s.size] for s in shards]
    run_dir.stats_file.unlink(missing_ok=True)  # until it ends, `curate report` is partial
    swept = run_dir.sweep(stage.output_dir(run_dir.root, name) for name, stage
                          in pipeline.named_stages() if isinstance(stage, Sink))
    if swept:
        log.info("%d temporary files of killed attempts removed", swept)
    config = pipeline.executor
    started = time.time()
    reporter = ProgressReporter(progress, live.update)
    manifests: dict[int, list[ShardManifest]] = {}
    dataset_counts: dict[int, dict[str, Any]] = {}  # a dataset stage's count, by segment
    extras: dict[str, dict[str, Any]] = {}
    phase_timeline: list[list] = []  # [segment, stage, phase, start s, end s] of this run
    ran: set[int] = set()  # indices of the shards some task of this run worked on
    left: list[Left] = []
    imports = load_imports(pipeline.imports)
    keys = RunKeys(pipeline, imports)
    reuse: dict[str, dict[str, Any]] = {}  # per segment: what this run reused, what it ran
    preload = sorted({m for _, stage in pipeline.named_stages() for m in stage.preload()})
    with ExecutorPool(executor or config.type, config.workers if workers is None else workers,
                      scheduler or config.scheduler, scheduler_file or config.scheduler_file,
                      config.processes, imports, preload, config.workers_per_gpu) as pool:
        gpus = pool.offers("GPU")
        placed = {name: stage.for_cluster(gpus) for name, stage in pipeline.named_stages()}
        ahead = None
        if pool.runs_here(any(stage.holds_gil for stage in placed.values())):
            warm_up_in_background(list(placed.values()))
        else:  # worker processes: the CPU stages warmed here, the GPU workers' contexts made
            ahead = WarmUpAhead(list(placed.values()))
            if any(stage.resources().get("GPU") for stage in placed.values()):
                pool.make_gpu_contexts()
        segments = [Segment(segment.index, segment.kind,
                            [(name, placed[name]) for name, _ in segment.stages])
                    for segment in plan.segments]
        for segment in segments:
            if ahead is not None:
                ahead.before([stage for _, stage in segment.stages])
            live.segment(segment.index)
            following = segments[segment.index + 1] if segment.index + 1 < len(segments) else None
            if segment.kind == "dataset":
                fused = following is not None and following.index == len(segments) - 1
                adopted = writer_format(following) if fused else None
                count, shards, spans = _run_dataset(pool, segment, following, shards, run_dir,
                                                    pipeline, keys, reporter, adopted)
                phase_timeline += [[segment.index, segment.stages[0][0], phase,
                                    round(start - started, 3), round(end - started, 3)]
                                   for phase, start, end in spans]
                dataset_counts[segment.index] = count
                reuse[f"segment-{segment.index:02d}"] = _phase_reuse(count)
                if adopted is None:  # else the writer only adopts its parts, and the run's
                    merge_pieces_if_many(run_dir)  # end builds the index a moment later
                continue
            ex = pool.get(segment.holds_gil())
            run = _SegmentRun(ex, segment, run_dir, pipeline, keys, following is not None,
                              reporter, len(segments))
            done, new, gone = run.run(shards)
            if following is not None and not gone:
                damaged = run.damaged_reads(ex, done, following, next_shards(
                    run_dir, segment, [*done.values(), *new]))
                if damaged:  # their producers run again, then the next segment reads them
                    _, again, gone = run.run(shards)
                    new += again
                    done = {k: v for k, v in done.items() if k not in {m.part for m in again}}
            parts = {m.part for m in new}
            ran.update(s.index for s in shards if s.part in parts)
            manifests[segment.index] = sorted([*done.values(), *new], key=lambda m: m.part)
            reuse[f"segment-{segment.index:02d}"] = _shard_reuse(segment, done, new)
            if gone:
                left = gone
                break
            halt.point(f"finalize:segment-{segment.index:02d}")
            extras.update(_finalize_sinks(segment, run_dir, manifests[segment.index]))
            segment_key = digest(sorted(m.key for m in manifests[segment.index]))
            unified = unify_segment(run_dir, segment, following is not None,
                                    pipeline.intermediate_compression, segment_key, bool(new))
            if unified:  # a part found damaged: its shard runs again, then the whole again
                _, again, gone = run.run(shards)
                if gone:
                    left = gone
                    break
                redone = {m.part for m in again}
                manifests[segment.index] = sorted(
                    [*[m for m in manifests[segment.index] if m.part not in redone], *again],
                    key=lambda m: m.part)
                extras.update(_finalize_sinks(segment, run_dir, manifests[segment.index]))
                unify_segment(run_dir, segment, following is not None,
                              pipeline.intermediate_compression, segment_key, True)
            if following is not None:
                shards = next_shards(run_dir, segment, manifests[segment.index])
                merge_pieces_if_many(run_dir)
        nodes = pool.hosts()
    halt.point("stats")
    run_facts: dict[str, Any] = {
        "seconds": round(time.time() - started, 3),
        "executor_start_seconds": round(pool.start_seconds, 3),
        "shards": len(inputs), "timeline": _timeline(manifests, started),
        "phase_timeline": phase_timeline, "reuse": reuse, "nodes": nodes,
        "store_bytes": run_dir.store_bytes(), "work_bytes": run_dir.work_bytes()}
    if left:
        run_facts["left"] = [item.to_dict() for item in left]
    stats = write_stats(run_dir, pipeline, manifests, dataset_counts, extras, run_facts)
    from curator.report.html import write_report
    from curator.runtime.driver.recorded import parquet_outputs

    outputs = parquet_outputs(run_dir)
    write_report(run_dir.root, stats, outputs[-1] if outputs else None)
    indexed = build_index(run_dir)
    log.info("document index: %d documents in %.1f s (%d of %d files read; the rest from the "
             "rows written at commit)", indexed["documents"], indexed["seconds"],
             indexed["files_read"], indexed["files"])
    if left:
        raise RunIncomplete(left)
    n_ran = len(ran & set(range(len(inputs))))
    return RunResult(run_dir.root, stats, n_ran, len(inputs) - n_ran)


class RunIncomplete(CurationError):
    """Some shards' inputs could not be had: the rest is done, and a rerun tries them again."""

    def __init__(self, left: list[Left]) -> None:
        lines = [f"  {item.label} ({item.reason}): {item.url}: {item.error}" for item in left]
        super().__init__(f"{len(left)} shard(s) left not done; rerun the same command to try "
                         "them again:\n" + "\n".join(lines))
        self.left = left


def writer_format(segment: Segment | None) -> PartFormat | None:
    """The layout of the Parquet writer that alone makes up ``segment`` (the last one, after a
    dataset stage), so that the stage's removal writes its parts as that writer would and the
    writer publishes them as they are; None for any other segment, or with
    ``CURATOR_FUSE_WRITER=0``."""
    if segment is None or segment.kind == "dataset" or len(segment.stages) != 1 \
            or os.environ.get(FUSE_WRITER) == "0":
        return None
    stage = segment.stages[0][1]
    return stage.part_format() if isinstance(stage, Sink) else None


def _run_dataset(pool: ExecutorPool, segment: Segment, following: Segment | None,
                 shards: list[Shard], run_dir: RunDir, pipeline: PipelineModel,
                 keys: RunKeys, reporter: ProgressReporter, part_format: PartFormat | None
                 ) -> tuple[dict, list[Shard], list[tuple[str, float, float]]]:
    """Run a dataset stage under its key (the stage and every part it reads, by content), or
    take its recorded result whole when an earlier run finished it under that key. The parts
    the next segment still has to read that an earlier run wrote are checked whole first, and
    a damaged one is written again by its remove task. Once finished, the stage's record is
    written and its work folder trimmed to what later runs reuse. Returns the stage's count,
    the next segment's shards (named after the parts they come from, with checksums) and when
    each phase ran (wall clock)."""
    name, stage = segment.stages[0]
    key = keys.barrier(name, stage, shards)
    finished = finished_dataset(run_dir, segment.index, key, shards)
    if finished is not None:
        produced, record = finished
        log.info("%s: finished by an earlier run of this configuration; reused", name)
        if not pipeline.keep_work:  # a run cut between the record and the trim
            run_dir.trim(run_dir.work_dir(segment.index), record.kept_phases)
        return _reused_count(record.count), produced, []
    ex = pool.get(stage.holds_gil)
    reporter.attach(ex)
    driver_cpu = time.thread_time()
    for attempt in range(2):
        ctx = PhaseContext(run_dir, run_dir.work_dir(segment.index), ex, name, stage.type, key,
                           RunSpec.of(pipeline, run_dir.root), reporter.phase,
                           keys.barrier(name, stage, []),
                           {s.path: s.digest for s in shards if s.digest},
                           part_format=part_format)
        try:
            result = stage.run_dataset(_parts(shards), ctx)
        finally:
            reporter.stop()  # a phase that raised stops showing (and its heartbeat)
        produced = [Shard(i, str(p), name=p.stem, digest=ctx.output_checksum(p),
                          source=shards[i].source if i < len(shards) else "")
                    for i, p in enumerate(result.parts)]
        if following is None or attempt:
            break
        committed = run_dir.completed(following.index, {
            s.part: keys.shard(task_stages(following, s), s).final for s in produced})
        read_later = {p.part for p in produced} - set(committed)
        damaged = ctx.damaged_outputs("remove", sorted(read_later & ctx.resumed.get("remove",
                                                                                  set())))
        if not damaged:
            break
        for part in damaged:
            ctx.forget("remove", part)
    if ctx.phases:
        result.count.facts.setdefault("phases", ctx.phase_times())
    result.count.cpu_seconds = time.thread_time() - driver_cpu + ctx.tasks_cpu_seconds
    result.count.gpu_seconds = ctx.gpu_seconds
    count = result.count.to_dict()
    kept = sorted(ctx.per_part)
    run_dir.write_dataset_record(segment.index, DatasetRecord(key, count, kept))
    halt.point(f"trim:segment-{segment.index:02d}")
    if not pipeline.keep_work:
        run_dir.trim(ctx.work_dir, kept)
    return count, produced, ctx.spans


def _reused_count(count: dict[str, Any]) -> dict[str, Any]:
    """A recorded count as a run that reused it reports it: every phase's tasks reused."""
    phases = {name: {**entry, "reused": entry["tasks"]}
              for name, entry in count.get("phases", {}).items()}
    return {**count, "phases": phases} if phases else dict(count)


def next_shards(run_dir: RunDir, segment: Segment,
                manifests: list[ShardManifest]) -> list[Shard]:
    """The intermediate parts a shard segment handed on, as the next segment's shards: named
    after them, with the checksums their manifests record."""
    folder = run_dir.work_dir(segment.index)
    shards = []
    for manifest in manifests:
        for name in manifest.intermediate:
            path = folder / name
            facts = manifest.file(run_dir.recorded(path)) or {}
            shards.append(Shard(len(shards), str(path), label=name.removesuffix(".parquet"),
                                source=manifest.input.source,
                                name=name.removesuffix(".parquet"),
                                digest=facts.get("xxh3_128", "")))
    return shards


def _finalize_sinks(segment: Segment, run_dir: RunDir,
                    manifests: list[ShardManifest]) -> dict[str, dict[str, Any]]:
    """Let each writer of the segment write its dataset-level files; collect its stats."""
    extras = {}
    for name, stage in segment.stages:
        if isinstance(stage, Sink):
            infos = [m.sinks[name] for m in manifests if name in m.sinks]
            extras[name] = stage.finalize(run_dir.root, name, infos)
    return extras


def _shard_reuse(segment: Segment, done: dict[str, ShardManifest],
                 new: list[ShardManifest]) -> dict[str, Any]:
    """A shard segment's reuse: shards taken whole, shards run, and per stage how many of the
    tasks that ran computed it (a stage a checkpoint or kept files stood for is not run)."""
    ran = {name: sum(name in m.ran for m in new) for name, _ in segment.stages}
    out: dict[str, Any] = {"reused": len(done), "ran": len(new), "stages_ran": ran}
    for what in ("checkpoint", "scores", "writers"):
        counted = Counter(item for m in new for item in _listed(m.reused.get(what)))
        if counted:
            out[what] = dict(sorted(counted.items()))
    return out


def _listed(value: Any) -> list[str]:
    if value is None:
        return []
    return ["shards"] if value is True else list(value)


def _phase_reuse(count: dict[str, Any]) -> dict[str, Any]:
    """A dataset stage's reuse: per phase, its tasks and how many an earlier run had done."""
    phases = count.get("phases", {})
    return {"phases": {name: {"tasks": entry["tasks"], "reused": entry.get("reused", 0)}
                       for name, entry in phases.items()}}


def _timeline(manifests: dict[int, list[ShardManifest]], started: float) -> list[list]:
    """[segment, start s, end s, worker pid] of each shard task this run ran, from its start."""
    return sorted([index, round(m.clock[0] - started, 3), round(m.clock[1] - started, 3),
                   m.clock[2]] for index, group in manifests.items() for m in group
                  if m.clock is not None)


def _parts(shards: list[Shard]) -> list[Path]:
    return [Path(s.path) for s in shards]


def _fingerprint(pipeline: PipelineModel, inputs: list) -> str:
    """The whole run's configuration and input listing, as ``run.json`` records it."""
    blob = json.dumps([pipeline.fingerprint(), inputs]).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


def task_stages(segment: Segment, shard: Shard) -> list[tuple[str, Stage]]:
    """The segment's stages as one shard runs them: only the source that listed it."""
    return [(name, stage) for name, stage in segment.stages
            if not isinstance(stage, Source) or name == shard.source]


class _SegmentRun:
    """One shard segment's tasks: those not committed by this configuration run; shards whose
    input could not be had are left (:class:`Left`)."""

    def __init__(self, ex: Any, segment: Segment, run_dir: RunDir, pipeline: PipelineModel,
                 keys: RunKeys, keep: bool, reporter: ProgressReporter,
                 n_segments: int) -> None:
        self.ex, self.segment, self.run_dir, self.pipeline = ex, segment, run_dir, pipeline
        self.keys, self.keep, self.reporter = keys, keep, reporter
        self.n_segments = n_segments

    def run(self, shards: list[Shard]
            ) -> tuple[dict[str, ShardManifest], list[ShardManifest], list[Left]]:
        """(manifests an earlier run committed, manifests of this run, shards left)."""
        segment, pipeline = self.segment, self.pipeline
        found = self.run_dir.manifests(segment.index)
        current = {shard.part for shard in shards}
        for part in sorted(set(found) - current):  # its input is gone, or renamed
            self.run_dir.retire(segment.index, found.pop(part))
        shard_keys = {shard.part: self.keys.shard(task_stages(segment, shard), shard)
                      for shard in shards}
        done = self.run_dir.completed(segment.index,
                                      {part: k.final for part, k in shard_keys.items()}, found)
        spec = RunSpec.of(pipeline, self.run_dir.root)
        tasks = [ShardTask(segment.index, task_stages(segment, shard), shard, spec,
                           shard_keys[shard.part], self.keep, previous=found.get(shard.part))
                 for shard in shards if shard.part not in done]
        keys = {t.shard.part: t.key for t in tasks}
        if done and tasks:
            parts = [t.shard.part for t in tasks]
            log.info("segment %d/%d: %d of %d shards run again (%s%s)", segment.index + 1,
                     self.n_segments, len(tasks), len(shards), ", ".join(parts[:5]),
                     f", … {len(parts) - 5} more" if len(parts) > 5 else "")
        self.reporter.attach(self.ex)
        self.reporter.start(f"segment {segment.index + 1}/{self.n_segments}", len(shards),
                            len(done), {t.key: t.shard for t in tasks})
        new, left = [], []
        try:
            resources = segment.resources()
            if segment.holds_gil() and "GPU" not in resources:  # GPU tasks keep parts in flight
                resources[GIL] = 1
            for outcome in run_shard_tasks(self.ex, tasks, resources):
                if isinstance(outcome, Left):
                    log.warning("%s: %s: %s; the shard is left for the next run", outcome.label,
                                outcome.reason, outcome.error)
                    left.append(outcome)
                    continue
                new.append(outcome)
                self.reporter.advance(keys[outcome.part], outcome.stages[0]["in"])
        finally:
            self.reporter.stop()
        return done, new, sorted(left, key=lambda item: item.part)

    def damaged_reads(self, ex: Any, done: dict[str, ShardManifest], following: Segment,
                      parts: list[Shard]) -> list[str]:
        """Shards an earlier run committed whose intermediate files the next segment still has
        to read and that are not whole (checked by checksum, in parallel): their manifests are
        dropped, so that the next pass runs them again."""
        if _dataset_finished(self.run_dir, following, self.keys, parts):
            return []
        folder = self.run_dir.work_dir(self.segment.index)
        checks = [(part, str(folder / name), file) for part, m in sorted(done.items())
                  for name in m.intermediate
                  if (file := m.file(self.run_dir.recorded(folder / name))) is not None]
        damaged = set()
        names = [f"verify-{part}-{Path(path).name}" for part, path, _ in checks]
        for outcome in ex.map(full_check, checks, names, {}):
            part, path, why = outcome if isinstance(outcome, tuple) else ("", "", None)
            if why is not None:
                log.warning("%s: %s; the shard that wrote it runs again", path, why)
                damaged.add(part)
        for part in damaged:
            self.run_dir.forget(self.segment.index, part)
        return sorted(damaged)


def _dataset_finished(run_dir: RunDir, stage_segment: Segment, keys: RunKeys,
                      parts: list[Shard]) -> bool:
    """Whether the dataset stage after a shard segment finished for these parts under this
    configuration (so it reads none of them again)."""
    name, stage = stage_segment.stages[0]
    return bool(parts) and finished_dataset(run_dir, stage_segment.index,
                                            keys.barrier(name, stage, parts), parts) is not None


def finished_dataset(run_dir: RunDir, index: int, key: str, parts: list[Shard]
                     ) -> tuple[list[Shard], DatasetRecord] | None:
    """A dataset stage an earlier run finished under ``key``: the parts it handed on (as the
    next segment's shards, with their recorded checksums) and its record; None unless its
    record, every removal marker and every file they name are there and whole."""
    record = run_dir.dataset_record(index)
    if record is None or record.key != key:
        return None
    work = run_dir.work_dir(index)
    out = []
    for i, part in enumerate(parts):
        try:
            marker = run_dir.read_marker(run_dir.removal_marker(work, part.part))
        except DamagedRecord:
            return None
        if marker is None or marker.key != key:
            return None
        broken = run_dir.damaged(marker.files)
        if broken:
            log.warning("%s: %s; %s runs again", broken[0][0], broken[0][1], work.name)
            return None
        path = run_dir.outputs_dir(work) / f"{part.part}.parquet"
        out.append(Shard(i, str(path), name=part.part, source=part.source,
                         digest=marker.checksum(run_dir.recorded(path))))
    return out, record
