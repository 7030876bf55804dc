"""Fuzzy dedup: MinHash-LSH candidates, distributed connected components, lowest id survives.

A document is named by a key ``part << 32 | row`` (int64) while the graph is built; ids are
joined back only once, to pick each component's survivor. Phases (each a ``run_phase`` over
tasks that commit their own files, so a restart redoes only the tasks that were cut):

  1. ``signatures`` per part:  MinHash (CPU numba or GPU CuPy) → band hashes, one row per
     (document, band) → ``bands/part-N/bucket-B.arrow``, bucketed by band hash.
  2. ``edges`` per bucket:  group by (band, hash) (sorted on the GPU where ``device`` is gpu);
     link each member to the bucket's smallest key (a star, no all-pairs); optional
     signature-Jaccard check of each link → undirected edges ``(lo, hi)`` sent to the node
     partitions of both ends: ``cc/r000/from-B/to-P``.
  3. ``cc-rNNN`` per node partition, iterated (on the GPU past ``GPU_GRAPH_EDGES``): a
     partition holds every edge touching its own nodes; a union-find over them gives each
     node the smallest node of its local component and re-emits the local stars
     ``(min, node)``. Connectivity is kept, and the edge set is a
     fixed point exactly when it is a star forest centred on each component's smallest key.
     A round whose input equals the previous round's input (per-partition digests) ends it.
  4. ``labels`` per node partition: each own node's label = its star centre
     → ``labels/node-P/part-N.arrow``.
  5. ``members`` per part: attach ids → ``members/part-N/bucket-B.arrow`` bucketed by label.
  6. ``clusters`` per bucket: sort by (label, id): the first id survives; cluster size
     → ``clusters/bucket-B/part-N.arrow``.
  3-6. ``components``, one task, instead of phases 3 to 6 where the candidate edges are at
     most ``whole_graph_edges``: a union-find over every edge gives the same labels (a
     component's smallest key is its star centre); the linked documents' ids are read from
     their parts and the clusters decided as phase 6 decides them → ``clusters/bucket-00000``.
     Each of those phases is a round of tasks with a fixed cost (~0.2 s each on the H200, nine
     of them on 4 GB); a small graph needs none of it.
  2-6. ``graph``, one task on the GPU, instead of phases 2 to 6 where ``verify`` is off and
     the band rows are at most ``ONE_TASK_BAND_ROWS``: each bucket's stars in turn, then one
     union-find on the device, then as ``components`` (the GPU sorts a bucket faster than a
     phase of tasks can share it).
  7. ``remove`` per part (the runtime's removal phase): ``cluster_id`` (the survivor's id),
     ``cluster_size`` and ``kept`` on every document; kept ones → ``out/``, others →
     ``rejected/<stage>/`` (reason ``near_duplicate``, ``duplicate_of``).

No phase collects the dataset, or a graph past ``whole_graph_edges``, in one process; a task
holds one part, one bucket or one node partition.
"""

from __future__ import annotations

import importlib.util
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather
import xxhash
from pydantic import Field

from curator.batch import ID, TEXT
from curator.commit import Commit
from curator.io.parquet import read_part
from curator.kernels.lsh import fmix64
from curator.stages.base import DatasetResult, DatasetStage
from curator.stages.context import DatasetContext, Decisions
from curator.stages.dedup.buckets import default_buckets, write_slices, write_split
from curator.stages.dedup.cluster_sizes import size_counts, sum_size_counts

REASON_FUZZY = "near_duplicate"
_ROW_BITS = 32
_ROW_MASK = np.int64((1 << _ROW_BITS) - 1)
_EDGE_SCHEMA = pa.schema([("lo", pa.int64()), ("hi", pa.int64())])
#: Candidate edges per node partition from which the component rounds run on the GPU: below it
#: a round's sort and union-find end sooner on the CPU than the copies there and back (H200,
#: 57 K edges a partition: 0.16-0.20 s a round on 16 CPU threads, 0.19-0.36 s on the GPU).
GPU_GRAPH_EDGES = 1 << 22
#: Default ``whole_graph_edges``: 4 M edges (8 M routed rows) hold ~0.5 GB in the one task.
WHOLE_GRAPH_EDGES = 1 << 22
#: Devices whose runs find edges and components in one task (no edges phase) when the band
#: rows are at most ONE_TASK_BAND_ROWS: a GPU sorts every bucket in turn sooner than a phase of
#: tasks shares it; on the CPU the edges phase's buckets run on every core instead.
ONE_TASK_GRAPH_DEVICES = frozenset({"gpu"})
ONE_TASK_BAND_ROWS = 1 << 28  # 18 bytes a row: ~5 GB of band rows, a few times that to sort
READ_THREADS = 8


# ------------------------------------------------------------------------------------ helpers
def mix64(x: np.ndarray) -> np.ndarray:
    """MurmurHash3's finaliser over int64/uint64 values (a fixed, seedless bucket hash)."""
    h = np.asarray(x).astype(np.int64, copy=True).view(np.uint64)
    with np.errstate(over="ignore"):
        return fmix64(h)


def node_partition(keys: np.ndarray, partitions: int) -> np.ndarray:
    """Node partition of each document key."""
    return (mix64(keys) % np.uint64(partitions)).astype(np.int64)


def _read_all(paths: list[Path]) -> pa.Table | None:
    tables = [feather.read_table(p, memory_map=False) for p in paths]
    tables = [t for t in tables if t.num_rows]
    return pa.concat_tables(tables) if tables else None


@cache
def _gpu_hasher(params: Any) -> Any:
    from curator.kernels.minhash_gpu import GpuMinHasher

    return GpuMinHasher(params)


@cache
def _use_gpu(device: str) -> bool:
    if device == "cpu":
        return False
    from curator.kernels.minhash_gpu import gpu_available

    ok = gpu_available()
    if device == "gpu" and not ok:
        raise RuntimeError("fuzzy_dedup: device 'gpu' but CuPy sees no GPU")
    return ok


@cache
def _empty_bands(params: Any) -> np.ndarray:
    from curator.kernels.lsh import band_hashes
    from curator.kernels.minhash import EMPTY

    sentinel = np.full((1, params.num_perm), EMPTY, np.uint32)
    return band_hashes(sentinel, params.bands, params.rows)[0]


# ------------------------------------------------------------------------------------ phase 1
@dataclass(frozen=True)
class _SignatureTask:
    part: int
    path: str
    work: str
    buckets: int
    params: Any  # MinHashParams
    device: str
    verify: bool


def signatures_and_bands(text: pa.ChunkedArray | pa.Array | Any, params: Any, device: str,
                         want_signatures: bool) -> tuple[np.ndarray | None, np.ndarray]:
    """(signatures or None, band hashes uint64[n, bands]) on the GPU or the CPU.

    ``text`` is a host Arrow string array, or ``gpu_io.DeviceStrings`` already on the GPU."""
    from curator.kernels.gpu_io import DeviceStrings
    from curator.kernels.lsh import band_hashes
    from curator.kernels.minhash import minhash_signatures

    if isinstance(text, DeviceStrings):
        sig_d = _gpu_hasher(params).signatures_device(text.data, text.starts, text.ends)
        bands_d = band_hashes(sig_d, params.bands, params.rows)
        return (sig_d.get() if want_signatures else None), bands_d.get()
    if _use_gpu(device):
        hasher = _gpu_hasher(params)
        if not want_signatures:
            return None, hasher.band_hashes(text)
        sig = hasher.signatures(text)
    else:
        sig = minhash_signatures(text, params)
    return (sig if want_signatures else None), band_hashes(sig, params.bands, params.rows)


def _read_text(path: str, device: str) -> Any:
    """The text column: decoded on the GPU by cuDF when it is there, else read by pyarrow."""
    from curator.kernels.gpu_io import cudf_enabled, read_parquet_strings

    if _use_gpu(device) and cudf_enabled():
        return read_parquet_strings(path, TEXT)
    return read_part(path, [TEXT]).column(TEXT)


def _signature_part(task: _SignatureTask) -> dict:
    sig, rows = part_band_rows(task, _read_text(task.path, task.device))
    return _write_band_rows(task, sig, rows)


def part_band_rows(task: _SignatureTask, text: Any) -> tuple[np.ndarray | None, BandRows]:
    """Signatures (for verify, else None) and shuffle rows of one part's text."""
    sig, bands = signatures_and_bands(text, task.params, task.device, task.verify)
    return sig, band_rows(bands, _empty_bands(task.params), task.part, task.buckets)


def _write_band_rows(task: _SignatureTask, sig: np.ndarray | None, rows: BandRows) -> dict:
    folder = Path(task.work) / "bands" / f"part-{task.part:05d}"
    pending = Commit()
    write_slices(pa.table(rows.columns), rows.bounds, lambda b: folder / f"bucket-{b:05d}.arrow",
                 pending)
    if task.verify:
        final = Path(task.work) / "sigs" / f"part-{task.part:05d}.npy"
        with open(pending.temporary_for(final), "wb") as f:
            np.save(f, np.ascontiguousarray(sig))
    pending.publish()
    return {"docs": rows.docs, "empty": rows.empty, "band_rows": int(rows.bounds[-1])}


@dataclass
class BandRows:
    """One part's band hashes as shuffle rows (band, hash, key), grouped by bucket
    (``hash % buckets``) and in (row, band) order within a bucket; bucket ``b`` is rows
    ``bounds[b]:bounds[b + 1]``. Documents without a shingle have no rows."""

    columns: dict[str, Any]
    bounds: np.ndarray
    docs: int
    empty: int


def band_rows(bands: np.ndarray, empty_row: np.ndarray, part: int, buckets: int) -> BandRows:
    """``BandRows`` of ``bands`` (uint64[docs, bands]): index arithmetic and one stable radix
    sort on 16-bit buckets instead of tiling keys, an int64 sort and taking rows of a table
    (~25 ms a 28,500-document part here, against ~195 ms)."""
    n, width = bands.shape
    empty = (bands == empty_row[None, :]).all(axis=1)  # no shingle: never a match
    valid = np.flatnonzero(~empty).astype(np.int64)
    hashes = bands[valid].reshape(-1) if len(valid) < n else bands.reshape(-1)
    target = hashes % np.uint64(buckets)
    order = np.argsort(target.astype(np.uint16 if buckets <= 1 << 16 else np.int64),
                       kind="stable")
    bounds = np.concatenate([np.zeros(1, np.int64),
                             np.cumsum(np.bincount(target.astype(np.int64), minlength=buckets))])
    keys = (np.int64(part) << np.int64(_ROW_BITS)) | valid[order // width]
    columns = {"band": (order % width).astype(np.int16), "hash": hashes[order], "key": keys}
    return BandRows(columns, bounds, n, n - len(valid))


# ------------------------------------------------------------------------------------ phase 2
@dataclass(frozen=True)
class _EdgeTask:
    bucket: int
    work: str
    parts: int
    partitions: int
    verify: bool
    threshold: float
    device: str


def _gather_signatures(work: str, keys: np.ndarray) -> np.ndarray:
    """Signature rows of ``keys`` read from the parts' memory-mapped ``.npy`` files."""
    part = keys >> np.int64(_ROW_BITS)
    row = keys & _ROW_MASK
    out: np.ndarray | None = None
    for p in np.unique(part):
        sigs = np.load(Path(work) / "sigs" / f"part-{int(p):05d}.npy", mmap_mode="r")
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
                      "hi": np.concatenate([hi, hi[second]])}, schema=_EDGE_SCHEMA)
    return table, np.concatenate([p_hi, p_lo[second]])


def _edges_bucket(task: _EdgeTask) -> dict:
    from curator.kernels.lsh import bucket_stars, signature_similarity, unique_edges

    folder = Path(task.work)
    table = _read_all([folder / "bands" / f"part-{p:05d}" / f"bucket-{task.bucket:05d}.arrow"
                       for p in range(task.parts)])
    empty = np.empty(0, np.int64)
    src, dst = empty, empty
    if table is not None:
        columns = [table.column(c).to_numpy() for c in ("key", "band", "hash")]
        if _use_gpu(task.device):  # the sorts on the device, the same edges
            import cupy

            src, dst = unique_edges(*bucket_stars(*map(cupy.asarray, columns)))
            src, dst = src.get(), dst.get()
        else:
            src, dst = unique_edges(*bucket_stars(*columns))  # several bands, one pair
    candidates = len(src)
    if task.verify and len(src):
        sim = signature_similarity(_gather_signatures(task.work, np.concatenate([src, dst])),
                                   np.arange(len(src)), np.arange(len(src), 2 * len(src)))
        keep = sim >= task.threshold
        src, dst = src[keep], dst[keep]
    routed, target = route_edges(dst, src, task.partitions)
    out = folder / "cc" / "r000" / f"from-{task.bucket:05d}"
    pending = Commit()
    write_split(routed, target, task.partitions, lambda q: out / f"to-{q:05d}.arrow", pending)
    pending.publish()
    return {"candidates": candidates, "edges": len(src)}


# ------------------------------------------------------------------------------------ phase 3
@dataclass(frozen=True)
class _RoundTask:
    partition: int
    round: int
    work: str
    partitions: int
    device: str


def _round_input(work: str, rnd: int, partition: int, partitions: int) -> tuple[np.ndarray,
                                                                                 np.ndarray]:
    """The distinct edges ``(lo, hi)`` touching this partition's nodes, sorted."""
    from curator.kernels.lsh import unique_edges

    folder = Path(work) / "cc" / f"r{rnd:03d}"
    table = _read_all([folder / f"from-{p:05d}" / f"to-{partition:05d}.arrow"
                       for p in range(partitions)])
    if table is None:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    hi, lo = unique_edges(table.column("hi").to_numpy(), table.column("lo").to_numpy())
    return lo, hi


def _cc_round(task: _RoundTask) -> dict:
    from curator.kernels.components import connected_components

    lo, hi = _round_input(task.work, task.round, task.partition, task.partitions)
    digest = xxhash.xxh3_128()
    digest.update(lo.tobytes())
    digest.update(hi.tobytes())
    new_lo, new_hi = lo, hi
    if len(lo):
        xp = np
        if _use_gpu(task.device):  # the sort and the union-find on the device
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
    return {"digest": digest.hexdigest(), "edges_in": len(lo)}


# ------------------------------------------------------------------------------------ phase 4
@dataclass(frozen=True)
class _LabelTask:
    partition: int
    round: int
    work: str
    partitions: int
    parts: int


def _labels_partition(task: _LabelTask) -> dict:
    lo, hi = _round_input(task.work, task.round, task.partition, task.partitions)
    nodes = np.unique(np.concatenate([lo, hi]))
    nodes = nodes[node_partition(nodes, task.partitions) == task.partition]
    label = nodes.copy()
    # A star forest: a node that is some edge's ``hi`` has exactly one neighbour, its centre.
    pos = np.searchsorted(nodes, hi)
    own = (pos < len(nodes)) & (nodes[np.minimum(pos, max(len(nodes) - 1, 0))] == hi) \
        if len(nodes) else np.zeros(len(hi), bool)
    np.minimum.at(label, pos[own], lo[own])
    part = (nodes >> np.int64(_ROW_BITS)).astype(np.int64)
    table = pa.table({"row": nodes & _ROW_MASK, "label": label})
    out = Path(task.work) / "labels" / f"node-{task.partition:05d}"
    pending = Commit()
    write_split(table, part, task.parts, lambda n: out / f"part-{n:05d}.arrow", pending)
    pending.publish()
    return {"nodes": len(nodes), "centres": int((label == nodes).sum())}


# --------------------------------------------------- phases 3-6 (or 2-6) in one task
@dataclass(frozen=True)
class _GraphTask:
    work: str
    partitions: int
    docs: tuple[int, ...]  # documents of each part: keys map densely onto 0..sum(docs)-1
    paths: tuple[str, ...]  # the parts, for the ids of linked documents
    device: str = "cpu"


def _dense(keys: Any, offsets: Any) -> Any:
    """Document keys ``part << 32 | row`` as dense numbers ``offsets[part] + row`` (ordered as
    the keys are)."""
    return offsets[keys >> np.int64(_ROW_BITS)] + (keys & _ROW_MASK)


def _components_whole(task: _GraphTask) -> dict:
    """Every candidate edge of the edges phase in one union-find over dense document numbers
    (no sort); then the clusters (:func:`_clusters_whole`)."""
    from curator.kernels.components import connected_components

    folder = Path(task.work) / "cc" / "r000"
    table = _read_all([folder / f"from-{b:05d}" / f"to-{p:05d}.arrow"
                       for b in range(task.partitions) for p in range(task.partitions)])
    offsets = _offsets(task.docs)
    linked = np.zeros(int(offsets[-1]), bool)
    label = np.empty(0, np.int64)
    if table is not None:
        lo, hi = (_dense(table.column(c).to_numpy(), offsets) for c in ("lo", "hi"))
        label = connected_components(len(linked), lo, hi)
        linked[lo] = linked[hi] = True
    return _clusters_whole(task, offsets, label, linked)


def _graph_whole(task: _GraphTask) -> dict:
    """The edges phase and the components in one task (on the GPU where ``device`` says): each
    bucket's band rows read (ahead, by a thread pool) and linked into stars as the edges phase
    links them (the same count: an edge is counted once per bucket), then one union-find."""
    from curator.kernels.components import connected_components
    from curator.kernels.lsh import bucket_stars, unique_edges

    xp = np
    if _use_gpu(task.device):
        import cupy as xp
    folder = Path(task.work) / "bands"
    n_parts = len(task.docs)

    def bucket(b: int) -> pa.Table | None:
        return _read_all([folder / f"part-{p:05d}" / f"bucket-{b:05d}.arrow"
                          for p in range(n_parts)])

    offsets = _offsets(task.docs)
    dense_offsets = xp.asarray(offsets)
    ends: list[tuple[Any, Any]] = []
    with ThreadPoolExecutor(READ_THREADS) as pool:
        for table in pool.map(bucket, range(task.partitions)):
            if table is not None:
                columns = [xp.asarray(table.column(c).to_numpy()) for c in ("key", "band", "hash")]
                src, dst = unique_edges(*bucket_stars(*columns))
                ends.append((_dense(src, dense_offsets), _dense(dst, dense_offsets)))
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
    return {**_clusters_whole(task, offsets, label, linked), "candidates": edges,
            "edges": edges}


def _offsets(docs: tuple[int, ...]) -> np.ndarray:
    offsets = np.zeros(len(docs) + 1, np.int64)
    np.cumsum(docs, out=offsets[1:])
    return offsets


def _clusters_whole(task: _GraphTask, offsets: np.ndarray, label: np.ndarray,
                    linked: np.ndarray) -> dict:
    """The members and clusters phases for a graph solved in one task: each linked document's
    label (its component's smallest key) and id (read from its part) → the clusters, in the
    one bucket ``clusters/bucket-00000`` that the removal then reads."""
    members = []
    for part, path in enumerate(task.paths):
        first = offsets[part]
        rows = np.flatnonzero(linked[first:offsets[part + 1]])
        if not len(rows):
            continue
        own = label[first + rows]
        owner = np.searchsorted(offsets, own, side="right") - 1
        ids = read_part(path, [ID]).column(ID).cast(pa.string()).take(pa.array(rows))
        members.append(pa.table({
            "label": (owner << np.int64(_ROW_BITS)) | (own - offsets[owner]),
            "part": np.full(len(rows), part, np.int32), "row": rows.astype(np.int64), ID: ids}))
    table = pa.concat_tables(members) if members else None
    return {**_decide_clusters(table, len(task.paths),
                               Path(task.work) / "clusters" / "bucket-00000"),
            "nodes": int(linked.sum())}


# ------------------------------------------------------------------------------------ phase 5
@dataclass(frozen=True)
class _MemberTask:
    part: int
    path: str
    work: str
    partitions: int
    buckets: int


def _members_part(task: _MemberTask) -> dict:
    folder = Path(task.work)
    table = _read_all([folder / "labels" / f"node-{p:05d}" / f"part-{task.part:05d}.arrow"
                       for p in range(task.partitions)])
    rows = table.column("row").to_numpy() if table is not None else np.empty(0, np.int64)
    labels = table.column("label").to_numpy() if table is not None else np.empty(0, np.int64)
    ids = read_part(task.path, [ID]).column(ID).cast(pa.string())
    members = pa.table({"label": labels, "part": np.full(len(rows), task.part, np.int32),
                        "row": rows, ID: ids.take(pa.array(rows, pa.int64()))})
    target = (mix64(labels) % np.uint64(task.buckets)).astype(np.int64)
    out = folder / "members" / f"part-{task.part:05d}"
    pending = Commit()
    write_split(members, target, task.buckets, lambda b: out / f"bucket-{b:05d}.arrow", pending)
    pending.publish()
    return {"members": len(rows)}


# ------------------------------------------------------------------------------------ phase 6
@dataclass(frozen=True)
class _ClusterTask:
    bucket: int
    work: str
    parts: int


def _clusters_bucket(task: _ClusterTask) -> dict:
    folder = Path(task.work)
    table = _read_all([folder / "members" / f"part-{p:05d}" / f"bucket-{task.bucket:05d}.arrow"
                       for p in range(task.parts)])
    return _decide_clusters(table, task.parts, folder / "clusters" / f"bucket-{task.bucket:05d}")


def _decide_clusters(members: pa.Table | None, parts: int, out: Path) -> dict:
    """Members ``(label, part, row, id)`` sorted by (label, id): the first id of each label
    survives; each member's row, cluster id and size → ``out/part-N.arrow``."""
    schema = pa.schema([("row", pa.int64()), ("cluster_id", pa.string()),
                        ("cluster_size", pa.int64()), ("kept", pa.bool_())])
    if members is None or members.num_rows == 0:
        result = schema.empty_table()
        part = np.empty(0, np.int64)
        clusters = in_clusters = 0
        sizes: dict[str, int] = {}
    else:
        table = members.sort_by([("label", "ascending"), (ID, "ascending"),
                                 ("part", "ascending"), ("row", "ascending")])
        label = table.column("label").to_numpy()
        first = np.ones(len(label), bool)
        first[1:] = label[1:] != label[:-1]
        start = np.flatnonzero(first)
        group = np.cumsum(first) - 1
        size = np.diff(np.append(start, len(label)))[group]
        result = pa.table({"row": table.column("row"),
                           "cluster_id": table.column(ID).take(pa.array(start[group])),
                           "cluster_size": size, "kept": first}, schema=schema)
        part = table.column("part").to_numpy().astype(np.int64)
        clusters = len(start)
        in_clusters = int((size > 1).sum())
        sizes = size_counts(first)
    pending = Commit()
    write_split(result, part, parts, lambda n: out / f"part-{n:05d}.arrow", pending)
    pending.publish()
    return {"clusters": clusters, "in_clusters": in_clusters, "sizes": sizes}


# ------------------------------------------------------------------------------------ phase 7
@dataclass(frozen=True)
class _Clusters:
    """Decisions of one part: cluster of every row; all but each cluster's survivor go."""

    work: str
    buckets: int

    def __call__(self, part: int, table: pa.Table) -> Decisions:
        n = table.num_rows
        ids = table.column(ID).cast(pa.string()).combine_chunks()
        decided = _read_all([Path(self.work) / "clusters" / f"bucket-{b:05d}" /
                             f"part-{part:05d}.arrow" for b in range(self.buckets)])
        size = np.ones(n, np.int64)
        kept = np.ones(n, bool)
        source = np.arange(n, dtype=np.int64)  # where cluster_id comes from: own id, or a member
        cluster_ids = ids
        if decided is not None:
            rows = decided.column("row").to_numpy()
            size[rows] = decided.column("cluster_size").to_numpy()
            kept[rows] = decided.column("kept").to_numpy(zero_copy_only=False)
            source[rows] = n + np.arange(len(rows))
            both = pa.concat_arrays([ids, decided.column("cluster_id").combine_chunks()])
            cluster_ids = both.take(pa.array(source))
        return Decisions(~kept, REASON_FUZZY,
                         columns={"cluster_id": cluster_ids, "cluster_size": pa.array(size),
                                  "kept": pa.array(kept)},
                         removed_columns={"duplicate_of": cluster_ids.filter(pa.array(~kept))})


# ------------------------------------------------------------------------------------ stage
class FuzzyDedup(DatasetStage):
    """Remove near-duplicates (MinHash LSH over character or word n-grams); in each connected
    component of candidate links the document with the lowest id survives. Every document
    gets ``cluster_id`` (its survivor's id), ``cluster_size`` and ``kept``."""

    type = "fuzzy_dedup"
    holds_gil: ClassVar[bool] = False  # numba kernels (nogil), Arrow and NumPy
    # GPU == CPU, and one task == rounds, bit for bit
    placement: ClassVar[frozenset[str]] = frozenset({"device", "whole_graph_edges"})

    shingle: Literal["char", "word"] = Field(
        "char", description="char: 24-character shingles, 20x13; word: 5-word, 14x8.")
    ngram: int | None = Field(None, gt=0, description="Shingle length; default per mode.")
    num_perm: int | None = Field(None, gt=0, description="Hashes; default per mode.")
    bands: int | None = Field(None, gt=0)
    rows: int | None = Field(None, gt=0)
    seed: int = 42
    threshold: float = Field(0.8, ge=0, le=1, description="Estimated Jaccard for `verify`.")
    verify: bool = Field(False, description="Keep only links whose signatures agree enough.")
    device: Literal["cpu", "gpu", "auto"] = Field(
        "auto", description="auto: gpu when the cluster has GPU workers and CuPy is installed.")
    keep: Literal["lowest_id"] = "lowest_id"
    buckets: int | None = Field(None, gt=0, description="Shuffle partitions; default: 16 to "
                                "one per 256 MB of parts, at most one per part.")
    max_rounds: int = Field(64, gt=0, description="Component rounds before giving up.")
    whole_graph_edges: int = Field(
        WHOLE_GRAPH_EDGES, ge=0, description="Candidate edges up to which the connected "
        "components and the clusters are found in one task (a union-find over all of them, "
        "~16 bytes an edge, and the linked documents' ids) instead of rounds of tasks over node "
        "partitions; the same output either way. 0: always rounds (and no one-task graph on "
        "the GPU either).")

    def resources(self) -> dict[str, float]:
        return {"GPU": 1} if self.device == "gpu" else {}

    def for_cluster(self, gpus: bool) -> FuzzyDedup:
        if self.device != "auto":
            return self
        gpu = gpus and importlib.util.find_spec("cupy") is not None
        return self.model_copy(update={"device": "gpu" if gpu else "cpu"})

    def warm_up(self) -> None:
        """Everything a signatures task runs, compiled or loaded, before the first one: the
        CUDA context and the kernel (~1.5 s on an H200), or numba's functions (left to the first
        tasks, 16 threads queued on numba's compiler lock: 8.0 thread-seconds, profiled)."""
        task = _SignatureTask(0, "", "", 2, self.minhash_params(), self.device, False)
        part_band_rows(task, pa.array(["warm up the kernels", ""]))

    def minhash_params(self) -> Any:
        from curator.kernels.minhash import MinHashParams

        base = MinHashParams() if self.shingle == "char" else MinHashParams.word()
        bands, rows = self.bands or base.bands, self.rows or base.rows
        num_perm = self.num_perm or max(base.num_perm, bands * rows)
        return MinHashParams(num_perm=num_perm, ngram=self.ngram or base.ngram,
                             mode=self.shingle, seed=self.seed, bands=bands, rows=rows)

    def _component_rounds(self, ctx: DatasetContext, nb: int, n_parts: int,
                          graph_gpu: dict[str, float]) -> int:
        """The ``cc-rNNN`` rounds to a fixed point, then the ``labels`` phase; rounds run."""
        work = str(ctx.work_dir)
        round_device = self.device if graph_gpu else "cpu"
        previous: list[str] | None = None
        rnd = 0
        bucket_keys = [f"bucket-{b:05d}" for b in range(nb)]
        while True:
            if rnd >= self.max_rounds:
                raise ValueError(f"{ctx.stage_name}: components did not converge in "
                                 f"{self.max_rounds} rounds; raise max_rounds (rounds done "
                                 "are kept: the rerun resumes)")
            result = ctx.run_phase(f"cc-r{rnd:03d}", _cc_round, [
                _RoundTask(p, rnd, work, nb, round_device) for p in range(nb)], bucket_keys,
                graph_gpu)
            digests = [r["digest"] for r in result]
            if digests == previous:
                break  # round rnd's input equals round rnd-1's: a fixed point (star forest)
            previous = digests
            if rnd >= 2:  # inputs of rounds before rnd-1 are no longer read
                shutil.rmtree(ctx.work_dir / "cc" / f"r{rnd - 2:03d}", ignore_errors=True)
            rnd += 1
        ctx.run_phase("labels", _labels_partition, [
            _LabelTask(p, rnd, work, nb, n_parts) for p in range(nb)], bucket_keys)
        return rnd + 1

    def run_dataset(self, parts: list[Path], ctx: DatasetContext) -> DatasetResult:
        started = time.perf_counter()
        work = str(ctx.work_dir)
        params = self.minhash_params()
        nb = self.buckets or default_buckets(parts)
        keys = [f"part-{i:05d}" for i in range(len(parts))]
        bucket_keys = [f"bucket-{b:05d}" for b in range(nb)]
        gpu = self.resources()
        sig = ctx.run_phase("signatures", _signature_part, [
            _SignatureTask(i, str(p), work, nb, params, self.device, self.verify)
            for i, p in enumerate(parts)], keys, gpu)
        graph = _GraphTask(work, nb, tuple(s["docs"] for s in sig),
                           tuple(str(p) for p in parts), self.device)
        rounds, cluster_buckets = 0, 1  # a graph solved in one task: its clusters in one bucket
        if (self.device in ONE_TASK_GRAPH_DEVICES and not self.verify and self.whole_graph_edges
                and sum(s["band_rows"] for s in sig) <= ONE_TASK_BAND_ROWS):
            edges = clusters = ctx.run_phase("graph", _graph_whole, [graph], ["graph"], gpu)
            n_edges = edges[0]["edges"]
        else:
            edges = ctx.run_phase("edges", _edges_bucket, [
                _EdgeTask(b, work, len(parts), nb, self.verify, self.threshold, self.device)
                for b in range(nb)], bucket_keys, gpu)
            n_edges = sum(e["edges"] for e in edges)
            if n_edges <= self.whole_graph_edges:
                clusters = ctx.run_phase("components", _components_whole, [graph], ["graph"])
            else:
                rounds = self._component_rounds(ctx, nb, len(parts),
                                                gpu if n_edges >= GPU_GRAPH_EDGES * nb else {})
                ctx.run_phase("members", _members_part, [
                    _MemberTask(i, str(p), work, nb, nb) for i, p in enumerate(parts)], keys)
                clusters = ctx.run_phase("clusters", _clusters_bucket, [
                    _ClusterTask(b, work, len(parts)) for b in range(nb)], bucket_keys)
                cluster_buckets = nb
        outputs, count = ctx.remove(parts, _Clusters(work, cluster_buckets))
        count.seconds = time.perf_counter() - started
        count.facts["dedup"] = {
            "candidates": sum(e["candidates"] for e in edges),
            "edges": n_edges, "component_rounds": rounds,
            "clusters": sum(c["clusters"] for c in clusters),
            "in_clusters": sum(c["in_clusters"] for c in clusters),
            "cluster_sizes": sum_size_counts(c.get("sizes", {}) for c in clusters),
            "no_shingle": sum(s["empty"] for s in sig), "device": self.device}
        return DatasetResult(outputs, count)
