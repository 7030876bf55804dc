"""Shared by the fuzzy dedup phases: document keys, partitions, device choice."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.feather as feather

from curator.kernels.lsh import fmix64

REASON_FUZZY = "near_duplicate"
ROW_BITS = 32
ROW_MASK = np.int64((1 << ROW_BITS) - 1)
EDGE_SCHEMA = pa.schema([("lo", pa.int64()), ("hi", pa.int64())])
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




def mix64(x: np.ndarray) -> np.ndarray:
    """MurmurHash3's finaliser over int64/uint64 values (a fixed, seedless bucket hash)."""
    h = np.asarray(x).astype(np.int64, copy=True).view(np.uint64)
    with np.errstate(over="ignore"):
        return fmix64(h)


def node_partition(keys: np.ndarray, partitions: int) -> np.ndarray:
    """Node partition of each document key."""
    return (mix64(keys) % np.uint64(partitions)).astype(np.int64)


def read_all(paths: list[Path]) -> pa.Table | None:
    tables = [feather.read_table(p, memory_map=False) for p in paths]
    tables = [t for t in tables if t.num_rows]
    return pa.concat_tables(tables) if tables else None


@cache
def gpu_hasher(params: Any) -> Any:
    from curator.kernels.minhash_gpu import GpuMinHasher

    return GpuMinHasher(params)


@cache
def use_gpu(device: str) -> bool:
    if device == "cpu":
        return False
    from curator.kernels.minhash_gpu import gpu_available

    ok = gpu_available()
    if device == "gpu" and not ok:
        raise RuntimeError("fuzzy_dedup: device 'gpu' but CuPy sees no GPU")
    return ok


@cache
def empty_bands(params: Any) -> np.ndarray:
    from curator.kernels.lsh import band_hashes
    from curator.kernels.minhash import EMPTY

    sentinel = np.full((1, params.num_perm), EMPTY, np.uint32)
    return band_hashes(sentinel, params.bands, params.rows)[0]
