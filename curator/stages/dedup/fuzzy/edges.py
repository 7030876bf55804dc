"""Phase 2, per bucket: candidate links of documents sharing a band (stars), optionally
verified by signature similarity."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from curator.commit import Commit
from curator.stages.context import PhaseResult
from curator.stages.dedup.buckets import write_split
from curator.stages.dedup.fuzzy.common import (
    EDGE_SCHEMA,
    ROW_BITS,
    ROW_MASK,
    node_partition,
    use_gpu,
)
from curator.stages.dedup.fuzzy.signatures import bucket_rows, signatures_path


@dataclass(frozen=True)
class EdgeTask:
    bucket: int
    work: str
    parts: tuple[str, ...]  # the parts' names, in the run's order
    partitions: int
    verify: bool
    threshold: float
    device: str


def gather_signatures(work: str, keys: np.ndarray, parts: tuple[str, ...]) -> np.ndarray:
    """Signature rows of ``keys`` read from the parts' memory-mapped ``.npy`` files."""
    part = keys >> np.int64(ROW_BITS)
    row = keys & ROW_MASK
    out: np.ndarray | None = None
    for p in np.unique(part):
        sigs = np.load(signatures_path(work, parts[int(p)]), mmap_mode="r")
        if out is None:
            out = np.empty((len(keys), sigs.shape[1]), np.uint32)
        sel = np.flatnonzero(part == p)
        rows = row[sel]
        order = np.argsort(rows, kind="stable")
        out[sel[order]] = sigs[rows[order]]
    return out if out is not None else np.empty((0, 0), np.uint32)


def route_edges(lo: np.ndarray, hi: np.ndarray, partitions: int) -> tuple[pa.Table, np.ndarray]:
    """Each edge to the node partitions of both its ends (once when they share one)."""
    p_lo, p_hi = node_partition(lo, partitions), node_partition(hi, partitions)
    second = p_lo != p_hi
    table = pa.table({"lo": np.concatenate([lo, lo[second]]),
                      "hi": np.concatenate([hi, hi[second]])}, schema=EDGE_SCHEMA)
    return table, np.concatenate([p_hi, p_lo[second]])


@dataclass(frozen=True)
class EdgeResult(PhaseResult):
    candidates: int
    edges: int  # the candidates kept (verified)


def edges_bucket(task: EdgeTask) -> EdgeResult:
    from curator.kernels.lsh import bucket_stars, signature_similarity, unique_edges

    folder = Path(task.work)
    table = bucket_rows(task.work, task.parts, task.bucket, task.partitions)
    empty = np.empty(0, np.int64)
    src, dst = empty, empty
    if table is not None:
        columns = [table.column(c).to_numpy() for c in ("key", "band", "hash")]
        if use_gpu(task.device):  # the sorts on the device, the same edges
            import cupy

            src, dst = unique_edges(*bucket_stars(*map(cupy.asarray, columns)))
            src, dst = src.get(), dst.get()
        else:
            src, dst = unique_edges(*bucket_stars(*columns))  # several bands, one pair
    candidates = len(src)
    if task.verify and len(src):
        sim = signature_similarity(gather_signatures(task.work, np.concatenate([src, dst]),
                                                     task.parts),
                                   np.arange(len(src)), np.arange(len(src), 2 * len(src)))
        keep = sim >= task.threshold
        src, dst = src[keep], dst[keep]
    routed, target = route_edges(dst, src, task.partitions)
    out = folder / "cc" / "r000" / f"from-{task.bucket:05d}"
    pending = Commit()
    write_split(routed, target, task.partitions, lambda q: out / f"to-{q:05d}.arrow", pending)
    pending.publish()
    return EdgeResult(candidates, len(src))
