"""Runs a planned pipeline: segment by segment, shard by shard, resuming what was committed."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from curator import halt
from curator.batch import Shard
from curator.commit import full_check
from curator.pipeline import PipelineModel, Segment
from curator.plugins import load_imports
from curator.runtime.errors import CurationError
from curator.runtime.executors import GIL, ExecutorPool
from curator.runtime.main_guard import leave_if_importing_main
from curator.runtime.phases import PhaseContext
from curator.runtime.progress import ProgressReporter
from curator.runtime.recovery import Left, run_shard_tasks
from curator.runtime.requirements import check_requirements
from curator.runtime.run_lock import run_lock
from curator.runtime.rundir import RunDir
from curator.runtime.schemas import unify_segment
from curator.runtime.shard_task import ShardTask
from curator.runtime.stats import write_stats
from curator.runtime.warm_up import warm_up_in_background
from curator.stages.base import DatasetResult, Sink, Source, Stage

log = logging.getLogger("curator")


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
        for shard in source.shards():
            label = f"{name}/{shard.label}" if len(sources) > 1 else shard.label
            shards.append(replace(shard, index=len(shards), label=label, source=name))
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
        return _run_locked(pipeline, RunDir(root), executor, workers, scheduler, scheduler_file,
                           force, progress)


def _run_locked(pipeline: PipelineModel, run_dir: RunDir, executor: str | None,
                workers: int | None, scheduler: str | None, scheduler_file: str | None,
                force: bool, progress: bool) -> RunResult:
    plan = pipeline.plan()
    shards = list_input_shards(pipeline)
    inputs = [[s.path, s.size] for s in shards]
    fingerprint = _fingerprint(pipeline, inputs)
    dataset_files = [path for name, stage in pipeline.named_stages() if isinstance(stage, Sink)
                     for path in stage.dataset_files(run_dir.root, name)]
    run_dir.prepare(fingerprint, {**pipeline.to_dict(), "inputs": inputs},
                    {**pipeline.decisive(), "inputs": inputs}, force, dataset_files)
    config = pipeline.executor
    started = time.time()
    reporter = ProgressReporter(progress)
    manifests: dict[int, list[dict]] = {}
    extras: dict[str, dict[str, Any]] = {}
    ran: set[int] = set()  # indices of the shards some task of this run worked on
    left: list[Left] = []
    imports = load_imports(pipeline.imports)
    preload = sorted({m for _, stage in pipeline.named_stages() for m in stage.preload()})
    with ExecutorPool(executor or config.type, config.workers if workers is None else workers,
                      scheduler or config.scheduler, scheduler_file or config.scheduler_file,
                      config.processes, imports, preload) as pool:
        gpus = pool.offers("GPU")
        stages = [stage for _, stage in pipeline.named_stages()]
        if pool.runs_here(any(stage.holds_gil for stage in stages)):
            warm_up_in_background([stage.for_cluster(gpus) for stage in stages])
        segments = [Segment(segment.index, segment.kind,
                            [(name, stage.for_cluster(gpus)) for name, stage in segment.stages])
                    for segment in plan.segments]
        for segment in segments:
            following = segments[segment.index + 1] if segment.index + 1 < len(segments) else None
            if segment.kind == "dataset":
                result, count = _run_dataset(pool, segment, following, shards, run_dir,
                                             pipeline, fingerprint, reporter)
                manifests[segment.index] = [{"stages": [count]}]
                shards = [Shard(i, str(p), label=p.name) for i, p in enumerate(result.parts)]
                continue
            ex = pool.get(segment.holds_gil())
            run = _SegmentRun(ex, segment, run_dir, pipeline, fingerprint, following is not None,
                              reporter, len(segments))
            done, new, gone = run.run(shards)
            if following is not None and not gone:
                damaged = run.damaged_reads(ex, done, following, len(done) + len(new))
                if damaged:  # their producers run again, then the next segment reads them
                    _, again, gone = run.run(shards)
                    new += again
                    done = {k: v for k, v in done.items() if k not in {m["part"] for m in again}}
            parts = {m["part"] for m in new}
            ran.update(s.index for s in shards if s.part in parts)
            manifests[segment.index] = sorted([*done.values(), *new], key=lambda m: m["part"])
            if gone:
                left = gone
                break
            halt.point(f"finalize:segment-{segment.index:02d}")
            extras.update(_finalize_sinks(segment, run_dir, manifests[segment.index]))
            unified = unify_segment(run_dir, segment, following is not None,
                                    pipeline.intermediate_compression, fingerprint, bool(new))
            if unified:  # a part found damaged: its shard runs again, then the whole again
                _, again, gone = run.run(shards)
                if gone:
                    left = gone
                    break
                redone = {m["part"] for m in again}
                manifests[segment.index] = sorted(
                    [*[m for m in manifests[segment.index] if m["part"] not in redone], *again],
                    key=lambda m: m["part"])
                extras.update(_finalize_sinks(segment, run_dir, manifests[segment.index]))
                unify_segment(run_dir, segment, following is not None,
                              pipeline.intermediate_compression, fingerprint, True)
            if following is not None:
                folder = run_dir.work_dir(segment.index)
                files = [(name, m["input"]["source"]) for m in manifests[segment.index]
                         for name in m["intermediate"]]
                shards = [Shard(i, str(folder / name), label=name.removesuffix(".parquet"),
                                source=source) for i, (name, source) in enumerate(files)]
    halt.point("stats")
    run_facts: dict[str, Any] = {
        "seconds": round(time.time() - started, 3),
        "executor_start_seconds": round(pool.start_seconds, 3),
        "shards": len(inputs), "timeline": _timeline(manifests, started)}
    if left:
        run_facts["left"] = [item.to_dict() for item in left]
    stats = write_stats(run_dir, pipeline, manifests, extras, run_facts)
    from curator.report.html import write_report

    write_report(run_dir.root, stats)
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


def _run_dataset(pool: ExecutorPool, segment: Segment, following: Segment | None,
                 shards: list[Shard], run_dir: RunDir, pipeline: PipelineModel,
                 fingerprint: str, reporter: ProgressReporter) -> tuple[DatasetResult, dict]:
    """Run a dataset stage; the parts the next segment still has to read that an earlier run
    wrote are checked whole first, and a damaged one is written again by its remove task."""
    name, stage = segment.stages[0]
    ex = pool.get(stage.holds_gil)
    reporter.attach(ex)
    for attempt in range(2):
        ctx = PhaseContext(run_dir, run_dir.work_dir(segment.index), ex, name, stage.type,
                           fingerprint, pipeline.on_error, pipeline.rejected,
                           pipeline.batch_bytes, reporter.phase,
                           pipeline.intermediate_compression)
        result = stage.run_dataset(_parts(shards), ctx)
        if following is None or attempt:
            break
        read_later = set(_keys(len(result.parts))) - set(
            run_dir.completed(following.index, fingerprint))
        damaged = ctx.damaged_outputs("remove", sorted(read_later & ctx.resumed.get("remove",
                                                                                  set())))
        if not damaged:
            break
        for key in damaged:
            ctx.forget("remove", key)
    if ctx.phases:
        result.count.facts.setdefault("phases", ctx.phase_times())
    return result, result.count.to_dict()


def _keys(n: int) -> list[str]:
    return [f"part-{i:05d}" for i in range(n)]


def _finalize_sinks(segment: Segment, run_dir: RunDir,
                    manifests: list[dict]) -> dict[str, dict[str, Any]]:
    """Let each writer of the segment write its dataset-level files; collect its stats."""
    extras = {}
    for name, stage in segment.stages:
        if isinstance(stage, Sink):
            infos = [m["sinks"][name] for m in manifests if name in m.get("sinks", {})]
            extras[name] = stage.finalize(run_dir.root, name, infos)
    return extras


def _timeline(manifests: dict[int, list[dict]], started: float) -> list[list]:
    """[segment, start s, end s, worker pid] of each shard task this run ran, from its start."""
    return sorted([index, round(m["clock"][0] - started, 3), round(m["clock"][1] - started, 3),
                   m["clock"][2]] for index, group in manifests.items() for m in group
                  if "clock" in m)


def _parts(shards: list[Shard]) -> list[Path]:
    return [Path(s.path) for s in shards]


def _fingerprint(pipeline: PipelineModel, inputs: list) -> str:
    blob = json.dumps([pipeline.fingerprint(), inputs]).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


def _task_stages(segment: Segment, shard: Shard) -> list[tuple[str, Stage]]:
    """The segment's stages as one shard runs them: only the source that listed it."""
    return [(name, stage) for name, stage in segment.stages
            if not isinstance(stage, Source) or name == shard.source]


class _SegmentRun:
    """One shard segment's tasks: those not committed by this configuration run; shards whose
    input could not be had are left (:class:`Left`)."""

    def __init__(self, ex: Any, segment: Segment, run_dir: RunDir, pipeline: PipelineModel,
                 fingerprint: str, keep: bool, reporter: ProgressReporter,
                 n_segments: int) -> None:
        self.ex, self.segment, self.run_dir, self.pipeline = ex, segment, run_dir, pipeline
        self.fingerprint, self.keep, self.reporter = fingerprint, keep, reporter
        self.n_segments = n_segments

    def run(self, shards: list[Shard]) -> tuple[dict[str, dict], list[dict], list[Left]]:
        """(manifests an earlier run committed, manifests of this run, shards left)."""
        segment, pipeline = self.segment, self.pipeline
        done = self.run_dir.completed(segment.index, self.fingerprint)
        tasks = [ShardTask(segment.index, _task_stages(segment, shard), shard,
                           str(self.run_dir.root), self.fingerprint, pipeline.on_error,
                           pipeline.rejected, pipeline.batch_bytes, self.keep,
                           pipeline.max_failed_fraction, pipeline.part_bytes,
                           pipeline.intermediate_compression)
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
                self.reporter.advance(keys[outcome["part"]], outcome["stages"][0]["in"])
        finally:
            self.reporter.stop()
        return done, new, sorted(left, key=lambda item: item.part)

    def damaged_reads(self, ex: Any, done: dict[str, dict], following: Segment,
                      n_shards: int) -> list[str]:
        """Shards an earlier run committed whose intermediate files the next segment still has
        to read and that are not whole (checked by checksum, in parallel): their manifests are
        dropped, so that the next pass runs them again."""
        if _dataset_finished(self.run_dir, following, n_shards):
            return []
        folder = self.run_dir.work_dir(self.segment.index)
        checks = [(part, str(folder / name), file) for part, m in sorted(done.items())
                  for name in m["intermediate"] for file in m["files"]
                  if file["path"] == self.run_dir.recorded(folder / name)]
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


def _dataset_finished(run_dir: RunDir, stage_segment: Segment, n_shards: int) -> bool:
    """Whether the dataset stage after a shard segment has written every removal output (so
    it reads no intermediate part again): one marker per part, and none past them."""
    markers = run_dir.work_dir(stage_segment.index) / "remove" / "_done"
    return n_shards > 0 and len(list(markers.glob("part-*.json"))) >= n_shards
