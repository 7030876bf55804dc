"""Phases 5 to 7: ids joined to labels, each cluster's survivor decided, and the decisions
of one part for the removal phase."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from curator.batch import ID
from curator.commit import Commit
from curator.io.parquet import read_part
from curator.stages.context import Decisions, PhaseResult
from curator.stages.dedup.buckets import write_split
from curator.stages.dedup.cluster_sizes import size_counts
from curator.stages.dedup.fuzzy.common import REASON_FUZZY, mix64, read_all


@dataclass(frozen=True)
class MemberTask:
    part: int
    path: str
    work: str
    partitions: int
    buckets: int


@dataclass(frozen=True)
class MemberResult(PhaseResult):
    members: int


def members_part(task: MemberTask) -> MemberResult:
    folder = Path(task.work)
    table = read_all([folder / "labels" / f"node-{p:05d}" / f"part-{task.part:05d}.arrow"
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
    return MemberResult(len(rows))


@dataclass(frozen=True)
class ClusterTask:
    bucket: int
    work: str
    parts: int


@dataclass(frozen=True)
class ClusterResult(PhaseResult):
    clusters: int
    in_clusters: int  # members of clusters of two or more
    sizes: dict[str, int]  # clusters per size (``size_counts``)


def clusters_bucket(task: ClusterTask) -> ClusterResult:
    folder = Path(task.work)
    table = read_all([folder / "members" / f"part-{p:05d}" / f"bucket-{task.bucket:05d}.arrow"
                       for p in range(task.parts)])
    return decide_clusters(table, task.parts, folder / "clusters" / f"bucket-{task.bucket:05d}")


def decide_clusters(members: pa.Table | None, parts: int, out: Path) -> ClusterResult:
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
    return ClusterResult(clusters, in_clusters, sizes)


@dataclass(frozen=True)
class Clusters:
    """Decisions of one part: cluster of every row; all but each cluster's survivor go."""

    work: str
    buckets: int

    def __call__(self, part: int, table: pa.Table) -> Decisions:
        n = table.num_rows
        ids = table.column(ID).cast(pa.string()).combine_chunks()
        decided = read_all([Path(self.work) / "clusters" / f"bucket-{b:05d}" /
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
