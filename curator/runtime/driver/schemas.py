"""After a segment's shards are committed: one schema for each Parquet folder they filled."""

from __future__ import annotations

import logging
from pathlib import Path

from curator.commit import damage
from curator.io.parquet import DamagedPart, unify_parts
from curator.pipeline import Segment
from curator.stages.base import Sink
from curator.store.run_dir import REJECTED_COMPRESSION, RunDir

log = logging.getLogger("curator")


def unify_segment(run_dir: RunDir, segment: Segment, keep_intermediate: bool,
                  intermediate_compression: str, fingerprint: str, changed: bool) -> list[str]:
    """Each Parquet writer's parts, each stage's rejected documents and the kept rows handed to
    the next segment read as one table each, whatever columns each shard had. A rewritten part
    replaces the committed one with its manifest updated first, so a run killed here converges
    on the same bytes. Skipped when an earlier run unified the same shards (``changed``: this
    run committed some). A part that cannot be read, or that is not whole when it is about to be
    rewritten, is named; its shard's manifest is dropped and returned, for the shard to run
    again."""
    if not changed and run_dir.unified(segment.index, fingerprint):
        return []
    try:
        _unify(run_dir, segment, keep_intermediate, intermediate_compression)
    except DamagedPart as err:
        owner = run_dir.owner_of(err.path)
        log.warning("%s; the shard that wrote it runs again", err)
        if owner is None:
            raise
        run_dir.forget(segment.index, owner)
        return [owner]
    run_dir.mark_unified(segment.index, fingerprint)
    return []


def _unify(run_dir: RunDir, segment: Segment, keep_intermediate: bool,
           intermediate_compression: str) -> None:
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
            run_dir.replace_committed(unify_parts(parts, compression,
                                                  lambda path: _check(run_dir, path)))


def _check(run_dir: RunDir, path: Path) -> str | None:
    """Why a committed part about to be rewritten is not the file its manifest records."""
    recorded = run_dir.recorded_facts(path)
    return None if recorded is None else damage(path, recorded, full=True)
