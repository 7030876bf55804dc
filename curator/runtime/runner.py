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
from curator.pipeline import PipelineModel, Segment
from curator.plugins import load_imports
from curator.runtime.executors import GIL, ExecutorPool
from curator.runtime.main_guard import leave_if_importing_main
from curator.runtime.phases import PhaseContext
from curator.runtime.progress import ProgressReporter
from curator.runtime.recovery import run_shard_tasks
from curator.runtime.requirements import check_requirements
from curator.runtime.rundir import RunDir
from curator.runtime.schemas import unify_segment
from curator.runtime.shard_task import ShardTask
from curator.runtime.stats import write_stats
from curator.runtime.warm_up import warm_up_in_background
from curator.stages.base import Sink, Source, Stage

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
    """Run ``pipeline`` into its run directory; committed shards of this config are skipped."""
    leave_if_importing_main()
    check_requirements(pipeline.named_stages())
    root = output or pipeline.output
    if not root:
        raise ValueError("no run directory: set 'output' in the pipeline or pass --output")
    run_dir = RunDir(root)
    plan = pipeline.plan()
    shards = list_input_shards(pipeline)
    inputs = [[s.path, s.size] for s in shards]
    fingerprint = _fingerprint(pipeline, inputs)
    run_dir.prepare(fingerprint, {**pipeline.to_dict(), "inputs": inputs},
                    {**pipeline.decisive(), "inputs": inputs}, force)
    config = pipeline.executor
    started = time.time()
    reporter = ProgressReporter(progress)
    manifests: dict[int, list[dict]] = {}
    extras: dict[str, dict[str, Any]] = {}
    ran: set[int] = set()  # indices of the shards some task of this run worked on
    imports = load_imports(pipeline.imports)
    preload = sorted({m for _, stage in pipeline.named_stages() for m in stage.preload()})
    with ExecutorPool(executor or config.type, config.workers if workers is None else workers,
                      scheduler or config.scheduler, scheduler_file or config.scheduler_file,
                      config.processes, imports, preload) as pool:
        gpus = pool.offers("GPU")
        stages = [stage for _, stage in pipeline.named_stages()]
        if pool.runs_here(any(stage.holds_gil for stage in stages)):
            warm_up_in_background([stage.for_cluster(gpus) for stage in stages])
        for segment in plan.segments:
            segment = Segment(segment.index, segment.kind,
                              [(name, stage.for_cluster(gpus)) for name, stage in segment.stages])
            if segment.kind == "dataset":
                name, stage = segment.stages[0]
                ex = pool.get(stage.holds_gil)
                reporter.attach(ex)
                ctx = PhaseContext(run_dir, run_dir.work_dir(segment.index), ex, name,
                                   stage.type, fingerprint, pipeline.on_error, pipeline.rejected,
                                   pipeline.batch_bytes, reporter.phase,
                                   pipeline.intermediate_compression)
                result = stage.run_dataset(_parts(shards), ctx)
                if ctx.phases:
                    result.count.facts.setdefault("phases", ctx.phase_times())
                manifests[segment.index] = [{"stages": [result.count.to_dict()]}]
                shards = [Shard(i, str(p), label=p.name) for i, p in enumerate(result.parts)]
                continue
            keep = segment.index + 1 < len(plan.segments)
            done, new = _run_segment(pool.get(segment.holds_gil()), segment, shards, run_dir,
                                     pipeline, fingerprint, keep, reporter, len(plan.segments))
            parts = {m["part"] for m in new}
            ran.update(s.index for s in shards if s.part in parts)
            manifests[segment.index] = sorted([*done.values(), *new], key=lambda m: m["part"])
            halt.point(f"finalize:segment-{segment.index:02d}")
            extras.update(_finalize_sinks(segment, run_dir, manifests[segment.index]))
            unify_segment(run_dir, segment, keep, pipeline.intermediate_compression)
            if keep:
                folder = run_dir.work_dir(segment.index)
                files = [(name, m["input"]["source"]) for m in manifests[segment.index]
                         for name in m["intermediate"]]
                shards = [Shard(i, str(folder / name), label=name.removesuffix(".parquet"),
                                source=source) for i, (name, source) in enumerate(files)]
    halt.point("stats")
    stats = write_stats(run_dir, pipeline, manifests, extras,
                        {"seconds": round(time.time() - started, 3),
                         "executor_start_seconds": round(pool.start_seconds, 3),
                         "shards": len(inputs), "timeline": _timeline(manifests, started)})
    from curator.report.html import write_report

    write_report(run_dir.root, stats)
    n_ran = len(ran & set(range(len(inputs))))
    return RunResult(run_dir.root, stats, n_ran, len(inputs) - n_ran)


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


def _run_segment(ex: Any, segment: Segment, shards: list[Shard], run_dir: RunDir,
                 pipeline: PipelineModel, fingerprint: str, keep: bool,
                 reporter: ProgressReporter, n_segments: int) -> tuple[dict[str, dict], list[dict]]:
    done = run_dir.completed(segment.index, fingerprint)
    tasks = [ShardTask(segment.index, _task_stages(segment, shard), shard, str(run_dir.root),
                       fingerprint, pipeline.on_error, pipeline.rejected, pipeline.batch_bytes,
                       keep, pipeline.max_failed_fraction, pipeline.part_bytes,
                       pipeline.intermediate_compression)
             for shard in shards if shard.part not in done]
    keys = {t.shard.part: t.key for t in tasks}
    reporter.attach(ex)
    reporter.start(f"segment {segment.index + 1}/{n_segments}", len(shards), len(done),
                   {t.key: t.shard for t in tasks})
    new = []
    try:
        resources = segment.resources()
        if segment.holds_gil() and "GPU" not in resources:  # GPU tasks keep parts in flight
            resources[GIL] = 1
        for manifest in run_shard_tasks(ex, tasks, resources):
            new.append(manifest)
            reporter.advance(keys[manifest["part"]], manifest["stages"][0]["in"])
    finally:
        reporter.stop()
    return done, new
