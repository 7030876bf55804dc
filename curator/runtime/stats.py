"""``stats.json``: the per-stage funnel summed over every committed shard."""

from __future__ import annotations

from collections import Counter
from typing import Any

from curator.commit import write_json_atomic
from curator.pipeline import Pipeline
from curator.runtime.rundir import RunDir

COUNT_KEYS = {"name", "type", "in", "kept", "removed", "failed", "removed_by_reason", "seconds",
              "notes"}


def sum_counts(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Sum per-shard stage counts (same stage) into one funnel entry."""
    first = entries[0]
    # a dataset stage reports once, and may add facts of its own (edges, rounds, clusters)
    facts = {k: v for k, v in first.items() if k not in COUNT_KEYS} if len(entries) == 1 else {}
    reasons: Counter = Counter()
    notes: Counter = Counter()  # what a stage changed without removing (a reader's id_converted)
    for entry in entries:
        reasons.update(entry["removed_by_reason"])
        notes.update(entry.get("notes", {}))
    return {"name": first["name"], "type": first["type"],
            **{key: sum(e[key] for e in entries) for key in ("in", "kept", "removed", "failed")},
            "removed_by_reason": dict(sorted(reasons.items())),
            "seconds": round(sum(e["seconds"] for e in entries), 3),
            **({"notes": dict(sorted(notes.items()))} if notes else {}), **facts}


def write_stats(run_dir: RunDir, pipeline: Pipeline, manifests: dict[int, list[dict]],
                stage_extras: dict[str, dict[str, Any]], extra: dict[str, Any]) -> dict[str, Any]:
    """Aggregate the manifests of every segment into ``stats.json`` in pipeline order;
    ``stage_extras`` adds entries to a stage (a writer's token counts, say)."""
    per_stage: dict[str, list[dict]] = {}
    for segment_manifests in manifests.values():
        for manifest in segment_manifests:
            for entry in manifest["stages"]:
                per_stage.setdefault(entry["name"], []).append(entry)
    stages = []
    for name, stage in pipeline.named_stages():
        entries = per_stage.get(name) or [{"name": name, "type": stage.type, "in": 0, "kept": 0,
                                           "removed": 0, "failed": 0, "removed_by_reason": {},
                                           "seconds": 0.0}]
        stages.append({**sum_counts(entries), **stage_extras.get(name, {})})
    stats = {"name": pipeline.name, "stages": stages, **extra}
    write_json_atomic(run_dir.root / "stats.json", stats)
    return stats
