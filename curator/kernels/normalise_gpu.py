"""exact_dedup's text normalisation on an NVIDIA GPU (CuPy RawKernel), byte for byte the CPU's.

The CPU normalises with Arrow: ``utf8_trim_whitespace(collapse(utf8_lower(text)))``. Here one
thread per document decodes its UTF-8, maps each code point through a lower-case table, turns
each run of ``[\\t\\n\\f\\r ]`` into one space and drops Unicode whitespace at both ends, in two
passes (output lengths, then bytes at their scanned offsets). The tables are built from Arrow's
own ``utf8_lower`` and ``utf8_trim_whitespace`` over every code point (``case_tables``), so the
GPU follows whatever Unicode version the installed Arrow has. A document that is not strictly
valid UTF-8 makes the call return None: the caller then normalises on the CPU, which raises
(or not) as Arrow does. The functions are ``__host__ __device__``; the tests build them for the
host and compare them with Arrow where no GPU is present.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

BLOCK = 256

SOURCE = r"""
typedef unsigned char u8;
#ifndef HD
#define HD __host__ __device__ __forceinline__
#endif

// Strict UTF-8: the code point's byte length, or 0 (truncated, stray continuation, overlong,
// surrogate, past U+10FFFF).
HD int utf8_decode(const u8* p, long long left, unsigned* cp) {
    const unsigned b = p[0];
    if (b < 0x80) { *cp = b; return 1; }
    int len; unsigned c, min;
    if ((b & 0xE0) == 0xC0) { len = 2; c = b & 0x1F; min = 0x80; }
    else if ((b & 0xF0) == 0xE0) { len = 3; c = b & 0x0F; min = 0x800; }
    else if ((b & 0xF8) == 0xF0) { len = 4; c = b & 0x07; min = 0x10000; }
    else return 0;
    if (left < len) return 0;
    for (int i = 1; i < len; ++i) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        c = (c << 6) | (p[i] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return 0;
    *cp = c;
    return len;
}

HD int utf8_encode(unsigned c, u8* out) {
    if (c < 0x80) { if (out) out[0] = (u8)c; return 1; }
    if (c < 0x800) {
        if (out) { out[0] = (u8)(0xC0 | (c >> 6)); out[1] = (u8)(0x80 | (c & 0x3F)); }
        return 2;
    }
    if (c < 0x10000) {
        if (out) {
            out[0] = (u8)(0xE0 | (c >> 12)); out[1] = (u8)(0x80 | ((c >> 6) & 0x3F));
            out[2] = (u8)(0x80 | (c & 0x3F));
        }
        return 3;
    }
    if (out) {
        out[0] = (u8)(0xF0 | (c >> 18)); out[1] = (u8)(0x80 | ((c >> 12) & 0x3F));
        out[2] = (u8)(0x80 | ((c >> 6) & 0x3F)); out[3] = (u8)(0x80 | (c & 0x3F));
    }
    return 4;
}

// One document: lower case, runs of [\t\n\f\r ] as one space, Unicode whitespace trimmed at
// both ends. Returns the length, or -1 if not UTF-8; writes the first ``limit`` bytes to
// ``out`` (the length, from a first pass: trailing whitespace past it is never written, so
// documents written side by side in parallel don't overlap). ``lower``: code point -> lower
// case below ``n_lower`` (others map to themselves); ``space``: 1 where the lower-cased code
// point is whitespace Arrow trims, below ``n_space``.
HD long long normalise_doc(const u8* d, long long n, const unsigned* lower, unsigned n_lower,
                           const u8* space, unsigned n_space, u8* out, long long limit) {
    long long w = 0, kept = 0;  // bytes written; bytes up to the last non-space code point
    bool started = false, in_run = false;
    for (long long p = 0; p < n;) {
        unsigned c;
        const int len = utf8_decode(d + p, n - p, &c);
        if (!len) return -1;
        p += len;
        if (c < n_lower) c = lower[c];
        const bool is_space = c < n_space && space[c];
        if (!started) {
            if (is_space) continue;
            started = true;
        }
        if (c == 32 || c == 9 || c == 10 || c == 12 || c == 13) {
            if (in_run) continue;
            in_run = true;
            c = 32;
        } else {
            in_run = false;
        }
        w += utf8_encode(c, w < limit ? out + w : 0);
        if (!is_space) kept = w;
    }
    return kept;
}

#ifdef __CUDACC__
extern "C" __global__ void normalised_lengths(
        const u8* __restrict__ data, long long base, const long long* __restrict__ starts,
        const long long* __restrict__ ends, long long n, const unsigned* __restrict__ lower,
        unsigned n_lower, const u8* __restrict__ space, unsigned n_space,
        long long* __restrict__ lengths, int* __restrict__ invalid) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    lengths[i] = normalise_doc(data + (starts[i] - base), ends[i] - starts[i], lower, n_lower,
                               space, n_space, 0, 0);
    if (lengths[i] < 0) *invalid = 1;  // every writer writes 1: no atomic needed
}

extern "C" __global__ void normalised_bytes(
        const u8* __restrict__ data, long long base, const long long* __restrict__ starts,
        const long long* __restrict__ ends, long long n, const unsigned* __restrict__ lower,
        unsigned n_lower, const u8* __restrict__ space, unsigned n_space,
        const long long* __restrict__ out_starts, const long long* __restrict__ lengths,
        u8* __restrict__ out) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    normalise_doc(data + (starts[i] - base), ends[i] - starts[i], lower, n_lower, space,
                  n_space, out + out_starts[i], lengths[i]);
}
#endif
"""


@dataclass(frozen=True)
class CaseTables:
    """``lower[c]``: Arrow's lower case of code point ``c`` (below ``len(lower)``; the others
    have none); ``space[c]``: 1 where Arrow's ``utf8_trim_whitespace`` drops lower-cased ``c``."""

    lower: np.ndarray  # uint32
    space: np.ndarray  # uint8


@cache
def case_tables() -> CaseTables:
    """Both tables from Arrow itself over every code point (~0.3 s, once per process)."""
    points = np.arange(0x110000, dtype=np.uint32)
    points = points[(points < 0xD800) | (points > 0xDFFF)]
    text = pa.LargeStringArray.from_buffers(len(points), pa.py_buffer(_utf8_offsets(points)),
                                            pa.py_buffer(_utf8(points)))
    lowered = pc.utf8_lower(text)
    if pc.any(pc.not_equal(pc.utf8_length(lowered), 1)).as_py():
        raise RuntimeError("Arrow's utf8_lower maps a code point to several: no GPU table")
    offsets = np.frombuffer(lowered.buffers()[1], np.int64)
    data = lowered.buffers()[2].to_pybytes()[offsets[0]:offsets[-1]]
    low = np.frombuffer(data.decode("utf-8").encode("utf-32-le"), "<u4")
    changed = np.flatnonzero(low != points)
    lower = np.arange(int(points[changed].max()) + 1 if len(changed) else 0, dtype=np.uint32)
    lower[points[changed]] = low[changed]
    trimmed = pc.utf8_length(pc.utf8_trim_whitespace(lowered)).to_numpy()
    spaces = points[trimmed == 0]
    space = np.zeros(int(spaces.max()) + 1 if len(spaces) else 0, np.uint8)
    space[spaces] = 1
    return CaseTables(lower, space)


def _utf8(points: np.ndarray) -> bytes:
    return points.astype("<u4").tobytes().decode("utf-32-le").encode("utf-8")


def _utf8_offsets(points: np.ndarray) -> np.ndarray:
    sizes = np.where(points < 0x80, 1, np.where(points < 0x800, 2,
                                                np.where(points < 0x10000, 3, 4)))
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def _cupy() -> Any:
    import cupy

    return cupy


@cache
def _kernels() -> tuple[Any, Any]:
    module = _cupy().RawModule(code=SOURCE, options=("-std=c++17",))
    return module.get_function("normalised_lengths"), module.get_function("normalised_bytes")


@cache
def _device_tables() -> tuple[Any, Any]:
    cp = _cupy()
    tables = case_tables()
    lower = cp.asarray(tables.lower if len(tables.lower) else np.zeros(1, np.uint32))
    space = cp.asarray(tables.space if len(tables.space) else np.zeros(1, np.uint8))
    cp.cuda.Device().synchronize()  # there before a kernel on another stream reads them
    return lower, space


def normalise_device(data: Any, starts: Any, ends: Any, base: int = 0
                     ) -> tuple[Any, Any, Any] | None:
    """Normalise documents already on the device (``doc_hash_gpu.doc_hashes_device``'s layout)
    into a new buffer: (bytes, starts, ends) as cupy arrays with ``base`` 0; None when a
    document is not valid UTF-8. Runs on the current stream."""
    cp = _cupy()
    n = len(starts)
    tables = case_tables()
    lower, space = _device_tables()
    grid, args = ((n + BLOCK - 1) // BLOCK,), (data, np.int64(base), starts, ends, np.int64(n),
                                               lower, np.uint32(len(tables.lower)), space,
                                               np.uint32(len(tables.space)))
    lengths_kernel, bytes_kernel = _kernels()
    lengths = cp.empty(n, cp.int64)
    # the kernel flags a document that is not UTF-8 itself: CuPy's ``any`` would compile CUB
    # kernels for each block size it picks from n, on a machine's first real-sized calls
    invalid = cp.zeros(1, cp.int32)
    if n:
        lengths_kernel(grid, (BLOCK,), (*args, lengths, invalid))
    if int(invalid[0]):
        return None
    ends_out = cp.cumsum(lengths) if n else lengths
    starts_out = ends_out - lengths
    out = cp.empty(max(1, int(ends_out[-1]) if n else 1), cp.uint8)
    if n:
        bytes_kernel(grid, (BLOCK,), (*args, starts_out, lengths, out))
    return out, starts_out, ends_out
