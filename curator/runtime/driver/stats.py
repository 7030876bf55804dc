"""``stats.json``: the per-stage funnel summed over every committed shard."""

from __future__ import annotations

from typing import Any

from curator.commit import write_json_atomic
from curator.counts import StageCount
from curator.pipeline import PipelineModel
from curator.store.records import ShardManifest
from curator.store.run_dir import RunDir


def write_stats(run_dir: RunDir, pipeline: PipelineModel,
                manifests: dict[int, list[ShardManifest]], dataset_counts: dict[int, dict],
                stage_extras: dict[str, dict[str, Any]], extra: dict[str, Any]) -> dict[str, Any]:
    """Aggregate the manifests of every shard segment and the dataset stages' counts into
    ``stats.json`` in pipeline order; ``stage_extras`` adds entries to a stage (a writer's
    token counts, say)."""
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
        stages.append({**entry, **stage_extras.get(name, {})})
    stats = {"name": pipeline.name, "stages": stages, **extra}
    write_json_atomic(run_dir.stats_file, stats)
    return stats
