"""MinHash signatures on the CPU (numba), bit-identical to ``minhash_gpu``.

Signature value ``i`` of a document is ``min over its shingle hashes h of
(a_i * (h >> 32) + b_i) mod 2**32``: an affine permutation of the shingle hash's upper 32
bits (as datasketch's ``affine32`` scheme), with ``a_i`` (odd) and ``b_i`` 32-bit values
from a SplitMix64 stream seeded with ``seed`` (see ``permutations``). Two integer
operations per permutation and shingle keep the GPU kernel fast.
Shingle hashes are defined in ``shingles``. A document without shingles gets the sentinel
signature: every value ``EMPTY`` (0xFFFFFFFF).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np
import pyarrow as pa

from curator.kernels.shingles import check_mode, doc_shingles, string_buffers

EMPTY = np.uint32(0xFFFFFFFF)
_S32 = np.uint64(32)
_M64 = (1 << 64) - 1


@dataclass(frozen=True)
class MinHashParams:
    """Shingling and hashing settings; ``bands * rows`` must not exceed ``num_perm``.

    Defaults follow NeMo Curator (24-character shingles, 260 hashes = 20 bands x 13 rows);
    ``MinHashParams.word()`` gives the datatrove-style setting (word 5-grams, 14 x 8).
    """

    num_perm: int = 260
    ngram: int = 24
    mode: str = "char"
    seed: int = 42
    bands: int = 20
    rows: int = 13

    def __post_init__(self) -> None:
        check_mode(self.mode, self.ngram)
        if self.num_perm < 1 or self.bands < 1 or self.rows < 1:
            raise ValueError("num_perm, bands and rows must be positive")
        if self.bands * self.rows > self.num_perm:
            raise ValueError(
                f"bands*rows = {self.bands * self.rows} exceeds num_perm = {self.num_perm}"
            )

    @classmethod
    def word(cls, **overrides: object) -> MinHashParams:
        """Word 5-grams with 112 hashes in 14 bands x 8 rows (datatrove's defaults)."""
        base: dict[str, object] = {
            "num_perm": 112,
            "ngram": 5,
            "mode": "word",
            "bands": 14,
            "rows": 8,
        }
        base.update(overrides)
        return cls(**base)  # type: ignore[arg-type]

    @property
    def threshold(self) -> float:
        """Jaccard similarity at which a pair becomes a candidate with probability ~0.5."""
        return (1.0 / self.bands) ** (1.0 / self.rows)


def _splitmix64(state: int) -> tuple[int, int]:
    state = (state + 0x9E3779B97F4A7C15) & _M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return state, z ^ (z >> 31)


def permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Permutation parameters ``(a, b)``, each uint32[num_perm]; every ``a`` is odd.

    Low 32 bits of SplitMix64 outputs, drawn alternately (a_0, b_0, a_1, ...) from the
    generator started at ``seed mod 2**64``.
    """
    state = seed & _M64
    a = np.empty(num_perm, np.uint32)
    b = np.empty(num_perm, np.uint32)
    for i in range(num_perm):
        state, x = _splitmix64(state)
        state, y = _splitmix64(state)
        a[i] = (x & 0xFFFFFFFF) | 1
        b[i] = y & 0xFFFFFFFF
    return a, b


@nb.njit(inline="always", nogil=True)
def _update(hs, k, a, b, mins):
    """mins[j] = min(mins[j], min_t (a[j] * (hs[t] >> 32) + b[j]) mod 2**32) for t < k."""
    p = len(a)
    t = 0
    while t + 4 <= k:
        x0 = np.uint32(hs[t] >> _S32)
        x1 = np.uint32(hs[t + 1] >> _S32)
        x2 = np.uint32(hs[t + 2] >> _S32)
        x3 = np.uint32(hs[t + 3] >> _S32)
        for j in range(p):
            aj, bj = a[j], b[j]
            v0 = np.uint32(aj * x0 + bj)
            v1 = np.uint32(aj * x1 + bj)
            v2 = np.uint32(aj * x2 + bj)
            v3 = np.uint32(aj * x3 + bj)
            mins[j] = min(mins[j], min(min(v0, v1), min(v2, v3)))
        t += 4
    while t < k:
        x = np.uint32(hs[t] >> _S32)
        for j in range(p):
            mins[j] = min(mins[j], np.uint32(a[j] * x + b[j]))
        t += 1


@nb.njit(parallel=True, nogil=True, cache=True)
def _signature_kernel(data, starts, ends, bounds, word, n, a, b, out):
    for blk in nb.prange(len(bounds) - 1):
        d0, d1 = bounds[blk], bounds[blk + 1]
        size = 1
        for d in range(d0, d1):
            size = max(size, ends[d] - starts[d])
        cps = np.empty(size, np.uint32)
        tok = np.empty(size if word else 1, np.uint64)
        hs = np.empty(size, np.uint64)
        mins = np.empty(len(a), np.uint32)
        for d in range(d0, d1):
            k = doc_shingles(data, starts[d], ends[d], word, n, cps, tok, hs)
            mins[:] = EMPTY
            _update(hs, k, a, b, mins)
            out[d, :] = mins


def balanced_blocks(starts: np.ndarray, ends: np.ndarray, nblocks: int) -> np.ndarray:
    """Split documents into at most ``nblocks`` contiguous runs of about equal bytes."""
    n = len(starts)
    if n == 0:
        return np.zeros(1, np.int64)
    cum = np.cumsum(ends - starts + 16)  # +16: a per-document cost even for tiny documents
    targets = np.linspace(0, cum[-1], min(nblocks, n) + 1)[1:-1]
    cuts = np.searchsorted(cum, targets, side="right")
    return np.unique(np.concatenate(([0], cuts, [n]))).astype(np.int64)


def minhash_signatures(
    array: pa.Array | pa.ChunkedArray, params: MinHashParams | None = None
) -> np.ndarray:
    """MinHash signatures ``uint32[n_docs, num_perm]`` of a string array, on all CPU threads."""
    params = params or MinHashParams()
    word = check_mode(params.mode, params.ngram)
    buf = string_buffers(array)
    a, b = permutations(params.num_perm, params.seed)
    out = np.empty((len(buf.starts), params.num_perm), np.uint32)
    if len(buf.starts):
        bounds = balanced_blocks(buf.starts, buf.ends, 16 * nb.get_num_threads())
        _signature_kernel(buf.data, buf.starts, buf.ends, bounds, word, params.ngram, a, b, out)
    return out


def empty_mask(signatures: np.ndarray) -> np.ndarray:
    """True for documents that had no shingle (sentinel signature)."""
    return (signatures == EMPTY).all(axis=1)
