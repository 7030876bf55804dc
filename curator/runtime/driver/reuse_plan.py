"""``curate plan`` on an existing run directory: per segment, how many shards a run of this
configuration would reuse and how many it would compute, before anything runs. Read-only: it
computes the keys the run would compute and reads the manifests and markers that are there."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from curator.batch import Shard
from curator.pipeline import PipelineModel
from curator.plugins import load_imports
from curator.runtime.driver.run_keys import RunKeys
from curator.runtime.driver.runner import (
    finished_dataset,
    list_input_shards,
    next_shards,
    task_stages,
)
from curator.runtime.worker.shard_reuse import plan_reuse
from curator.store.run_dir import RunDir


def reuse_plan(pipeline: PipelineModel, root: str | Path) -> list[str]:
    """One line per segment: what a run into ``root`` would reuse and compute."""
    run_dir = RunDir(root)
    if not run_dir.is_run():
        return [f"{run_dir.root}: no run yet; everything is computed"]
    keys = RunKeys(pipeline, load_imports(pipeline.imports))
    shards: list[Shard] | None = list_input_shards(pipeline)
    lines = []
    segments = pipeline.plan().segments
    for segment in segments:
        label = f"segment {segment.index}"
        if shards is None:
            lines.append(f"{label}: computed where what it reads changes (known once the "
                         "segments before it have run)")
            continue
        if segment.kind == "dataset":
            name, stage = segment.stages[0]
            key = keys.barrier(name, stage, shards)
            finished = finished_dataset(run_dir, segment.index, key, shards)
            state = "reused" if finished is not None else \
                "computed (what it reads changed, or it did not finish)"
            lines.append(f"{label} ({name}): {state}")
            shards = finished[0] if finished is not None else None
            continue
        found = run_dir.manifests(segment.index)
        task_keys = {s.part: keys.shard(task_stages(segment, s), s) for s in shards}
        done = run_dir.completed(segment.index, {p: k.final for p, k in task_keys.items()},
                                 found)
        partial: Counter = Counter()
        for shard in shards:
            if shard.part in done:
                continue
            reuse = plan_reuse(run_dir, segment.index, shard.part,
                               task_stages(segment, shard), task_keys[shard.part],
                               found.get(shard.part))
            partial.update({"checkpoint": reuse.checkpoint is not None,
                            **{f"scores kept: {n}": 1 for n in reuse.replays},
                            **{f"writer files kept: {n}": 1 for n in reuse.skipped}})
        extra = "".join(f"; {what} {n}" for what, n in sorted(partial.items()) if n)
        extra = extra.replace("; checkpoint", "; from the checkpoint (no extraction)")
        lines.append(f"{label}: {len(done)} shards reused, {len(shards) - len(done)} computed"
                     f"{extra}")
        following = len(done) == len(shards) and segment.index + 1 < len(segments)
        shards = next_shards(run_dir, segment, [done[s.part] for s in shards]) \
            if following else None
    return lines

