"""Phases 3 and 4, per node partition: connected components by rounds of local union-find,
then labels; or phases 2-6 (3-6) in one task."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import xxhash

from curator.batch import ID
from curator.commit import Commit
from curator.io.parquet import read_part
from curator.stages.context import PhaseResult
from curator.stages.dedup.buckets import write_split
from curator.stages.dedup.fuzzy.clusters import ClusterResult, decide_clusters
from curator.stages.dedup.fuzzy.common import (
    READ_THREADS,
    ROW_BITS,
    ROW_MASK,
    node_partition,
    read_all,
    use_gpu,
)
from curator.stages.dedup.fuzzy.edges import EdgeResult, route_edges
from curator.stages.dedup.fuzzy.signatures import keyed_rows, split_band_rows


@dataclass(frozen=True)
class RoundTask:
    partition: int
    round: int
    work: str
    partitions: int
    device: str


def round_input(work: str, rnd: int, partition: int, partitions: int) -> tuple[np.ndarray,
                                                                                 np.ndarray]:
    """The distinct edges ``(lo, hi)`` touching this partition's nodes, sorted."""
    from curator.kernels.lsh import unique_edges

    folder = Path(work) / "cc" / f"r{rnd:03d}"
    table = read_all([folder / f"from-{p:05d}" / f"to-{partition:05d}.arrow"
                       for p in range(partitions)])
    if table is None:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    hi, lo = unique_edges(table.column("hi").to_numpy(), table.column("lo").to_numpy())
    return lo, hi


@dataclass(frozen=True)
class RoundResult(PhaseResult):
    digest: str  # of the round's input edges: equal in two rounds at the fixed point
    edges_in: int


def cc_round(task: RoundTask) -> RoundResult:
    from curator.kernels.components import connected_components

    lo, hi = round_input(task.work, task.round, task.partition, task.partitions)
    digest = xxhash.xxh3_128()
    digest.update(lo.tobytes())
    digest.update(hi.tobytes())
    new_lo, new_hi = lo, hi
    if len(lo):
        xp = np
        if use_gpu(task.device):  # the sort and the union-find on the device
            import cupy as xp
        nodes, inverse = xp.unique(xp.concatenate([xp.asarray(lo), xp.asarray(hi)]),
                                   return_inverse=True)
        inverse = inverse.reshape(-1)
        labels = connected_components(len(nodes), inverse[: len(lo)], inverse[len(lo):])
        moved = labels != xp.arange(len(nodes))
        new_lo, new_hi = nodes[labels[moved]], nodes[moved]
        if xp is not np:
            new_lo, new_hi = new_lo.get(), new_hi.get()
    routed, target = route_edges(new_lo, new_hi, task.partitions)
    out = Path(task.work) / "cc" / f"r{task.round + 1:03d}" / f"from-{task.partition:05d}"
    pending = Commit()
    write_split(routed, target, task.partitions, lambda q: out / f"to-{q:05d}.arrow", pending)
    pending.publish()
    return RoundResult(digest.hexdigest(), len(lo))


@dataclass(frozen=True)
class LabelTask:
    partition: int
    round: int
    work: str
    partitions: int
    parts: int


@dataclass(frozen=True)
class LabelResult(PhaseResult):
    nodes: int
    centres: int


def labels_partition(task: LabelTask) -> LabelResult:
    lo, hi = round_input(task.work, task.round, task.partition, task.partitions)
    nodes = np.unique(np.concatenate([lo, hi]))
    nodes = nodes[node_partition(nodes, task.partitions) == task.partition]
    label = nodes.copy()
    # A star forest: a node that is some edge's ``hi`` has exactly one neighbour, its centre.
    pos = np.searchsorted(nodes, hi)
    own = (pos < len(nodes)) & (nodes[np.minimum(pos, max(len(nodes) - 1, 0))] == hi) \
        if len(nodes) else np.zeros(len(hi), bool)
    np.minimum.at(label, pos[own], lo[own])
    part = (nodes >> np.int64(ROW_BITS)).astype(np.int64)
    table = pa.table({"row": nodes & ROW_MASK, "label": label})
    out = Path(task.work) / "labels" / f"node-{task.partition:05d}"
    pending = Commit()
    write_split(table, part, task.parts, lambda n: out / f"part-{n:05d}.arrow", pending)
    pending.publish()
    return LabelResult(len(nodes), int((label == nodes).sum()))


@dataclass(frozen=True)
class GraphTask:
    work: str
    partitions: int
    docs: tuple[int, ...]  # documents of each part: keys map densely onto 0..sum(docs)-1
    paths: tuple[str, ...]  # the parts, for the ids of linked documents
    device: str = "cpu"


def dense(keys: Any, offsets: Any) -> Any:
    """Document keys ``part << 32 | row`` as dense numbers ``offsets[part] + row`` (ordered as
    the keys are)."""
    return offsets[keys >> np.int64(ROW_BITS)] + (keys & ROW_MASK)


@dataclass(frozen=True)
class ComponentsResult(ClusterResult):
    """The clusters of a graph solved in one task, and its linked documents."""

    nodes: int


@dataclass(frozen=True)
class GraphResult(ComponentsResult, EdgeResult):
    """The edges and the clusters of the graph phase."""


def components_whole(task: GraphTask) -> ComponentsResult:
    """Every candidate edge of the edges phase in one union-find over dense document numbers
    (no sort); then the clusters (:func:`clusters_whole`)."""
    from curator.kernels.components import connected_components

    folder = Path(task.work) / "cc" / "r000"
    table = read_all([folder / f"from-{b:05d}" / f"to-{p:05d}.arrow"
                       for b in range(task.partitions) for p in range(task.partitions)])
    offsets = part_offsets(task.docs)
    linked = np.zeros(int(offsets[-1]), bool)
    label = np.empty(0, np.int64)
    if table is not None:
        lo, hi = (dense(table.column(c).to_numpy(), offsets) for c in ("lo", "hi"))
        label = connected_components(len(linked), lo, hi)
        linked[lo] = linked[hi] = True
    return clusters_whole(task, offsets, label, linked)


def graph_whole(task: GraphTask) -> GraphResult:
    """The edges phase and the components in one task (on the GPU where ``device`` says): each
    part's band rows read once and cut into buckets, each bucket's rows gathered (ahead, by a
    thread pool) and linked into stars as the edges phase links them (the same count: an edge
    is counted once per bucket), then one union-find."""
    from curator.kernels.components import connected_components
    from curator.kernels.lsh import bucket_stars, unique_edges

    xp = np
    if use_gpu(task.device):
        import cupy as xp
    split = split_band_rows(task.work, tuple(Path(path).stem for path in task.paths),
                            task.partitions)

    def bucket(b: int) -> list[np.ndarray] | None:  # contiguous columns, made on a pool thread
        table = keyed_rows([pieces[b] for pieces in split])
        return None if table is None else [table.column(c).to_numpy()
                                           for c in ("key", "band", "hash")]

    offsets = part_offsets(task.docs)
    dense_offsets = xp.asarray(offsets)
    ends: list[tuple[Any, Any]] = []
    with ThreadPoolExecutor(READ_THREADS) as pool:
        for columns in pool.map(bucket, range(task.partitions)):
            if columns is not None:
                src, dst = unique_edges(*bucket_stars(*(xp.asarray(c) for c in columns)))
                ends.append((dense(src, dense_offsets), dense(dst, dense_offsets)))
    linked = xp.zeros(int(offsets[-1]), bool)
    label = xp.empty(0, xp.int64)
    if ends:
        lo, hi = (xp.concatenate(side) for side in zip(*ends, strict=True))
        label = connected_components(len(linked), lo, hi)
        linked[lo] = True
        linked[hi] = True
    if xp is not np:
        label, linked = label.get(), linked.get()
    edges = sum(len(src) for src, _ in ends)
    return GraphResult(**clusters_whole(task, offsets, label, linked).to_record(),
                       candidates=edges, edges=edges)


def part_offsets(docs: tuple[int, ...]) -> np.ndarray:
    offsets = np.zeros(len(docs) + 1, np.int64)
    np.cumsum(docs, out=offsets[1:])
    return offsets


def clusters_whole(task: GraphTask, offsets: np.ndarray, label: np.ndarray,
                    linked: np.ndarray) -> ComponentsResult:
    """The members and clusters phases for a graph solved in one task: each linked document's
    label (its component's smallest key) and id (read from its part) → the clusters, in the
    one bucket ``clusters/bucket-00000`` that the removal then reads."""
    linked_rows = {part: rows for part in range(len(task.paths))
                   if len(rows := np.flatnonzero(linked[offsets[part]:offsets[part + 1]]))}

    def member_rows(part: int) -> pa.Table:
        rows = linked_rows[part]
        own = label[offsets[part] + rows]
        owner = np.searchsorted(offsets, own, side="right") - 1
        ids = read_part(task.paths[part], [ID]).column(ID).cast(pa.string()).take(pa.array(rows))
        return pa.table({
            "label": (owner << np.int64(ROW_BITS)) | (own - offsets[owner]),
            "part": np.full(len(rows), part, np.int32), "row": rows.astype(np.int64), ID: ids})

    with ThreadPoolExecutor(READ_THREADS) as pool:  # the ids of every part: reads in parallel
        members = list(pool.map(member_rows, sorted(linked_rows)))
    table = pa.concat_tables(members) if members else None
    clusters = decide_clusters(table, len(task.paths),
                               Path(task.work) / "clusters" / "bucket-00000")
    return ComponentsResult(**clusters.to_record(), nodes=int(linked.sum()))
