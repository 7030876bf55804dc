"""``stats.json``: the per-stage funnel summed over every committed shard."""

from __future__ import annotations

from typing import Any

from curator.commit import write_json_atomic
from curator.counts import StageCount
from curator.pipeline import PipelineModel
from curator.runtime.rundir import RunDir


def write_stats(run_dir: RunDir, pipeline: PipelineModel, manifests: dict[int, list[dict]],
                stage_extras: dict[str, dict[str, Any]], extra: dict[str, Any]) -> dict[str, Any]:
    """Aggregate the manifests of every segment into ``stats.json`` in pipeline order;
    ``stage_extras`` adds entries to a stage (a writer's token counts, say)."""
    totals: dict[str, StageCount] = {}
    for segment_manifests in manifests.values():
        for manifest in segment_manifests:
            for entry in manifest["stages"]:
                count = StageCount.from_dict(entry)
                totals[count.name] = totals[count.name].merge(count) \
                    if count.name in totals else count
    stages = []
    for name, stage in pipeline.named_stages():
        count = totals.get(name, StageCount(name, stage.type))
        entry = count.to_dict()
        entry["seconds"] = round(count.seconds, 3)
        stages.append({**entry, **stage_extras.get(name, {})})
    stats = {"name": pipeline.name, "stages": stages, **extra}
    write_json_atomic(run_dir.root / "stats.json", stats)
    return stats
