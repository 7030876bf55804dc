"""Runs a planned pipeline: segment by segment, shard by shard, resuming what was committed."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from curator.pipeline import Pipeline, Segment
from curator.plugins import load_imports
from curator.runtime.executors import DaskExecutor, Executor, make_executor
from curator.runtime.phases import DatasetContext
from curator.runtime.progress import ProgressReporter
from curator.runtime.recovery import run_shard_tasks
from curator.runtime.rundir import RunDir
from curator.runtime.shard_task import ShardTask
from curator.runtime.stats import write_stats
from curator.stages.base import Shard, Sink, Source

log = logging.getLogger("curator")


@dataclass
class RunResult:
    output: Path
    stats: dict[str, Any]
    shards_run: int
    shards_skipped: int


def run_pipeline(pipeline: Pipeline, output: str | Path | None = None,
                 executor: str | None = None, workers: int | None = None,
                 scheduler: str | None = None, scheduler_file: str | None = None,
                 force: bool = False, progress: bool = True) -> RunResult:
    """Run ``pipeline`` into its run directory; committed shards of this config are skipped."""
    root = output or pipeline.output
    if not root:
        raise ValueError("no run directory: set 'output' in the pipeline or pass --output")
    run_dir = RunDir(root)
    plan = pipeline.plan()
    source = pipeline.stages[0]
    assert isinstance(source, Source)
    shards = source.shards()
    inputs = [[s.path, s.size] for s in shards]
    fingerprint = _fingerprint(pipeline, inputs)
    run_dir.prepare(fingerprint, {**pipeline.to_dict(), "inputs": inputs}, force)
    config = pipeline.executor
    started = time.time()
    reporter = ProgressReporter(progress)
    manifests: dict[int, list[dict]] = {}
    extras: dict[str, dict[str, Any]] = {}
    ran = skipped = 0
    executor_kind = executor or config.type
    processes = config.processes if config.processes is not None else pipeline.holds_gil()
    imports = load_imports(pipeline.imports)
    with make_executor(executor_kind, workers or config.workers, scheduler or config.scheduler,
                       scheduler_file or config.scheduler_file, processes) as ex:
        if imports and isinstance(ex, DaskExecutor):
            from curator.runtime.worker_imports import import_on_cluster

            import_on_cluster(ex.client, imports)
        for segment in plan.segments:
            if segment.kind == "dataset":
                name, stage = segment.stages[0]
                ctx = DatasetContext(run_dir, run_dir.work_dir(segment.index), ex, name,
                                     fingerprint, pipeline.on_error, pipeline.rejected,
                                     pipeline.batch_bytes)
                result = stage.run_dataset(_parts(shards), ctx)
                manifests[segment.index] = [{"stages": [result.counts]}]
                shards = [Shard(i, str(p), label=p.name) for i, p in enumerate(result.parts)]
                continue
            keep = _followed_by_dataset(plan.segments, segment)
            done, new = _run_segment(ex, segment, shards, run_dir, pipeline, fingerprint, keep,
                                     reporter, len(plan.segments))
            skipped += len(done)
            ran += len(new)
            manifests[segment.index] = sorted([*done.values(), *new], key=lambda m: m["part"])
            extras.update(_finalize_sinks(segment, run_dir, manifests[segment.index]))
            if keep:
                shards = [Shard(i, str(run_dir.work_dir(segment.index) / f"{s.part}.parquet"),
                                label=s.part) for i, s in enumerate(shards)]
    stats = write_stats(run_dir, pipeline, manifests, extras,
                        {"seconds": round(time.time() - started, 3), "shards": len(inputs)})
    from curator.report.funnel import write_report

    write_report(run_dir.root, stats)
    return RunResult(run_dir.root, stats, ran, skipped)


def _finalize_sinks(segment: Segment, run_dir: RunDir,
                    manifests: list[dict]) -> dict[str, dict[str, Any]]:
    """Let each writer of the segment write its dataset-level files; collect its stats."""
    extras = {}
    for name, stage in segment.stages:
        if isinstance(stage, Sink):
            infos = [m["sinks"][name] for m in manifests if name in m.get("sinks", {})]
            extras[name] = stage.finalize(run_dir.root, name, infos)
    return extras


def _parts(shards: list[Shard]) -> list[Path]:
    return [Path(s.path) for s in shards]


def _fingerprint(pipeline: Pipeline, inputs: list) -> str:
    blob = json.dumps([pipeline.fingerprint(), inputs]).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


def _followed_by_dataset(segments: list[Segment], segment: Segment) -> bool:
    following = segments[segment.index + 1] if segment.index + 1 < len(segments) else None
    return following is not None and following.kind == "dataset"


def _run_segment(ex: Executor, segment: Segment, shards: list[Shard], run_dir: RunDir,
                 pipeline: Pipeline, fingerprint: str, keep: bool, reporter: ProgressReporter,
                 n_segments: int) -> tuple[dict[str, dict], list[dict]]:
    done = run_dir.completed(segment.index, fingerprint)
    tasks = [ShardTask(segment.index, segment.stages, shard, str(run_dir.root), fingerprint,
                       pipeline.on_error, pipeline.rejected, pipeline.batch_bytes, keep,
                       pipeline.max_failed_fraction)
             for shard in shards if shard.part not in done]
    reporter.start(f"segment {segment.index + 1}/{n_segments}", len(shards), len(done))
    new = []
    try:
        for manifest in run_shard_tasks(ex, tasks, segment.resources()):
            new.append(manifest)
            reporter.advance()
    finally:
        reporter.stop()
    return done, new

