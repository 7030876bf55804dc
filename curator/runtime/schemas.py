"""After a segment's shards are committed: one schema for each Parquet folder they filled."""

from __future__ import annotations

from curator.io.parquet import unify_parts
from curator.pipeline import Segment
from curator.runtime.rundir import RunDir

INTERMEDIATE_COMPRESSION = "zstd"


def unify_segment(run_dir: RunDir, segment: Segment, keep_intermediate: bool) -> None:
    """The kept rows handed to the next barrier and each stage's rejected documents read as one
    table each, whatever columns each shard had (writers unify their own parts in ``finalize``).
    """
    folders = [run_dir.rejected_path(name, "part").parent for name, _ in segment.stages]
    if keep_intermediate:
        folders.append(run_dir.work_dir(segment.index))
    for folder in folders:
        parts = sorted(folder.glob("part-*.parquet"))
        if parts:
            unify_parts(parts, INTERMEDIATE_COMPRESSION, run_dir)
