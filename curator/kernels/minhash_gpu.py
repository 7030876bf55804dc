"""MinHash signatures on an NVIDIA GPU (CuPy RawKernel), bit-identical to ``minhash``.

The kernels read the Arrow UTF-8 bytes and offsets directly. Documents are cut into
segments of ``SEGMENT`` bytes; one thread block per segment hashes the shingles that start
in it into shared memory, then each thread folds them into the minima of a few permutations
and merges them into the document's row with ``atomicMin``. Host input is streamed in chunks
through pinned buffers on several CUDA streams so copies overlap the kernels; device input
(e.g. a string column cuDF decoded from Parquet, see ``gpu_io``) is hashed in place.

CuPy is imported lazily: importing this module never needs a GPU.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from typing import Any

import numpy as np
import pyarrow as pa

from curator.kernels.host_staging import to_device
from curator.kernels.minhash import MinHashParams, permutations
from curator.kernels.shingles import check_mode, string_buffers

SEGMENT = 2048
BLOCK = 128

_SOURCE = r"""
typedef unsigned long long u64;
typedef unsigned int u32;
#define NGRAM %(ngram)d
#define NPERM %(nperm)d
#define PPT %(ppt)d
#define SEGMENT %(segment)d
#define BLOCK %(block)d
#define WORD %(word)d
#define CHAR_BASE 0x9E3779B97F4A7C15ULL
#define WORD_BASE 0xBF58476D1CE4E5B9ULL
#define CHAR_TOP %(char_top)dULL

__device__ __forceinline__ u64 fmix64(u64 x) {
    x ^= x >> 33; x *= 0xFF51AFD7ED558CCDULL;
    x ^= x >> 33; x *= 0xC4CEB9FE1A85EC53ULL;
    x ^= x >> 33; return x;
}
__device__ __forceinline__ bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

/* Decode the code point starting at p (< end); *next receives the following start. */
__device__ __forceinline__ u32 decode(const unsigned char* d, long long p, long long end,
                                      long long* next) {
    u32 b = d[p];
    u32 v = b < 0x80 ? b : b < 0xE0 ? (b & 0x1F) : b < 0xF0 ? (b & 0x0F) : (b & 0x07);
    ++p;
    while (p < end && is_cont(d[p])) { v = (v << 6) | (d[p] & 0x3F); ++p; }
    *next = p;
    return v;
}
__device__ __forceinline__ bool is_sep(u32 c) {
    if (c <= 0x7F)
        return c <= 0x20 || c == 0x7F || (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40)
            || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A)
        || (c >= 0x2010 && c <= 0x205F) || (c >= 0x3000 && c <= 0x303F)
        || (c >= 0xFF01 && c <= 0xFF0F) || (c >= 0xFF1A && c <= 0xFF20)
        || (c >= 0xFF3B && c <= 0xFF40) || (c >= 0xFF5B && c <= 0xFF65);
}
__device__ __forceinline__ u32 lower(u32 c) {
    if (c >= 0x41 && c <= 0x5A) return c + 32;
    if (c >= 0xC0) {
        if ((c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3AB && c != 0x3A2))
            return c + 32;
        if (c >= 0x410 && c <= 0x42F) return c + 32;
        if (c >= 0x400 && c <= 0x40F) return c + 80;
    }
    return c;
}
/* Start of the code point that ends just before p (p > d0). */
__device__ __forceinline__ long long prev_start(const unsigned char* d, long long p, long long d0) {
    long long q = p - 1;
    while (q > d0 && is_cont(d[q])) --q;
    return q;
}

/* Word mode: hash of the shingle starting at byte p of [d0, d1); false if none starts there. */
__device__ bool shingle_at(const unsigned char* d, long long p, long long d0, long long d1,
                           u64* out) {
    if (p != d0 && is_cont(d[p])) return false;
    long long q;
    u32 c = decode(d, p, d1, &q);
    if (is_sep(c)) return false;
    if (p != d0 && !is_sep(decode(d, prev_start(d, p, d0), d1, &q))) return false;
    u64 h = 0; int k = 0; long long r = p;
    while (k < NGRAM && r < d1) {
        u64 th = 0; u64 len = 0;
        while (r < d1) {
            u32 cp = decode(d, r, d1, &q);
            if (is_sep(cp)) break;
            th = th * CHAR_BASE + (u64)lower(cp); ++len; r = q;
        }
        h = h * WORD_BASE + fmix64(th + len); ++k;
        while (r < d1) {
            u32 cp = decode(d, r, d1, &q);
            if (!is_sep(cp)) break;
            r = q;
        }
    }
    if (k < NGRAM) {  /* only the first token of a short document starts a shingle */
        long long s = p;
        while (s > d0) {
            s = prev_start(d, s, d0);
            if (!is_sep(decode(d, s, d1, &q))) return false;
        }
    }
    *out = fmix64(h + (u64)k);
    return true;
}

/* One block per segment; seg_cum[i] = segments of documents 0..i (inclusive). */
extern "C" __global__ void __launch_bounds__(BLOCK)
minhash_segments(const unsigned char* __restrict__ data, long long base,
                 const long long* __restrict__ starts, const long long* __restrict__ ends,
                 const long long* __restrict__ seg_cum, long long ndocs, long long doc0,
                 long long seg0, const u32* __restrict__ pa, const u32* __restrict__ pb,
                 u32* __restrict__ out) {
    __shared__ __align__(16) u32 sh[SEGMENT];
    __shared__ int count;
    const long long g = seg0 + blockIdx.x;
    long long lo = 0, hi = ndocs - 1;           /* first doc with seg_cum[doc] > g */
    while (lo < hi) {
        const long long mid = (lo + hi) >> 1;
        if (seg_cum[mid] > g) hi = mid; else lo = mid + 1;
    }
    const long long doc = lo;
    const long long first = doc ? seg_cum[doc - 1] : 0;
    const long long d0 = starts[doc] - base, d1 = ends[doc] - base;
    const long long p0 = d0 + (g - first) * SEGMENT;
    const long long p1 = min(p0 + SEGMENT, d1);
    if (threadIdx.x == 0) count = 0;
    __syncthreads();
#if WORD
    for (long long p = p0 + threadIdx.x; p < p1; p += BLOCK) {
        u64 h;
        if (shingle_at(data, p, d0, d1, &h)) sh[atomicAdd(&count, 1)] = (u32)(h >> 32);
    }
#else
    {   /* each thread rolls the window over its own run of SEGMENT / BLOCK bytes */
        const long long r0 = p0 + (long long)threadIdx.x * (SEGMENT / BLOCK);
        const long long r1 = min(r0 + SEGMENT / BLOCK, p1);
        long long p = r0, q, nx;
        while (p < r1 && p != d0 && is_cont(data[p])) ++p;
        if (p < r1) {
            u64 h = 0; int k = 0; q = p;
            while (k < NGRAM && q < d1) {
                h = h * CHAR_BASE + decode(data, q, d1, &nx);
                q = nx; ++k;
            }
            if (k == NGRAM || p == d0) {
                sh[atomicAdd(&count, 1)] = (u32)(fmix64(h + (u64)k) >> 32);
                while (k == NGRAM) {
                    const u32 c_out = decode(data, p, d1, &nx);
                    p = nx;
                    if (p >= r1 || q >= d1) break;
                    const u32 c_in = decode(data, q, d1, &nx);
                    q = nx;
                    h = (h - (u64)c_out * CHAR_TOP) * CHAR_BASE + c_in;
                    sh[atomicAdd(&count, 1)] = (u32)(fmix64(h + (u64)NGRAM) >> 32);
                }
            }
        }
    }
#endif
    __syncthreads();
    const int k = count;
    u32 a[PPT], b[PPT], m[PPT];
#pragma unroll
    for (int j = 0; j < PPT; ++j) {
        const int perm = threadIdx.x + j * BLOCK;
        a[j] = perm < NPERM ? pa[perm] : 0; b[j] = perm < NPERM ? pb[perm] : 0;
        m[j] = 0xFFFFFFFFu;
    }
    const uint4* sh4 = reinterpret_cast<const uint4*>(sh);
    int t = 0;
    for (; t + 4 <= k; t += 4) {
        const uint4 x = sh4[t >> 2];
#pragma unroll
        for (int j = 0; j < PPT; ++j) {
            if (threadIdx.x + j * BLOCK < NPERM) {
                const u32 v = min(min(a[j] * x.x + b[j], a[j] * x.y + b[j]),
                                  min(a[j] * x.z + b[j], a[j] * x.w + b[j]));
                m[j] = min(m[j], v);
            }
        }
    }
    for (; t < k; ++t) {
        const u32 x = sh[t];
#pragma unroll
        for (int j = 0; j < PPT; ++j) {
            if (threadIdx.x + j * BLOCK < NPERM) m[j] = min(m[j], a[j] * x + b[j]);
        }
    }
    u32* row = out + (doc - doc0) * (long long)NPERM;
#pragma unroll
    for (int j = 0; j < PPT; ++j) {
        const int perm = threadIdx.x + j * BLOCK;
        if (perm < NPERM && k) atomicMin(row + perm, m[j]);
    }
}
"""


def _cupy() -> Any:
    import cupy

    return cupy


def gpu_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    try:
        return _cupy().cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


@cache
def _kernel(ngram: int, nperm: int, word: bool) -> Any:
    src = _SOURCE % {
        "ngram": ngram,
        "nperm": nperm,
        "ppt": math.ceil(nperm / BLOCK),
        "segment": SEGMENT,
        "block": BLOCK,
        "word": int(word),
        "char_top": pow(0x9E3779B97F4A7C15, ngram - 1, 1 << 64),
    }
    return _cupy().RawKernel(src, "minhash_segments", options=("-std=c++17",))


def _segment_cum(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    return np.cumsum((ends - starts + (SEGMENT - 1)) // SEGMENT)


class GpuMinHasher:
    """MinHash signatures on the current CUDA device, identical to ``minhash_signatures``.

    ``chunk_bytes`` bounds the text resident on the device per chunk; ``slots`` chunks are in
    flight at once (host copy into pinned memory, host-to-device copy, kernel, copy back).
    With ``host_register`` the Arrow buffer itself is page-locked (cudaHostRegister) for
    the call and copied from directly, skipping the staging copy.
    """

    def __init__(
        self,
        params: MinHashParams | None = None,
        *,
        chunk_bytes: int = 1 << 28,
        slots: int = 3,
        copy_threads: int = 8,
        host_register: bool = False,
    ) -> None:
        self.params = params or MinHashParams()
        self.word = check_mode(self.params.mode, self.params.ngram)
        self.chunk_bytes = int(chunk_bytes)
        self.slots = max(1, slots)
        self.copy_threads = max(1, copy_threads)
        self.host_register = host_register
        cp = _cupy()
        a, b = permutations(self.params.num_perm, self.params.seed)
        self._a, self._b = cp.asarray(a), cp.asarray(b)
        self._kern = _kernel(self.params.ngram, self.params.num_perm, self.word)
        cp.cuda.Device().synchronize()  # on the device before kernels on other streams read them

    # ---------------------------------------------------------------- device-resident input
    def signatures_device(
        self, data: Any, starts: Any, ends: Any, *, base: int = 0, stream: Any = None
    ) -> Any:
        """Signatures (cupy uint32[n, num_perm]) of documents already on the device.

        ``data`` holds bytes ``[base, base + len(data))`` of the original buffer; ``starts``
        and ``ends`` are absolute int64 offsets (device arrays), e.g. a cuDF string column's
        (``gpu_io.column_strings``).
        """
        cp = _cupy()
        with stream if stream is not None else cp.cuda.Stream.null:
            out = cp.full((len(starts), self.params.num_perm), 0xFFFFFFFF, dtype=cp.uint32)
            if len(starts):
                cum = cp.cumsum((ends - starts + (SEGMENT - 1)) // SEGMENT)
                self._launch(data, base, starts, ends, cum, 0, 0, int(cum[-1]), out)
        return out

    def band_hashes_device(
        self, data: Any, starts: Any, ends: Any, *, base: int = 0, stream: Any = None
    ) -> Any:
        """LSH band hashes (cupy uint64[n, bands]) of documents already on the device."""
        from curator.kernels.lsh import band_hashes

        sig = self.signatures_device(data, starts, ends, base=base, stream=stream)
        with stream if stream is not None else _cupy().cuda.Stream.null:
            return band_hashes(sig, self.params.bands, self.params.rows)

    def _launch(
        self,
        data: Any,
        base: int,
        starts: Any,
        ends: Any,
        cum: Any,
        doc0: int,
        seg0: int,
        nseg: int,
        out: Any,
    ) -> None:
        """Hash segments ``[seg0, seg0 + nseg)`` on the current stream into ``out`` (whose
        first row is document ``doc0``); ``cum`` is the segment count up to each document."""
        max_grid = 2**31 - 1
        for lo in range(0, nseg, max_grid):
            self._kern(
                (min(max_grid, nseg - lo),),
                (BLOCK,),
                (
                    data,
                    np.int64(base),
                    starts,
                    ends,
                    cum,
                    np.int64(len(starts)),
                    np.int64(doc0),
                    np.int64(seg0 + lo),
                    self._a,
                    self._b,
                    out,
                ),
            )

    # ---------------------------------------------------------------- host (Arrow) input
    def signatures(self, array: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Signatures ``uint32[n_docs, num_perm]`` (host) of a host Arrow string array."""
        return self._run(array, bands=False)

    def band_hashes(self, array: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """LSH band hashes ``uint64[n_docs, bands]`` (host); only these leave the device."""
        return self._run(array, bands=True)

    def _run(self, array: pa.Array | pa.ChunkedArray, bands: bool) -> np.ndarray:
        from curator.kernels.lsh import band_hashes

        cp = _cupy()
        buf = string_buffers(array)
        n = len(buf.starts)
        if n and int(buf.ends.max()) - int(buf.starts.min()) <= self.chunk_bytes:
            return self._run_whole(buf, bands)
        width = self.params.bands if bands else self.params.num_perm
        dtype = np.uint64 if bands else np.uint32
        result = np.empty((n, width), dtype)
        if n == 0:
            return result
        chunks = _plan_chunks(buf.starts, buf.ends, self.chunk_bytes)
        cum_host = _segment_cum(buf.starts, buf.ends)
        starts_d, ends_d = cp.asarray(buf.starts), cp.asarray(buf.ends)
        cum_d = cp.asarray(cum_host)
        # The kernels run on non-blocking streams, which do not wait for the default stream:
        # make sure these offsets are on the device before any kernel reads them.
        cp.cuda.Stream.null.synchronize()
        cap = max(int(buf.ends[d1 - 1] - buf.starts[d0]) for d0, d1 in chunks) + 1
        rows_cap = max(d1 - d0 for d0, d1 in chunks)
        staged = not self.host_register
        slots = [
            _Slot(cp, cap, rows_cap, width, dtype, staged)
            for _ in range(min(self.slots, len(chunks)))
        ]
        pool = ThreadPoolExecutor(self.copy_threads)
        host_ptr = buf.data.ctypes.data
        if not staged:
            cp.cuda.runtime.hostRegister(host_ptr, buf.data.nbytes, 0)
        try:
            for i, (d0, d1) in enumerate(chunks):
                slot = slots[i % len(slots)]
                slot.finish(result, pool, self.copy_threads)  # this slot's previous chunk
                lo, hi = int(buf.starts[d0]), int(buf.ends[d1 - 1])
                if staged:
                    _parallel_copy(
                        slot.host_in[: hi - lo], buf.data[lo:hi], pool, self.copy_threads
                    )
                with slot.stream:
                    if staged:
                        slot.dev_in[: hi - lo].set(slot.host_in[: hi - lo], stream=slot.stream)
                    elif hi > lo:
                        cp.cuda.runtime.memcpyAsync(
                            slot.dev_in.data.ptr, host_ptr + lo, hi - lo, 1, slot.stream.ptr
                        )
                    sig = cp.full((d1 - d0, self.params.num_perm), 0xFFFFFFFF, dtype=cp.uint32)
                    seg0 = int(cum_host[d0 - 1]) if d0 else 0
                    nseg = int(cum_host[d1 - 1]) - seg0
                    self._launch(slot.dev_in, lo, starts_d, ends_d, cum_d, d0, seg0, nseg, sig)
                    res = band_hashes(sig, self.params.bands, self.params.rows) if bands else sig
                    res.get(out=slot.host_out[: d1 - d0], stream=slot.stream, blocking=False)
                slot.pending = (d0, d1)
            for slot in slots:
                slot.finish(result, pool, self.copy_threads)
        finally:
            pool.shutdown()
            if not staged:
                for slot in slots:
                    slot.stream.synchronize()
                cp.cuda.runtime.hostUnregister(host_ptr)
        return result

    def _run_whole(self, buf: Any, bands: bool) -> np.ndarray:
        """Text that fits one chunk (a dataset part): copied over once, through the thread's
        own pinned buffer (``host_staging``), and hashed on a stream of this call's own, so
        that calls from several threads (parts in flight) overlap."""
        from curator.kernels.lsh import band_hashes

        cp = _cupy()
        lo, hi = int(buf.starts.min()), int(buf.ends.max())
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:
            data = to_device(buf.data[lo:max(hi, lo + 1)], stream)
            starts, ends = cp.asarray(buf.starts), cp.asarray(buf.ends)
            sig = self.signatures_device(data, starts, ends, base=lo, stream=stream)
            out = band_hashes(sig, self.params.bands, self.params.rows) if bands else sig
            return out.get(stream=stream)


def _plan_chunks(starts: np.ndarray, ends: np.ndarray, chunk_bytes: int) -> list[tuple[int, int]]:
    """Contiguous document ranges of about ``chunk_bytes`` (a larger document stands alone)."""
    cum = np.cumsum(ends - starts)
    chunks: list[tuple[int, int]] = []
    d0, n, done = 0, len(starts), 0
    while d0 < n:
        d1 = int(np.searchsorted(cum, done + chunk_bytes, side="right"))
        d1 = max(d1, d0 + 1)
        chunks.append((d0, d1))
        done = int(cum[d1 - 1])
        d0 = d1
    return chunks


def _parallel_copy(
    dst: np.ndarray, src: np.ndarray, pool: ThreadPoolExecutor, threads: int
) -> None:
    """memcpy ``src`` into ``dst`` on several threads (numpy releases the GIL while copying)."""
    size = len(src)
    parts = max(1, min(threads, size >> 22))  # >= 4 MiB per part
    edges = np.linspace(0, size, parts + 1).astype(np.int64)
    list(
        pool.map(
            lambda i: np.copyto(dst[edges[i] : edges[i + 1]], src[edges[i] : edges[i + 1]]),
            range(parts),
        )
    )


class _Slot:
    """Pinned host buffers, device buffer and stream for one chunk in flight."""

    def __init__(self, cp: Any, cap: int, rows: int, width: int, dtype: Any, staged: bool) -> None:
        import cupyx

        self.stream = cp.cuda.Stream(non_blocking=True)
        self.host_in = cupyx.empty_pinned((cap,), np.uint8) if staged else None
        self.dev_in = cp.empty((cap,), cp.uint8)
        self.host_out = cupyx.empty_pinned((rows, width), dtype)
        self.pending: tuple[int, int] | None = None

    def finish(self, result: np.ndarray, pool: ThreadPoolExecutor, threads: int) -> None:
        """Wait for this slot's chunk and copy its rows out (on ``threads`` threads: a single
        thread's copy, page faults of the fresh result included, would hold up the pipeline)."""
        if self.pending is None:
            return
        self.stream.synchronize()
        d0, d1 = self.pending
        rows = self.host_out[: d1 - d0]
        _parallel_copy(result[d0:d1].reshape(-1).view(np.uint8), rows.reshape(-1).view(np.uint8),
                       pool, threads)
        self.pending = None

