"""XXH3-128 of every document on an NVIDIA GPU (CuPy RawKernel), bit-identical to ``doc_hash``.

One thread per document reads its bytes straight from the Arrow data buffer (copied to the
device once per call, or already there: a cuDF column from ``gpu_io``) and writes the high and
low 64 bits. The hash functions are ``__host__ __device__``: the tests also compile them for
the host with nvcc and compare them with the ``xxhash`` package where no GPU is present.

CuPy is imported lazily: importing this module never needs a GPU.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import pyarrow as pa

from curator.kernels.doc_hash import SECRET
from curator.kernels.host_staging import to_device
from curator.kernels.shingles import string_buffers

BLOCK = 256

#: The hash (``xxh3_128``) and the kernel; ``HD`` is ``__host__ __device__`` under nvcc.
SOURCE = r"""
typedef unsigned long long u64;
typedef unsigned int u32;
#ifndef HD
#define HD __host__ __device__ __forceinline__
#endif
#define P32_1 0x9E3779B1ULL
#define P32_2 0x85EBCA77ULL
#define P32_3 0xC2B2AE3DULL
#define P64_1 0x9E3779B185EBCA87ULL
#define P64_2 0xC2B2AE3D27D4EB4FULL
#define P64_3 0x165667B19E3779F9ULL
#define P64_4 0x85EBCA77C2B2AE63ULL
#define P64_5 0x27D4EB2F165667C5ULL
#define PRIME_MX1 0x165667919E3779F9ULL
#define PRIME_MX2 0x9FB21C651E98DF25ULL

HD u64 r64(const unsigned char* p) {
    u64 v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}
HD u64 r32(const unsigned char* p) {
    return (u64)p[0] | ((u64)p[1] << 8) | ((u64)p[2] << 16) | ((u64)p[3] << 24);
}
HD void mul128(u64 a, u64 b, u64* hi, u64* lo) {
#ifdef __CUDA_ARCH__
    *hi = __umul64hi(a, b);
#else
    *hi = (u64)(((unsigned __int128)a * b) >> 64);
#endif
    *lo = a * b;
}
HD u64 fold(u64 a, u64 b) { u64 h, l; mul128(a, b, &h, &l); return h ^ l; }
HD u64 avalanche(u64 h) { h ^= h >> 37; h *= PRIME_MX1; return h ^ (h >> 32); }
HD u64 avalanche64(u64 h) {
    h ^= h >> 33; h *= P64_2; h ^= h >> 29; h *= P64_3; return h ^ (h >> 32);
}
HD u64 bswap64(u64 x) {
    x = ((x & 0x00FF00FF00FF00FFULL) << 8) | ((x >> 8) & 0x00FF00FF00FF00FFULL);
    x = ((x & 0x0000FFFF0000FFFFULL) << 16) | ((x >> 16) & 0x0000FFFF0000FFFFULL);
    return (x << 32) | (x >> 32);
}
HD u64 mix16(const unsigned char* d, const unsigned char* k) {
    return fold(r64(d) ^ r64(k), r64(d + 8) ^ r64(k + 8));
}
HD void mix32(u64* lo, u64* hi, const unsigned char* a, const unsigned char* b,
              const unsigned char* k) {
    *lo += mix16(a, k);
    *lo ^= r64(b) + r64(b + 8);
    *hi += mix16(b, k + 16);
    *hi ^= r64(a) + r64(a + 8);
}
HD void finish_mid(u64 lo, u64 hi, u64 n, u64* out_hi, u64* out_lo) {
    *out_lo = avalanche(lo + hi);
    *out_hi = 0ULL - avalanche(lo * P64_1 + hi * P64_4 + n * P64_2);
}
HD void xxh3_128(const unsigned char* d, u64 n, const unsigned char* k, u64* out_hi,
                 u64* out_lo) {
    if (n <= 16) {
        if (n > 8) {
            u64 ll1 = r64(d), ll2 = r64(d + n - 8);
            u64 m_hi, m_lo;
            mul128(ll1 ^ ll2 ^ (r64(k + 32) ^ r64(k + 40)), P64_1, &m_hi, &m_lo);
            m_lo += (n - 1) << 54;
            ll2 ^= r64(k + 48) ^ r64(k + 56);
            m_hi += ll2 + (ll2 & 0xFFFFFFFFULL) * (P32_2 - 1);
            m_lo ^= bswap64(m_hi);
            u64 h_hi, h_lo;
            mul128(m_lo, P64_2, &h_hi, &h_lo);
            h_hi += m_hi * P64_2;
            *out_hi = avalanche(h_hi); *out_lo = avalanche(h_lo);
        } else if (n >= 4) {
            u64 l64 = r32(d) | (r32(d + n - 4) << 32);
            u64 m_hi, m_lo;
            mul128(l64 ^ (r64(k + 16) ^ r64(k + 24)), P64_1 + (n << 2), &m_hi, &m_lo);
            m_hi += m_lo << 1;
            m_lo ^= m_hi >> 3;
            m_lo ^= m_lo >> 35; m_lo *= PRIME_MX2; m_lo ^= m_lo >> 28;
            *out_hi = avalanche(m_hi); *out_lo = m_lo;
        } else if (n > 0) {
            u32 cl = ((u32)d[0] << 16) | ((u32)d[n >> 1] << 24) | (u32)d[n - 1] | ((u32)n << 8);
            u32 sw = (cl << 24) | ((cl & 0xFF00u) << 8) | ((cl >> 8) & 0xFF00u) | (cl >> 24);
            u32 ch = (sw << 13) | (sw >> 19);
            *out_lo = avalanche64((u64)cl ^ (u64)(r32(k) ^ r32(k + 4)));
            *out_hi = avalanche64((u64)ch ^ (u64)(r32(k + 8) ^ r32(k + 12)));
        } else {
            *out_lo = avalanche64(r64(k + 64) ^ r64(k + 72));
            *out_hi = avalanche64(r64(k + 80) ^ r64(k + 88));
        }
        return;
    }
    if (n <= 240) {
        u64 lo = n * P64_1, hi = 0;
        if (n <= 128) {
            if (n > 32) {
                if (n > 64) {
                    if (n > 96) mix32(&lo, &hi, d + 48, d + n - 64, k + 96);
                    mix32(&lo, &hi, d + 32, d + n - 48, k + 64);
                }
                mix32(&lo, &hi, d + 16, d + n - 32, k + 32);
            }
            mix32(&lo, &hi, d, d + n - 16, k);
        } else {
            const u64 rounds = n / 32;
            for (u64 i = 0; i < 4; ++i) mix32(&lo, &hi, d + 32 * i, d + 32 * i + 16, k + 32 * i);
            lo = avalanche(lo); hi = avalanche(hi);
            for (u64 i = 4; i < rounds; ++i)
                mix32(&lo, &hi, d + 32 * i, d + 32 * i + 16, k + 3 + 32 * (i - 4));
            mix32(&lo, &hi, d + n - 16, d + n - 32, k + 136 - 17 - 16);
        }
        finish_mid(lo, hi, n, out_hi, out_lo);
        return;
    }
    u64 acc[8] = {P32_3, P64_1, P64_2, P64_3, P64_4, P32_2, P64_5, P32_1};
    const u64 blocks = (n - 1) / 1024;
    const unsigned char* q = d;
    for (u64 b = 0; b <= blocks; ++b) {
        /* whole blocks: 16 stripes then a scramble; the last (partial) block: no scramble */
        const u64 stripes = b < blocks ? 16 : ((u64)(d + n - 1 - q)) / 64;
        for (u64 s = 0; s < stripes; ++s, q += 64) {
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const u64 v = r64(q + 8 * i), x = v ^ r64(k + 8 * s + 8 * i);
                acc[i ^ 1] += v;
                acc[i] += (x & 0xFFFFFFFFULL) * (x >> 32);
            }
        }
        if (b < blocks) {
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                u64 a = acc[i];
                a ^= a >> 47; a ^= r64(k + 128 + 8 * i); acc[i] = a * P32_1;
            }
        }
    }
    q = d + n - 64;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const u64 v = r64(q + 8 * i), x = v ^ r64(k + 121 + 8 * i);
        acc[i ^ 1] += v;
        acc[i] += (x & 0xFFFFFFFFULL) * (x >> 32);
    }
    u64 lo = n * P64_1, hi = ~(n * P64_2);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        lo += fold(acc[2 * i] ^ r64(k + 11 + 16 * i), acc[2 * i + 1] ^ r64(k + 19 + 16 * i));
        hi += fold(acc[2 * i] ^ r64(k + 117 + 16 * i), acc[2 * i + 1] ^ r64(k + 125 + 16 * i));
    }
    *out_hi = avalanche(hi); *out_lo = avalanche(lo);
}

#ifdef __CUDACC__
extern "C" __global__ void xxh3_128_docs(const unsigned char* __restrict__ data, long long base,
                                         const long long* __restrict__ starts,
                                         const long long* __restrict__ ends, long long n,
                                         const unsigned char* __restrict__ secret,
                                         u64* __restrict__ high, u64* __restrict__ low) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    u64 h, l;
    xxh3_128(data + (starts[i] - base), (u64)(ends[i] - starts[i]), secret, &h, &l);
    high[i] = h; low[i] = l;
}
#endif
"""


def _cupy() -> Any:
    import cupy

    return cupy


@cache
def _kernel() -> Any:
    return _cupy().RawKernel(SOURCE, "xxh3_128_docs", options=("-std=c++17",))


@cache
def _secret() -> Any:
    secret = _cupy().asarray(np.frombuffer(SECRET, np.uint8))
    _cupy().cuda.Device().synchronize()  # there before a kernel on another stream reads it
    return secret


def doc_hashes_device(data: Any, starts: Any, ends: Any, base: int = 0) -> tuple[Any, Any]:
    """XXH3-128 (cupy uint64 high, low) of documents already on the device: ``data`` holds
    bytes ``[base, base + len(data))`` of the buffer, ``starts``/``ends`` absolute int64
    offsets (e.g. ``gpu_io.DeviceStrings``)."""
    cp = _cupy()
    n = len(starts)
    high, low = cp.empty(n, cp.uint64), cp.empty(n, cp.uint64)
    if n:
        _kernel()(((n + BLOCK - 1) // BLOCK,), (BLOCK,),
                  (data, np.int64(base), starts, ends, np.int64(n), _secret(), high, low))
    return high, low


def doc_hashes_gpu(text: pa.Array | pa.ChunkedArray,
                   normalise: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
    """``doc_hash.doc_hashes`` on the GPU: the host Arrow buffers are copied over once. With
    ``normalise``, of ``exact.normalise_text(text)``, normalised on the device
    (``normalise_gpu``); None when a document is not valid UTF-8 (normalise on the CPU then)."""
    cp = _cupy()
    chunks = text.chunks if isinstance(text, pa.ChunkedArray) else [text]
    highs, lows = [], []
    stream = cp.cuda.Stream(non_blocking=True)  # this call's own: calls in threads overlap
    for chunk in chunks:
        if len(chunk):
            buf = string_buffers(chunk)
            lo, hi = (int(buf.starts.min()), int(buf.ends.max())) if len(buf.starts) else (0, 0)
            with stream:
                device = (to_device(buf.data[lo:max(hi, lo + 1)], stream), cp.asarray(buf.starts),
                          cp.asarray(buf.ends), lo)
                if normalise:
                    from curator.kernels.normalise_gpu import normalise_device

                    normalised = normalise_device(*device)
                    if normalised is None:
                        return None
                    device = (*normalised, 0)
                high, low = doc_hashes_device(*device)
                highs.append(high.get(stream=stream))
                lows.append(low.get(stream=stream))
    if not highs:
        return np.empty(0, np.uint64), np.empty(0, np.uint64)
    return np.concatenate(highs), np.concatenate(lows)
