"""``stats.json``: the per-stage funnel summed over every committed shard."""

from __future__ import annotations

from typing import Any

from curator.commit import write_json_atomic
from curator.counts import StageCount
from curator.pipeline import PipelineModel
from curator.runtime.driver.recorded import recorded_pipeline
from curator.stages.base import Filter, Source
from curator.store.records import ShardManifest
from curator.store.run_dir import RunDir


def write_stats(run_dir: RunDir, pipeline: PipelineModel,
                manifests: dict[int, list[ShardManifest]], dataset_counts: dict[int, dict],
                stage_extras: dict[str, dict[str, Any]], extra: dict[str, Any]) -> dict[str, Any]:
    """:func:`stage_stats` written to ``stats.json``."""
    stats = stage_stats(pipeline, manifests, dataset_counts, stage_extras, extra)
    write_json_atomic(run_dir.stats_file, stats)
    return stats


def stage_stats(pipeline: PipelineModel, manifests: dict[int, list[ShardManifest]],
                dataset_counts: dict[int, dict], stage_extras: dict[str, dict[str, Any]],
                extra: dict[str, Any]) -> dict[str, Any]:
    """Aggregate the manifests of every shard segment and the dataset stages' counts in
    pipeline order; ``stage_extras`` adds entries to a stage (a writer's token counts, say)."""
    totals: dict[str, StageCount] = {}
    entries = [entry for group in manifests.values() for m in group for entry in m.stages]
    for entry in [*entries, *dataset_counts.values()]:
        count = StageCount.from_dict(entry)
        totals[count.name] = totals[count.name].merge(count) if count.name in totals else count
    stages = []
    for name, stage in pipeline.named_stages():
        count = totals.get(name, StageCount(name, stage.type))
        entry = count.to_dict()
        entry["seconds"] = round(count.seconds, 3)
        if isinstance(stage, Source):
            entry["source"] = True  # its documents enter the run (a run may have several)
        if isinstance(stage, Filter) and (cuts := stage.thresholds()):
            entry["thresholds"] = cuts  # where its rules cut its scores (the report draws them)
        stages.append({**entry, **stage_extras.get(name, {})})
    return {"name": pipeline.name, "stages": stages, **extra}


def partial_stats(run_dir: RunDir) -> dict[str, Any]:
    """The figures of a run that is running or was stopped (no ``stats.json``): what its
    committed shards and finished dataset stages hold so far, marked ``partial`` (shards
    committed per shard segment, dataset stages finished). ``FileNotFoundError`` when the folder
    is not a run."""
    if not run_dir.is_run():
        raise FileNotFoundError(f"{run_dir.root} is not a curator run (no run.json)")
    pipeline = recorded_pipeline(run_dir)
    manifests: dict[int, list[ShardManifest]] = {}
    dataset_counts: dict[int, dict] = {}
    finished = []
    for segment in pipeline.plan().segments:
        if segment.kind == "dataset":
            record = run_dir.dataset_record(segment.index)
            if record is not None:
                dataset_counts[segment.index] = record.count
                finished.append(segment.stages[0][0])
        else:
            manifests[segment.index] = list(run_dir.manifests(segment.index).values())
    return stage_stats(pipeline, manifests, dataset_counts, {}, {"partial": {
        "shards_committed": {f"segment-{i:02d}": len(m) for i, m in manifests.items()},
        "dataset_stages_finished": finished}})
