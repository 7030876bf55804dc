"""LSH banding and bucket edges; every function works on NumPy or CuPy arrays alike.

Band ``j`` of a signature covers rows ``[j*rows, (j+1)*rows)``; its hash is
``fmix64(poly(v_0..v_{rows-1}; BAND_BASE) seeded with j + 1)`` over uint64, i.e.
``h = j + 1; h = h * BAND_BASE + v`` for each row value, then MurmurHash3's finaliser.
Documents sharing a (band, hash) bucket are candidates. ``star_edges`` links each bucket
member to the bucket's smallest id, so edges grow with documents, not with bucket size
squared.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from curator.kernels.shingles import FMIX_C1, FMIX_C2

BAND_BASE = np.uint64(0xD6E8FEB86659FD93)
_S33 = np.uint64(33)


def array_module(x: Any) -> Any:
    """``cupy`` for CuPy arrays, else ``numpy`` (without importing CuPy otherwise)."""
    if type(x).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy
    return np


def fmix64(x: Any) -> Any:
    """MurmurHash3's 64-bit finaliser, in place, over a uint64 NumPy or CuPy array."""
    x ^= x >> _S33
    x *= FMIX_C1
    x ^= x >> _S33
    x *= FMIX_C2
    x ^= x >> _S33
    return x


def band_hashes(signatures: Any, bands: int, rows: int) -> Any:
    """Band hashes ``uint64[n_docs, bands]`` of ``uint32[n_docs, >= bands*rows]`` signatures."""
    xp = array_module(signatures)
    n, width = signatures.shape
    if bands * rows > width:
        raise ValueError(f"bands*rows = {bands * rows} exceeds signature width {width}")
    if xp is not np:
        return _band_hashes_cupy(xp, signatures, bands, rows)
    out = xp.empty((n, bands), dtype=xp.uint64)
    with np.errstate(over="ignore"):
        for j in range(bands):
            h = xp.full(n, j + 1, dtype=xp.uint64)
            for i in range(j * rows, (j + 1) * rows):
                h *= BAND_BASE
                h += signatures[:, i].astype(xp.uint64)
            out[:, j] = fmix64(h)
    return out


_BAND_SOURCE = r"""
extern "C" __global__ void band_hashes(const unsigned int* sig, long long n, int width,
                                       int bands, int rows, unsigned long long* out) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n * bands) return;
    const long long doc = i / bands;
    const int j = (int)(i - doc * bands);
    const unsigned int* v = sig + doc * width + (long long)j * rows;
    unsigned long long h = (unsigned long long)(j + 1);
    for (int r = 0; r < rows; ++r) h = h * 0xD6E8FEB86659FD93ULL + v[r];
    h ^= h >> 33; h *= 0xFF51AFD7ED558CCDULL;
    h ^= h >> 33; h *= 0xC4CEB9FE1A85EC53ULL;
    out[i] = h ^ (h >> 33);
}
"""


def _band_hashes_cupy(cp: Any, signatures: Any, bands: int, rows: int) -> Any:
    """One fused kernel for ``band_hashes`` on the GPU (same arithmetic)."""
    sig = cp.ascontiguousarray(signatures, dtype=cp.uint32)
    n, width = sig.shape
    out = cp.empty((n, bands), dtype=cp.uint64)
    total = n * bands
    if total:
        kern = cp.RawKernel(_BAND_SOURCE, "band_hashes")  # compiled once, cached by CuPy
        kern(
            ((total + 255) // 256,),
            (256,),
            (sig, np.int64(n), np.int32(width), np.int32(bands), np.int32(rows), out),
        )
    return out


def bucket_stars(ids: Any, *keys: Any) -> tuple[Any, Any]:
    """Edges ``(member, leader)`` linking each member of a bucket to its smallest id.

    ``ids`` (int64) and each key (e.g. band number, bucket hash) are parallel 1-D arrays; a
    bucket is a run of equal keys. Leaders get no edge. Cost: one sort, no pairs.
    """
    xp = array_module(ids)
    if len(ids) == 0:
        empty = xp.empty(0, dtype=xp.int64)
        return empty, empty
    sortable = ids.astype(xp.int64).view(xp.uint64) ^ np.uint64(1 << 63)  # keeps int64 order
    stack = xp.stack([sortable] + [k.astype(xp.int64).view(xp.uint64) for k in keys[::-1]])
    order = xp.lexsort(stack)
    sid = ids[order].astype(xp.int64)
    new = xp.zeros(len(sid), dtype=bool)
    new[0] = True
    for k in keys:
        sk = k[order]
        new[1:] |= sk[1:] != sk[:-1]
    group = xp.cumsum(new) - 1
    leader = sid[new][group]
    keep = sid != leader
    return sid[keep], leader[keep]


def star_edges(ids: Any, band_table: Any, *, unique: bool = True) -> tuple[Any, Any]:
    """Star edges from per-document band hashes ``uint64[n_docs, bands]``, all bands.

    Returns int64 arrays ``(src, dst)`` with ``dst < src`` (``dst`` the bucket leader);
    with ``unique`` each pair appears once, sorted by ``(src, dst)``.
    """
    xp = array_module(band_table)
    parts = [bucket_stars(ids, band_table[:, j]) for j in range(band_table.shape[1])]
    src = xp.concatenate([p[0] for p in parts]) if parts else xp.empty(0, xp.int64)
    dst = xp.concatenate([p[1] for p in parts]) if parts else xp.empty(0, xp.int64)
    return unique_edges(src, dst) if unique else (src, dst)


def star_edges_from_table(
    ids: Any, bands: Any, buckets: Any, *, unique: bool = True
) -> tuple[Any, Any]:
    """Star edges from a long ``(id, band, bucket)`` table, e.g. one shuffle partition."""
    src, dst = bucket_stars(ids, bands, buckets)
    return unique_edges(src, dst) if unique else (src, dst)


def unique_edges(src: Any, dst: Any) -> tuple[Any, Any]:
    """Distinct ``(src, dst)`` pairs, sorted by ``src`` then ``dst``."""
    xp = array_module(src)
    if len(src) == 0:
        return src, dst
    order = xp.lexsort(xp.stack([dst.astype(xp.int64), src.astype(xp.int64)]))
    s, d = src[order], dst[order]
    keep = xp.empty(len(s), dtype=bool)
    keep[0] = True
    keep[1:] = (s[1:] != s[:-1]) | (d[1:] != d[:-1])
    return s[keep], d[keep]


def signature_similarity(signatures: Any, a: Any, b: Any, *, chunk: int = 1 << 16) -> Any:
    """Estimated Jaccard (fraction of equal MinHash values) of pairs ``(a[k], b[k])``."""
    xp = array_module(signatures)
    out = xp.empty(len(a), dtype=xp.float32)
    width = signatures.shape[1]
    for lo in range(0, len(a), chunk):
        hi = min(lo + chunk, len(a))
        eq = signatures[a[lo:hi]] == signatures[b[lo:hi]]
        out[lo:hi] = eq.sum(axis=1, dtype=xp.int32) / np.float32(width)
    return out


def verify_pairs(signatures: Any, src: Any, dst: Any, threshold: float) -> tuple[Any, Any, Any]:
    """Keep candidate pairs whose estimated Jaccard is at least ``threshold``.

    ``signatures`` rows are indexed by ``src``/``dst`` (dense row numbers). Returns the kept
    ``(src, dst, similarity)``.
    """
    sim = signature_similarity(signatures, src, dst)
    keep = sim >= threshold
    return src[keep], dst[keep], sim[keep]
