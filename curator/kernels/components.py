"""Connected components of an edge list; every node's label is its component's smallest node.

The label is canonical, so the CPU union-find and the GPU hook-and-jump kernel give
identical output whatever the edge order or thread schedule.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numba as nb
import numpy as np

from curator.kernels.lsh import array_module


@nb.njit(inline="always", nogil=True)
def _find(parent, x):
    while parent[x] != x:
        parent[x] = parent[parent[x]]  # path halving
        x = parent[x]
    return x


@nb.njit(nogil=True, cache=True)
def _union_find(num_nodes, src, dst):
    parent = np.arange(num_nodes, dtype=np.int64)
    for e in range(len(src)):
        ra = _find(parent, src[e])
        rb = _find(parent, dst[e])
        if ra < rb:
            parent[rb] = ra  # the root of a tree is always its smallest node
        elif rb < ra:
            parent[ra] = rb
    for x in range(num_nodes):
        parent[x] = parent[parent[x]]  # parents precede children: one pass flattens
    return parent


def _check(num_nodes: int, src: Any, dst: Any) -> None:
    if len(src) != len(dst):
        raise ValueError(f"src and dst differ in length: {len(src)} != {len(dst)}")
    if len(src) and (
        int(src.min()) < 0
        or int(dst.min()) < 0
        or int(src.max()) >= num_nodes
        or int(dst.max()) >= num_nodes
    ):
        raise ValueError(f"edge endpoints must lie in [0, {num_nodes})")


def connected_components(num_nodes: int, src: Any, dst: Any) -> Any:
    """Labels ``int64[num_nodes]`` (smallest node of each component) of nodes ``0..n-1``.

    NumPy input runs a numba union-find on the CPU; CuPy input runs ``components_gpu``.
    """
    if array_module(src) is not np:
        return components_gpu(num_nodes, src, dst)
    src = np.ascontiguousarray(src, dtype=np.int64)
    dst = np.ascontiguousarray(dst, dtype=np.int64)
    _check(num_nodes, src, dst)
    return _union_find(num_nodes, src, dst)


def components_from_ids(src_ids: Any, dst_ids: Any) -> tuple[Any, Any]:
    """Components over arbitrary int64 ids: ``(nodes, labels)``, labels being node ids."""
    xp = array_module(src_ids)
    nodes, inverse = xp.unique(xp.concatenate([src_ids, dst_ids]), return_inverse=True)
    inverse = inverse.reshape(-1)
    m = len(src_ids)
    labels = connected_components(len(nodes), inverse[:m], inverse[m:])
    return nodes, nodes[labels]


_GPU_SOURCE = r"""
extern "C" __global__ void hook(const long long* __restrict__ src,
                                const long long* __restrict__ dst, long long m,
                                long long* label, int* changed) {
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < m;
         e += (long long)gridDim.x * blockDim.x) {
        long long a = label[src[e]], b = label[dst[e]];
        while (a != b) {  /* climb towards the roots, hook the larger under the smaller */
            long long hi = a > b ? a : b, lo = a < b ? a : b;
            long long old = atomicMin((unsigned long long*)&label[hi], (unsigned long long)lo);
            if (old == hi) { *changed = 1; break; }  /* hooked a root */
            if (old > lo) *changed = 1;
            a = old; b = lo;      /* hi was already hooked to old: continue from there */
        }
    }
}
extern "C" __global__ void jump(long long n, long long* label) {
    for (long long x = blockIdx.x * (long long)blockDim.x + threadIdx.x; x < n;
         x += (long long)gridDim.x * blockDim.x) {
        long long l = label[x], ll = label[l];
        while (l != ll) { l = ll; ll = label[l]; }
        label[x] = l;
    }
}
"""


@cache
def _gpu_kernels() -> tuple[Any, Any]:
    import cupy

    mod = cupy.RawModule(code=_GPU_SOURCE)
    return mod.get_function("hook"), mod.get_function("jump")


def components_gpu(num_nodes: int, src: Any, dst: Any, *, max_rounds: int = 10_000) -> Any:
    """GPU connected components (CuPy): atomic-min hooking and pointer jumping.

    Invariant: ``label[x] <= x`` and lies in x's component, so at the fixed point every node
    points at its component's smallest node, the same labels as the CPU union-find.
    """
    import cupy

    src = cupy.ascontiguousarray(cupy.asarray(src), dtype=cupy.int64)
    dst = cupy.ascontiguousarray(cupy.asarray(dst), dtype=cupy.int64)
    _check(num_nodes, src, dst)
    label = cupy.arange(num_nodes, dtype=cupy.int64)
    if len(src) == 0 or num_nodes == 0:
        return label
    hook, jump = _gpu_kernels()
    changed = cupy.zeros(1, dtype=cupy.int32)
    block = 256
    grid_e = min((len(src) + block - 1) // block, 65535 * 8)
    grid_n = min((num_nodes + block - 1) // block, 65535 * 8)
    for _ in range(max_rounds):
        changed.fill(0)
        hook((grid_e,), (block,), (src, dst, np.int64(len(src)), label, changed))
        jump((grid_n,), (block,), (np.int64(num_nodes), label))
        if not int(changed.get()[0]):
            return label
    raise RuntimeError("connected components did not converge")
