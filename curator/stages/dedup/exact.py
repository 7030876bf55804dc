"""Exact dedup: hash normalised text, shuffle by hash into buckets, keep one per group.

Phases (each restartable, none collects the dataset in one process):
  1. ``hash``   per part:   (h1, h2, id, score, part, row) → ``hash/<part>/bucket-B.parquet``;
                            XXH3-128 in bulk over the Arrow buffers (``kernels.doc_hash``); where
                            ``device`` resolves to gpu, on a GPU worker, the text normalised
                            (``normalise_gpu``) and hashed (``doc_hash_gpu``) on the device
                            (read by Arrow and copied over: cuDF's read of the text made this
                            phase slower, docs/dedup-scale.md)
  2. ``group``  per bucket: sort by (hash, rank); first of each group survives →
                            ``decisions/bucket-B.parquet`` (part, row, id, duplicate_of)
  3. ``remove`` per part:   the runtime's removal phase drops the rows the decisions name
                            (``rejected/<stage>/``, reason ``exact_duplicate``, ``duplicate_of``)

The group and removal phases (``hash_dir``, ``group_bucket``, ``Duplicates``) serve any per-part
hash phase that writes (h1, h2, id, row[, score]): ``url_dedup`` hashes normalised URLs.
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
from pydantic import Field, model_validator

from curator.batch import ID, TEXT
from curator.commit import Commit
from curator.io.parquet import read_part
from curator.io.shuffle import ShuffleDir
from curator.stages.base import DatasetResult, DatasetStage
from curator.stages.context import DatasetContext, Decisions, PhaseResult
from curator.stages.dedup.buckets import default_buckets
from curator.stages.dedup.cluster_sizes import size_counts, sum_size_counts

REASON_EXACT = "exact_duplicate"


def normalise_text(text: pa.ChunkedArray | pa.Array) -> pa.Array:
    r"""Lower case (Unicode), runs of ``[\t\n\f\r ]`` collapsed to one space (what the regex
    ``\s+`` of Arrow's RE2 matches, by a numba kernel), ends trimmed of Unicode whitespace."""
    from curator.kernels.whitespace import collapse_whitespace

    return pc.utf8_trim_whitespace(collapse_whitespace(pc.utf8_lower(text)))


def text_hashes(text: pa.Array, algorithm: str) -> tuple[np.ndarray, np.ndarray]:
    """128-bit hash of each text as two uint64 arrays (xxh3-128 or md5), one document at a time
    in Python (``document_hashes`` computes xxh3-128 in bulk)."""
    blobs = text.cast(pa.large_binary()).to_pylist()
    if algorithm == "md5":
        digests = b"".join(hashlib.md5(b, usedforsecurity=False).digest() for b in blobs)
    else:
        digests = b"".join(xxhash.xxh3_128_digest(b) for b in blobs)
    pairs = np.frombuffer(digests, dtype=">u8").reshape(-1, 2).astype(np.uint64)
    return pairs[:, 0].copy(), pairs[:, 1].copy()


def document_hashes(text: pa.Array | pa.ChunkedArray, algorithm: str, device: str,
                    normalise: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(high, low) 64-bit halves of each document's digest (of ``normalise_text(text)`` with
    ``normalise``): ``xxh3_128`` by the bulk kernel on the CPU or the GPU (the same bits; the
    GPU normalises on the device too), ``xxh3_128_loop`` and ``md5`` by ``text_hashes``."""
    if device == "gpu" and algorithm == "xxh3_128":
        from curator.kernels.doc_hash_gpu import doc_hashes_gpu
        from curator.kernels.minhash_gpu import gpu_available

        if not gpu_available():
            raise RuntimeError("exact_dedup: device 'gpu' but CuPy sees no GPU")
        hashes = doc_hashes_gpu(text, normalise)
        if hashes is None:  # a document is not UTF-8: Arrow normalises (or refuses) on the CPU
            hashes = doc_hashes_gpu(normalise_text(text))
        return hashes
    if normalise:
        text = normalise_text(text)
    if algorithm != "xxh3_128":
        return text_hashes(text, algorithm.removesuffix("_loop"))
    from curator.kernels.doc_hash import doc_hashes

    return doc_hashes(text)


@dataclass(frozen=True)
class _HashTask:
    part: str  # its name: the hashes of a part are kept under it (reused while it is unchanged)
    path: str
    work: str
    normalise: bool
    algorithm: str
    score_field: str | None
    device: str


@dataclass(frozen=True)
class _HashResult(PhaseResult):
    rows: int


def _hash_part(task: _HashTask) -> _HashResult:
    wanted = [TEXT, ID, *([task.score_field] if task.score_field else [])]
    table = read_part(task.path, list(dict.fromkeys(wanted)))
    text = table.column(TEXT).combine_chunks()
    h1, h2 = document_hashes(text, task.algorithm, task.device, task.normalise)
    columns = {"h1": h1, "h2": h2, ID: table.column(ID),
               "row": np.arange(len(h1), dtype=np.int64)}
    if task.score_field:
        columns["score"] = table.column(task.score_field).cast(pa.float64())
    pending = Commit()
    hash_dir(task.work).write(task.part, pa.table(columns), pending)
    pending.publish()
    return _HashResult(len(h1))


def hash_dir(work: str) -> ShuffleDir:
    """Each part's document hashes, sorted by ``h1``: bucket ``b`` is a range of ``h1``."""
    return ShuffleDir(Path(work) / "hash", "h1")


@dataclass(frozen=True)
class GroupTask:
    bucket: int
    buckets: int
    work: str
    parts: tuple[str, ...]  # in the run's order: a part's number is its place here
    use_score: bool


@dataclass(frozen=True)
class GroupResult(PhaseResult):
    groups: int
    duplicates: int
    sizes: dict[str, int]  # clusters per size (``size_counts``)


def group_bucket(task: GroupTask) -> GroupResult:
    hashes = hash_dir(task.work)
    tables = [hashes.read(name, task.bucket, task.buckets) for name in task.parts]
    table = pa.concat_tables([t.append_column("part", pa.array(np.full(len(t), p, np.int32)))
                              for p, t in enumerate(tables)])
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
    pending = Commit()
    final = Path(task.work) / "decisions" / f"bucket-{task.bucket:05d}.parquet"
    pq.write_table(decisions.sort_by([("part", "ascending"), ("row", "ascending")]),
                   pending.temporary_for(final))
    pending.publish()
    return GroupResult(int(first.sum()), len(duplicates), size_counts(first))


@dataclass(frozen=True)
class Duplicates:
    """Decisions of one part: the rows the group phase found to be duplicates, removed with
    ``reason``."""

    work: str
    reason: str

    def __call__(self, part: int, table: pa.Table) -> Decisions:
        decisions = ds.dataset(str(Path(self.work) / "decisions"), format="parquet") \
            .to_table(filter=ds.field("part") == part, columns=["row", "duplicate_of"]) \
            .sort_by("row")
        drop = np.zeros(table.num_rows, dtype=bool)
        drop[decisions.column("row").to_numpy()] = True
        return Decisions(drop, self.reason,
                         removed_columns={"duplicate_of": decisions.column("duplicate_of")})


class ExactDedup(DatasetStage):
    """Remove documents whose normalised text is identical to another's; keep the one with the
    lowest id (or the highest ``score_field``). Removed documents name their survivor."""

    type = "exact_dedup"
    # Arrow's reads and lower case, the numba kernels and the writes release the GIL (the
    # per-document ``xxh3_128_loop`` and ``md5`` hold it: threads take turns there, still right).
    holds_gil: ClassVar[bool] = False
    placement: ClassVar[frozenset[str]] = frozenset({"device"})  # GPU == CPU, bit for bit

    algorithm: Literal["xxh3_128", "xxh3_128_loop", "md5"] = Field(
        "xxh3_128", description="xxh3_128: XXH3-128 over the Arrow buffers in bulk (CPU or GPU); "
        "xxh3_128_loop: the same digest one document at a time (xxhash package); md5.")
    normalise: bool = Field(True, description="Lower-case and collapse whitespace first.")
    score_field: str | None = Field(None, description="Keep the highest score, not lowest id.")
    buckets: int | None = Field(None, gt=0, description="Shuffle buckets; default: 16 to one per "
                                "256 MB of parts, at most one per part.")
    device: Literal["cpu", "gpu", "auto"] = Field(
        "auto", description="Where the hash phase runs. auto: cpu (the phase is bound by "
        "reading and memory, not hashing: on one H100 with 16 cores the GPU path was 0.2-0.8x "
        "the CPU's, docs/benchmarks.md); gpu: the CUDA twin, the same digests.")

    @model_validator(mode="after")
    def _gpu_needs_bulk_hash(self) -> ExactDedup:
        if self.device == "gpu" and self.algorithm != "xxh3_128":
            raise ValueError(f"device 'gpu' hashes with xxh3_128 only, not {self.algorithm!r}")
        return self

    def warm_up(self) -> None:
        """The hash phase's kernels compiled or loaded before its first tasks (numba's, whose
        compiler lock the first tasks would otherwise queue on, or the GPU's)."""
        text = pa.array(["Warm  up the Kernels", ""])
        document_hashes(text, self.algorithm, self.device, self.normalise)

    def resources(self) -> dict[str, float]:
        return {"GPU": 1} if self.device == "gpu" else {}

    def for_cluster(self, gpus: bool) -> ExactDedup:
        return self if self.device != "auto" else self.model_copy(update={"device": "cpu"})

    def run_dataset(self, parts: list[Path], ctx: DatasetContext) -> DatasetResult:
        started = time.perf_counter()
        if self.score_field and parts:
            columns = pq.read_schema(parts[0]).names  # the parts share one schema
            if self.score_field not in columns:
                raise ValueError(f"{ctx.stage_name}: score_field {self.score_field!r} is not a "
                                 f"column of the dataset (columns: {', '.join(columns)})")
        work = str(ctx.work_dir)
        buckets = self.buckets or default_buckets(parts)
        names = [p.stem for p in parts]
        ctx.run_phase("hash", _hash_part, [
            _HashTask(name, str(p), work, self.normalise, self.algorithm, self.score_field,
                      self.device) for name, p in zip(names, parts, strict=True)], names,
            _HashResult, self.resources(), reads=parts)
        groups = ctx.run_phase("group", group_bucket, [
            GroupTask(b, buckets, work, tuple(names), self.score_field is not None)
            for b in range(buckets)], [f"bucket-{b:05d}" for b in range(buckets)], GroupResult)
        outputs, count = ctx.remove(parts, Duplicates(work, REASON_EXACT))
        count.seconds = time.perf_counter() - started
        count.facts["dedup"] = {"algorithm": self.algorithm, "device": self.device,
                                "cluster_sizes": sum_size_counts(g.sizes for g in groups)}
        return DatasetResult(outputs, count)
