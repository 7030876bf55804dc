"""After a segment's shards are committed: one schema for each Parquet folder they filled."""

from __future__ import annotations

from pathlib import Path

from curator.io.parquet import unify_parts
from curator.pipeline import Segment
from curator.runtime.rundir import REJECTED_COMPRESSION, RunDir
from curator.stages.base import Sink


def unify_segment(run_dir: RunDir, segment: Segment, keep_intermediate: bool,
                  intermediate_compression: str) -> None:
    """Each Parquet writer's parts, each stage's rejected documents and the kept rows handed to
    the next segment read as one table each, whatever columns each shard had. A rewritten part
    replaces the committed one with its manifest updated first, so a run killed here converges
    on the same bytes."""
    folders: list[tuple[Path, str]] = []
    for name, stage in segment.stages:
        if isinstance(stage, Sink) and (parts := stage.parquet_parts(run_dir.root, name)):
            folders.append(parts)
        folders.append((run_dir.rejected_path(name, "part").parent, REJECTED_COMPRESSION))
    if keep_intermediate:
        folders.append((run_dir.work_dir(segment.index), intermediate_compression))
    for folder, compression in folders:
        parts = sorted(folder.glob("part-*.parquet"))
        if parts:
            run_dir.replace_committed(unify_parts(parts, compression))
