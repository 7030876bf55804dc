"""What a shard task takes from its shard's previous manifest instead of computing it: the
checkpoint (the rows after extraction), a filter's scores, a writer's files. Each is taken
only when its key is the one this configuration computes and its files are as recorded.
Rationale: docs/reuse.md."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from curator.batch import ID
from curator.commit import damage
from curator.io.parquet import ParquetPartWriter
from curator.stages.base import Filter, Sink
from curator.store.keys import ShardKeys
from curator.store.records import ShardManifest
from curator.store.run_dir import RunDir

CHECKPOINT_COMPRESSION = "zstd"
SCORES_COMPRESSION = "zstd"
ROW_GROUP = 10_000


@dataclass
class Reuse:
    """A shard task's plan: what it reads instead of computing, what it carries over."""

    checkpoint: Path | None = None  # rows to read instead of the stages up to the checkpoint
    through: int = -1  # index of the last stage the checkpoint stands for
    counts: dict[str, dict[str, Any]] = field(default_factory=dict)  # of stages not run
    carried: list[dict[str, Any]] = field(default_factory=list)  # file records kept as they are
    sinks: dict[str, dict[str, Any]] = field(default_factory=dict)  # skipped writers' facts
    skipped: set[str] = field(default_factory=set)  # writers whose files are kept
    replays: dict[str, Path] = field(default_factory=dict)  # filter -> the scores it decides on

    def summary(self) -> dict[str, Any]:
        """What was reused, for the manifest and the run's stats."""
        out: dict[str, Any] = {}
        if self.checkpoint is not None:
            out["checkpoint"] = True
        if self.replays:
            out["scores"] = sorted(self.replays)
        if self.skipped:
            out["writers"] = sorted(self.skipped)
        return out


def _intact(run_dir: RunDir, files: dict[str, dict], path: Path) -> dict | None:
    """The record of ``path`` when the previous manifest has it and the file is as recorded."""
    record = files.get(run_dir.recorded(path))
    if record is None or damage(path, record) is not None:
        return None
    return record


def plan_reuse(run_dir: RunDir, segment: int, part: str, stages: list[tuple[str, Any]],
               keys: ShardKeys, previous: ShardManifest | None) -> Reuse:
    """What the task for ``part`` can take from ``previous`` (its shard's last manifest)."""
    reuse = Reuse()
    if previous is None:
        return reuse
    files = {f["path"]: f for f in previous.files}
    old_keys = previous.keys
    counts = previous.counts()
    names = [name for name, _ in stages]

    def same(i: int) -> bool:
        return old_keys.get(names[i]) == keys.stages[i] and names[i] in counts

    def own_files(name: str) -> list[dict]:
        return [r for p in (run_dir.rejected_path(name, part), run_dir.errors_path(name, part),
                            run_dir.rewrites_path(name, part))
                if (r := files.get(run_dir.recorded(p))) is not None]

    c = keys.checkpoint
    if c is not None and previous.checkpoint == keys.stages[c] and all(
            same(i) for i in range(c + 1)):
        path = run_dir.checkpoint_path(segment, part)
        record = _intact(run_dir, files, path)
        carried = [r for i in range(c + 1) for r in own_files(names[i])]
        if record is not None and all(damage(run_dir.root / r["path"], r) is None
                                      for r in carried):
            reuse.checkpoint, reuse.through = path, c
            reuse.carried += [record, *carried]
            reuse.counts.update({names[i]: counts[names[i]] for i in range(c + 1)})
    old_scores = previous.scores
    for i, (name, stage) in enumerate(stages):
        if i <= reuse.through:
            continue
        if isinstance(stage, Filter) and keys.scores[i] is not None \
                and old_scores.get(name) == keys.scores[i] \
                and counts.get(name, {}).get("failed", 1) == 0:
            path = run_dir.scores_path(name, part)
            if (record := _intact(run_dir, files, path)) is not None:
                reuse.replays[name] = path
                reuse.carried.append(record)
        if isinstance(stage, Sink) and same(i) and counts[name].get("failed", 1) == 0:
            out = stage.output_dir(run_dir.root, name)
            records = [f for f in files.values() if run_dir.path_of(f["path"]).is_relative_to(out)]
            if all(damage(run_dir.path_of(r["path"]), r) is None for r in records):
                reuse.skipped.add(name)
                reuse.carried += records
                reuse.counts[name] = counts[name]
                if name in previous.sinks:
                    reuse.sinks[name] = previous.sinks[name]
    return reuse


class ScoreReplay:
    """A filter's kept scores, handed out batch by batch in the order they were written."""

    def __init__(self, path: Path) -> None:
        self._batches = pq.ParquetFile(path).iter_batches(ROW_GROUP)
        self._buffer: pa.Table | None = None

    def take(self, ids: pa.ChunkedArray | pa.Array) -> dict[str, pa.Array] | None:
        """The next ``len(ids)`` rows' scores, or None when they are not these documents'."""
        n = len(ids)
        while self._buffer is None or self._buffer.num_rows < n:
            try:
                batch = next(self._batches)
            except StopIteration:
                return None
            table = pa.Table.from_batches([batch])
            self._buffer = table if self._buffer is None else pa.concat_tables(
                [self._buffer, table])
        taken, self._buffer = self._buffer.slice(0, n), self._buffer.slice(n)
        if not taken.column(ID).equals(pa.chunked_array([ids]) if isinstance(ids, pa.Array)
                                       else ids):
            return None
        return {name: taken.column(name).combine_chunks() for name in taken.column_names
                if name != ID}


class ScoreRecorder:
    """Writes a filter's scores with the ids they belong to; dropped (never committed) when a
    batch's scores do not cover every row (a failed document: the next run computes them)."""

    def __init__(self, temporary: Path) -> None:
        self.path = temporary
        self._writer: ParquetPartWriter | None = None
        self.whole = True

    def add(self, ids: pa.ChunkedArray | pa.Array, signals: dict[str, pa.Array]) -> None:
        if not self.whole:
            return
        if not signals or any(len(v) != len(ids) for v in signals.values()):
            self.whole = False
            return
        table = pa.table({ID: ids, **signals})
        if self._writer is None:
            self._writer = ParquetPartWriter(self.path, ROW_GROUP, SCORES_COMPRESSION)
        if self._writer.write(table):
            self.whole = False

    def close(self) -> bool:
        """Finish the file; whether it holds every row's scores."""
        if self._writer is not None:
            self._writer.close()
        return self.whole and self._writer is not None

