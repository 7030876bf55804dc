"""Exact dedup: hash normalised text, shuffle by hash into buckets, keep one per group.

Phases (each restartable, none collects the dataset in one process):
  1. ``hash``   per part:   (h1, h2, id, score, part, row) → ``hash/<part>/bucket-B.parquet``
  2. ``group``  per bucket: sort by (hash, rank); first of each group survives →
                            ``decisions/bucket-B.parquet`` (part, row, id, duplicate_of)
  3. ``remove`` per part:   the runtime's removal phase drops the rows the decisions name
                            (``rejected/<stage>/``, reason ``exact_duplicate``, ``duplicate_of``)
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import xxhash
from pydantic import Field

from curator.batch import ID, TEXT
from curator.commit import commit_files, temporary_for
from curator.stages.base import DatasetResult, DatasetStage
from curator.stages.context import DatasetContext, Decisions
from curator.stages.dedup.buckets import write_split

REASON_EXACT = "exact_duplicate"


def normalise_text(text: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Lower case, whitespace runs collapsed to one space, ends trimmed (Unicode-aware)."""
    lowered = pc.utf8_lower(text)
    collapsed = pc.replace_substring_regex(lowered, r"\s+", " ")
    return pc.utf8_trim_whitespace(collapsed)


def text_hashes(text: pa.Array, algorithm: str) -> tuple[np.ndarray, np.ndarray]:
    """128-bit hash of each text as two uint64 arrays (xxh3-128 or md5)."""
    blobs = text.cast(pa.large_binary()).to_pylist()
    if algorithm == "md5":
        digests = b"".join(hashlib.md5(b, usedforsecurity=False).digest() for b in blobs)
    else:
        digests = b"".join(xxhash.xxh3_128_digest(b) for b in blobs)
    pairs = np.frombuffer(digests, dtype=">u8").reshape(-1, 2).astype(np.uint64)
    return pairs[:, 0].copy(), pairs[:, 1].copy()


@dataclass(frozen=True)
class _HashTask:
    part: int
    path: str
    work: str
    buckets: int
    normalise: bool
    algorithm: str
    score_field: str | None


def _hash_part(task: _HashTask) -> dict:
    table = pq.read_table(task.path)
    text = table.column(TEXT).combine_chunks()
    h1, h2 = text_hashes(normalise_text(text) if task.normalise else text, task.algorithm)
    columns = {"h1": h1, "h2": h2, ID: table.column(ID),
               "part": np.full(len(h1), task.part, np.int32),
               "row": np.arange(len(h1), dtype=np.int64)}
    if task.score_field:
        columns["score"] = table.column(task.score_field).cast(pa.float64())
    hashed = pa.table(columns)
    bucket = (h1 % np.uint64(task.buckets)).astype(np.int64)
    folder = Path(task.work) / "hash" / f"part-{task.part:05d}"
    pending: list[tuple[Path, Path]] = []
    write_split(hashed, bucket, task.buckets, lambda b: folder / f"bucket-{b:05d}.parquet",
                pending, "parquet")
    commit_files(pending)
    return {"rows": len(h1)}


@dataclass(frozen=True)
class _GroupTask:
    bucket: int
    work: str
    parts: int
    use_score: bool


def _group_bucket(task: _GroupTask) -> dict:
    files = [Path(task.work) / "hash" / f"part-{p:05d}" / f"bucket-{task.bucket:05d}.parquet"
             for p in range(task.parts)]
    table = pa.concat_tables([pq.read_table(f) for f in files])
    order = [("h1", "ascending"), ("h2", "ascending")]
    if task.use_score:
        order.append(("score", "descending"))
    table = table.sort_by([*order, (ID, "ascending")])
    h1, h2 = table.column("h1").to_numpy(), table.column("h2").to_numpy()
    first = np.ones(len(h1), dtype=bool)
    first[1:] = (h1[1:] != h1[:-1]) | (h2[1:] != h2[:-1])
    survivor = np.maximum.accumulate(np.where(first, np.arange(len(h1)), 0))
    duplicates = np.flatnonzero(~first)
    decisions = pa.table({
        "part": table.column("part").take(duplicates), "row": table.column("row").take(duplicates),
        ID: table.column(ID).take(duplicates),
        "duplicate_of": table.column(ID).take(survivor[duplicates])})
    pending: list[tuple[Path, Path]] = []
    final = Path(task.work) / "decisions" / f"bucket-{task.bucket:05d}.parquet"
    pq.write_table(decisions.sort_by([("part", "ascending"), ("row", "ascending")]),
                   temporary_for(final, pending))
    commit_files(pending)
    return {"groups": int(first.sum()), "duplicates": len(duplicates)}


@dataclass(frozen=True)
class _Duplicates:
    """Decisions of one part: the rows the group phase found to be duplicates."""

    work: str

    def __call__(self, part: int, table: pa.Table) -> Decisions:
        decisions = ds.dataset(str(Path(self.work) / "decisions"), format="parquet") \
            .to_table(filter=ds.field("part") == part, columns=["row", "duplicate_of"]) \
            .sort_by("row")
        drop = np.zeros(table.num_rows, dtype=bool)
        drop[decisions.column("row").to_numpy()] = True
        return Decisions(drop, REASON_EXACT,
                         removed_columns={"duplicate_of": decisions.column("duplicate_of")})


class ExactDedup(DatasetStage):
    """Remove documents whose normalised text is identical to another's; keep the one with the
    lowest id (or the highest ``score_field``). Removed documents name their survivor."""

    type = "exact_dedup"
    holds_gil: ClassVar[bool] = True

    algorithm: Literal["xxh3_128", "md5"] = "xxh3_128"
    normalise: bool = Field(True, description="Lower-case and collapse whitespace first.")
    score_field: str | None = Field(None, description="Keep the highest score, not lowest id.")
    buckets: int | None = Field(None, gt=0, description="Shuffle buckets; default: one per part.")

    def run_dataset(self, parts: list[Path], ctx: DatasetContext) -> DatasetResult:
        started = time.perf_counter()
        if self.score_field and parts:
            columns = pq.read_schema(parts[0]).names  # the parts share one schema
            if self.score_field not in columns:
                raise ValueError(f"{ctx.stage_name}: score_field {self.score_field!r} is not a "
                                 f"column of the dataset (columns: {', '.join(columns)})")
        work = str(ctx.work_dir)
        buckets = self.buckets or max(1, len(parts))
        keys = [f"part-{i:05d}" for i in range(len(parts))]
        ctx.run_phase("hash", _hash_part, [
            _HashTask(i, str(p), work, buckets, self.normalise, self.algorithm, self.score_field)
            for i, p in enumerate(parts)], keys)
        ctx.run_phase("group", _group_bucket, [
            _GroupTask(b, work, len(parts), self.score_field is not None)
            for b in range(buckets)], [f"bucket-{b:05d}" for b in range(buckets)])
        outputs, count = ctx.remove(parts, _Duplicates(work))
        count.seconds = time.perf_counter() - started
        return DatasetResult(outputs, count)
