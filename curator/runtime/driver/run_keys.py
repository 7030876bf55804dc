"""The keys of one run's work, computed on the driver: each shard task's (``ShardKeys``), each
barrier's. Stage keys are computed once per run (side inputs are read once)."""

from __future__ import annotations

import re
from typing import Any

import xxhash

from curator.batch import Shard
from curator.pipeline import PipelineModel
from curator.stages.base import BatchStage, Filter, Source, Stage
from curator.store.keys import (
    Key,
    ShardKeys,
    StageKeys,
    digest,
    file_identity,
    imports_digest,
    shard_keys,
    stage_key,
)


def shard_name(source: str, shard: Shard, by_path: bool = False) -> str:
    """A source shard's part name, from its identity, never its position in a listing (a file
    added between two others renames nothing): its label (a piece of a file, such as a run of
    row groups, adds the piece's range, numbers padded so that pieces sort in file order), then
    8 hex digits of a hash of the label and piece, so that the same files give the same names
    wherever they are (``by_path``: of the full path, for labels two files share)."""
    _, _, piece = shard.path.partition("#")
    readable = shard.label + (f"#{_PADDED.sub(lambda m: m.group().zfill(12), piece)}"
                              if piece else "")
    identity = shard.path if by_path else f"{shard.label}#{piece}"
    unique = xxhash.xxh3_64_hexdigest(f"{source}\0{identity}".encode())[:8]
    safe = _UNSAFE.sub("_", readable.removeprefix("part-")).strip("_")[-MAX_NAME:]
    return f"part-{safe}-{unique}"


_UNSAFE = re.compile(r"[^A-Za-z0-9_=-]+")  # no dots: writers add suffixes
_PADDED = re.compile(r"\d+")
#: Characters of the label kept in a part name (its end: where file names differ).
MAX_NAME = 120


class RunKeys:
    """The keys of a run's tasks, for one configuration."""

    def __init__(self, pipeline: PipelineModel, imports: list[str]) -> None:
        self.imports = imports_digest(imports)
        # run options that decide what a task writes (not where or how fast it runs)
        self.options = {"on_error": pipeline.on_error, "rejected": pipeline.rejected,
                        "part_bytes": pipeline.part_bytes,
                        "intermediate_compression": pipeline.intermediate_compression}
        self._own: dict[str, StageKeys] = {}

    def stage(self, name: str, stage: Stage) -> StageKeys:
        if name not in self._own:
            params = stage.shard_params() if isinstance(stage, Source) else stage.decisive()
            scores = (stage_key(stage, stage.score_params(), self.imports)
                      if isinstance(stage, Filter) and stage.signals_apart else None)
            self._own[name] = StageKeys(stage_key(stage, params, self.imports), scores)
        return self._own[name]

    def input(self, shard: Shard) -> Key:
        """What a shard task reads: a run's own file by its content, an input by its name,
        size and mtime (and the label that document ids are made from)."""
        if shard.digest:
            return digest({"content": shard.digest, "run": self.options})
        return digest({"file": file_identity(shard.path, shard.size), "label": shard.label,
                       "source": shard.source, "run": self.options})

    def shard(self, stages: list[tuple[str, Any]], shard: Shard) -> ShardKeys:
        marks = [i for i, (_, s) in enumerate(stages[:-1])
                 if isinstance(s, BatchStage) and s.checkpoint]
        return shard_keys(self.input(shard), [self.stage(n, s) for n, s in stages],
                          marks[-1] if marks else None)

    def barrier(self, name: str, stage: Stage, parts: list[Shard]) -> Key:
        """A dataset stage's key: the stage, then every part it reads by content."""
        return digest([self.stage(name, stage).own, self.options,
                       [[p.part, p.digest] for p in parts]])
