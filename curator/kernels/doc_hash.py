"""XXH3-128 of every document of an Arrow string array (CPU, numba), no Python object per document.

The digest is XXH3-128 with seed 0 and the default secret, as specified by xxHash
(https://github.com/Cyan4973/xxHash/blob/dev/doc/xxhash_spec.md): the value that
``xxhash.xxh3_128_intdigest(b)`` gives for the document's UTF-8 bytes ``b`` (a null document
hashes as the empty one). It is returned as two ``uint64`` arrays, the high and the low half,
which is how ``exact_dedup`` has always split ``xxh3_128_digest`` (big-endian bytes), so the
bulk kernel and the former per-document loop agree bit for bit. ``doc_hash_gpu`` computes the
same function on the GPU.
"""

from __future__ import annotations

import numba as nb
import numpy as np
import pyarrow as pa

from curator.kernels.shingles import string_buffers

#: XXH3's default secret (``XXH3_kSecret``, 192 bytes).
SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
    "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c"
    "3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364"
    "eac5ac8334d3ebc3c581a0fffa1363eb170ddd51b7f0da49d316552629d4689e"
    "2b16be587d47a1fc8ff8b8d17ad031ce45cb3a8f95160428afd7fbcabb4b407e")
#: ``SECRET64[o]`` = the little-endian uint64 at byte ``o`` of the secret (every offset read).
SECRET64 = np.array([int.from_bytes(SECRET[o:o + 8], "little") for o in range(len(SECRET) - 7)],
                    np.uint64)

#: The same as a tuple: numba embeds it as a constant, so a key at a constant offset is an
#: immediate rather than a load (the 16 stripes of a block are written out, see ``_block``).
_SECRET_K = tuple(np.uint64(x) for x in SECRET64)

P32_1 = np.uint64(0x9E3779B1)
P32_2 = np.uint64(0x85EBCA77)
P32_3 = np.uint64(0xC2B2AE3D)
P64_1 = np.uint64(0x9E3779B185EBCA87)
P64_2 = np.uint64(0xC2B2AE3D27D4EB4F)
P64_3 = np.uint64(0x165667B19E3779F9)
P64_4 = np.uint64(0x85EBCA77C2B2AE63)
P64_5 = np.uint64(0x27D4EB2F165667C5)
PRIME_MX1 = np.uint64(0x165667919E3779F9)
PRIME_MX2 = np.uint64(0x9FB21C651E98DF25)
_M32 = np.uint64(0xFFFFFFFF)
_BYTES = np.uint64(0x00FF00FF00FF00FF)
_SHORTS = np.uint64(0x0000FFFF0000FFFF)
_U = tuple(np.uint64(k) for k in range(70))  # unsigned literals: no float promotion in numba


@nb.njit(nogil=True)
def _r64(d, p):
    # Unsigned indices (no negative-index branch): LLVM combines the byte loads into one load.
    return (np.uint64(d[p]) | (np.uint64(d[p + _U[1]]) << _U[8])
            | (np.uint64(d[p + _U[2]]) << _U[16]) | (np.uint64(d[p + _U[3]]) << _U[24])
            | (np.uint64(d[p + _U[4]]) << _U[32]) | (np.uint64(d[p + _U[5]]) << _U[40])
            | (np.uint64(d[p + _U[6]]) << _U[48]) | (np.uint64(d[p + _U[7]]) << _U[56]))


@nb.njit(nogil=True)
def _r32(d, p):
    return (np.uint64(d[p]) | (np.uint64(d[p + _U[1]]) << _U[8])
            | (np.uint64(d[p + _U[2]]) << _U[16]) | (np.uint64(d[p + _U[3]]) << _U[24]))


@nb.njit(nogil=True)
def _mul128(a, b):
    """(high, low) 64-bit halves of the 128-bit product a * b."""
    a_lo, a_hi = a & _M32, a >> _U[32]
    b_lo, b_hi = b & _M32, b >> _U[32]
    lo_lo = a_lo * b_lo
    hi_lo = a_hi * b_lo
    lo_hi = a_lo * b_hi
    cross = (lo_lo >> _U[32]) + (hi_lo & _M32) + lo_hi
    high = (hi_lo >> _U[32]) + (cross >> _U[32]) + a_hi * b_hi
    return high, (cross << _U[32]) | (lo_lo & _M32)


@nb.njit(nogil=True)
def _fold(a, b):
    high, low = _mul128(a, b)
    return high ^ low


@nb.njit(nogil=True)
def _avalanche(h):
    h ^= h >> _U[37]
    h *= PRIME_MX1
    return h ^ (h >> _U[32])


@nb.njit(nogil=True)
def _avalanche_xxh64(h):
    h ^= h >> _U[33]
    h *= P64_2
    h ^= h >> _U[29]
    h *= P64_3
    return h ^ (h >> _U[32])


@nb.njit(nogil=True)
def _bswap64(x):
    x = ((x & _BYTES) << _U[8]) | ((x >> _U[8]) & _BYTES)
    x = ((x & _SHORTS) << _U[16]) | ((x >> _U[16]) & _SHORTS)
    return (x << _U[32]) | (x >> _U[32])


@nb.njit(nogil=True)
def _mix16(d, p, k, o):
    return _fold(_r64(d, p) ^ k[o], _r64(d, p + _U[8]) ^ k[o + _U[8]])


@nb.njit(nogil=True)
def _mix32(lo, hi, d, p1, p2, k, o):
    lo += _mix16(d, p1, k, o)
    lo ^= _r64(d, p2) + _r64(d, p2 + _U[8])
    hi += _mix16(d, p2, k, o + 16)
    hi ^= _r64(d, p1) + _r64(d, p1 + _U[8])
    return lo, hi


@nb.njit(nogil=True)
def _len_0to16(d, p, n, k):
    if n > _U[8]:
        bitflipl = k[32] ^ k[40]
        bitfliph = k[48] ^ k[56]
        ll1 = _r64(d, p)
        ll2 = _r64(d, p + n - _U[8])
        m_hi, m_lo = _mul128(ll1 ^ ll2 ^ bitflipl, P64_1)
        m_lo += (n - _U[1]) << _U[54]
        ll2 ^= bitfliph
        m_hi += ll2 + (ll2 & _M32) * (P32_2 - _U[1])
        m_lo ^= _bswap64(m_hi)
        h_hi, h_lo = _mul128(m_lo, P64_2)
        h_hi += m_hi * P64_2
        return _avalanche(h_hi), _avalanche(h_lo)
    if n >= _U[4]:
        l64 = _r32(d, p) | (_r32(d, p + n - _U[4]) << _U[32])
        m_hi, m_lo = _mul128(l64 ^ (k[16] ^ k[24]), P64_1 + (n << _U[2]))
        m_hi += m_lo << _U[1]
        m_lo ^= m_hi >> _U[3]
        m_lo ^= m_lo >> _U[35]
        m_lo *= PRIME_MX2
        m_lo ^= m_lo >> _U[28]
        return _avalanche(m_hi), m_lo
    if n > _U[0]:
        c1 = np.uint64(d[p])
        c2 = np.uint64(d[p + (n >> _U[1])])
        c3 = np.uint64(d[p + n - _U[1]])
        combinedl = (c1 << _U[16]) | (c2 << _U[24]) | c3 | (n << _U[8])
        swapped = ((combinedl & np.uint64(0xFF)) << _U[24]) \
            | ((combinedl & np.uint64(0xFF00)) << _U[8]) \
            | ((combinedl >> _U[8]) & np.uint64(0xFF00)) | (combinedl >> _U[24])
        combinedh = ((swapped << _U[13]) | (swapped >> _U[19])) & _M32
        bitflipl = (k[0] & _M32) ^ (k[4] & _M32)
        bitfliph = (k[8] & _M32) ^ (k[12] & _M32)
        return _avalanche_xxh64(combinedh ^ bitfliph), _avalanche_xxh64(combinedl ^ bitflipl)
    return _avalanche_xxh64(k[80] ^ k[88]), _avalanche_xxh64(k[64] ^ k[72])


@nb.njit(nogil=True)
def _finish_mid(lo, hi, n):
    h_lo = _avalanche(lo + hi)
    h_hi = lo * P64_1 + hi * P64_4 + n * P64_2
    return _U[0] - _avalanche(h_hi), h_lo


@nb.njit(nogil=True)
def _len_17to240(d, p, n, k):
    lo = n * P64_1
    hi = _U[0]
    if n <= np.uint64(128):
        if n > _U[32]:
            if n > _U[64]:
                if n > np.uint64(96):
                    lo, hi = _mix32(lo, hi, d, p + _U[48], p + n - _U[64], k, 96)
                lo, hi = _mix32(lo, hi, d, p + _U[32], p + n - _U[48], k, 64)
            lo, hi = _mix32(lo, hi, d, p + _U[16], p + n - _U[32], k, 32)
        lo, hi = _mix32(lo, hi, d, p, p + n - _U[16], k, 0)
        return _finish_mid(lo, hi, n)
    rounds = n // _U[32]
    for i in range(4):
        q = p + np.uint64(32 * i)
        lo, hi = _mix32(lo, hi, d, q, q + _U[16], k, 32 * i)
    lo, hi = _avalanche(lo), _avalanche(hi)
    for i in range(4, rounds):
        q = p + np.uint64(32 * i)
        lo, hi = _mix32(lo, hi, d, q, q + _U[16], k, 3 + 32 * (i - 4))
    lo, hi = _mix32(lo, hi, d, p + n - _U[16], p + n - _U[32], k, 136 - 17 - 16)
    return _finish_mid(lo, hi, n)


@nb.njit(nogil=True)
def _lane(a, v, w, key):
    """One accumulator lane of a stripe: a += the neighbour lane's input w + lo32 * hi32."""
    x = v ^ key
    return a + w + (x & _M32) * (x >> _U[32])


@nb.njit(nogil=True)
def _stripes(a, d, q, count, k, o):
    """Accumulate ``count`` stripes of 64 bytes from ``d[q:]`` with secret offsets o, o+8, ..."""
    a0, a1, a2, a3, a4, a5, a6, a7 = a
    o = np.uint64(o)  # unsigned: no negative-index branch on the secret's loads
    for _ in range(count):
        v0, v1, v2, v3 = _r64(d, q), _r64(d, q + _U[8]), _r64(d, q + _U[16]), _r64(d, q + _U[24])
        v4, v5, v6, v7 = (_r64(d, q + _U[32]), _r64(d, q + _U[40]), _r64(d, q + _U[48]),
                          _r64(d, q + _U[56]))
        a0 = _lane(a0, v0, v1, k[o])
        a1 = _lane(a1, v1, v0, k[o + _U[8]])
        a2 = _lane(a2, v2, v3, k[o + _U[16]])
        a3 = _lane(a3, v3, v2, k[o + _U[24]])
        a4 = _lane(a4, v4, v5, k[o + _U[32]])
        a5 = _lane(a5, v5, v4, k[o + _U[40]])
        a6 = _lane(a6, v6, v7, k[o + _U[48]])
        a7 = _lane(a7, v7, v6, k[o + _U[56]])
        q += _U[64]
        o += _U[8]
    return (a0, a1, a2, a3, a4, a5, a6, a7), q


@nb.njit(nogil=True)
def _stripe(a, d, q, o):
    """One 64-byte stripe at ``d[q:]`` with the secret at the constant offset ``o``."""
    a0, a1, a2, a3, a4, a5, a6, a7 = a
    v0, v1, v2, v3 = _r64(d, q), _r64(d, q + _U[8]), _r64(d, q + _U[16]), _r64(d, q + _U[24])
    v4, v5, v6, v7 = (_r64(d, q + _U[32]), _r64(d, q + _U[40]), _r64(d, q + _U[48]),
                      _r64(d, q + _U[56]))
    k = _SECRET_K
    return (_lane(a0, v0, v1, k[o]), _lane(a1, v1, v0, k[o + 8]), _lane(a2, v2, v3, k[o + 16]),
            _lane(a3, v3, v2, k[o + 24]), _lane(a4, v4, v5, k[o + 32]),
            _lane(a5, v5, v4, k[o + 40]), _lane(a6, v6, v7, k[o + 48]),
            _lane(a7, v7, v6, k[o + 56]))


@nb.njit(nogil=True)
def _block(a, d, q):
    """A whole block (16 stripes, secret offsets 0, 8, ..., 120) written out: constant keys."""
    a = _stripe(a, d, q, 0)
    a = _stripe(a, d, q + _U[64], 8)
    a = _stripe(a, d, q + np.uint64(128), 16)
    a = _stripe(a, d, q + np.uint64(192), 24)
    a = _stripe(a, d, q + np.uint64(256), 32)
    a = _stripe(a, d, q + np.uint64(320), 40)
    a = _stripe(a, d, q + np.uint64(384), 48)
    a = _stripe(a, d, q + np.uint64(448), 56)
    a = _stripe(a, d, q + np.uint64(512), 64)
    a = _stripe(a, d, q + np.uint64(576), 72)
    a = _stripe(a, d, q + np.uint64(640), 80)
    a = _stripe(a, d, q + np.uint64(704), 88)
    a = _stripe(a, d, q + np.uint64(768), 96)
    a = _stripe(a, d, q + np.uint64(832), 104)
    a = _stripe(a, d, q + np.uint64(896), 112)
    a = _stripe(a, d, q + np.uint64(960), 120)
    return a, q + np.uint64(1024)


@nb.njit(nogil=True)
def _scramble1(x, key):
    x ^= x >> _U[47]
    return (x ^ key) * P32_1


@nb.njit(nogil=True)
def _scramble(a, k):
    return (_scramble1(a[0], k[128]), _scramble1(a[1], k[136]), _scramble1(a[2], k[144]),
            _scramble1(a[3], k[152]), _scramble1(a[4], k[160]), _scramble1(a[5], k[168]),
            _scramble1(a[6], k[176]), _scramble1(a[7], k[184]))


@nb.njit(nogil=True)
def _long(d, p, n, k):
    a = (P32_3, P64_1, P64_2, P64_3, P64_4, P32_2, P64_5, P32_1)
    blocks = (n - _U[1]) // np.uint64(1024)
    q = p
    for _ in range(blocks):
        a, q = _block(a, d, q)
        a = _scramble(a, k)
    a, q = _stripes(a, d, q, ((p + n - _U[1]) - q) // _U[64], k, 0)
    a, q = _stripes(a, d, p + n - _U[64], 1, k, 192 - 64 - 7)
    lo = n * P64_1
    hi = ~(n * P64_2)
    lo += _fold(a[0] ^ k[11], a[1] ^ k[19]) + _fold(a[2] ^ k[27], a[3] ^ k[35]) \
        + _fold(a[4] ^ k[43], a[5] ^ k[51]) + _fold(a[6] ^ k[59], a[7] ^ k[67])
    hi += _fold(a[0] ^ k[117], a[1] ^ k[125]) + _fold(a[2] ^ k[133], a[3] ^ k[141]) \
        + _fold(a[4] ^ k[149], a[5] ^ k[157]) + _fold(a[6] ^ k[165], a[7] ^ k[173])
    return _avalanche(hi), _avalanche(lo)


@nb.njit(nogil=True, parallel=False, cache=True)
def xxh3_128_kernel(data, starts, ends, secret64, high, low):
    """``high[i], low[i]`` = XXH3-128 of ``data[starts[i]:ends[i]]`` (seed 0, default secret)."""
    for i in range(starts.shape[0]):
        p = np.uint64(starts[i])
        n = np.uint64(ends[i]) - p
        if n <= _U[16]:
            h, l_ = _len_0to16(data, p, n, secret64)
        elif n <= np.uint64(240):
            h, l_ = _len_17to240(data, p, n, secret64)
        else:
            h, l_ = _long(data, p, n, secret64)
        high[i] = h
        low[i] = l_


def doc_hashes(text: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """XXH3-128 of every document of a string/large_string array (sliced or chunked; nulls hash
    as empty) as two ``uint64`` arrays: the high and the low 64 bits."""
    chunks = text.chunks if isinstance(text, pa.ChunkedArray) else [text]
    high, low = np.empty(len(text), np.uint64), np.empty(len(text), np.uint64)
    row = 0
    for chunk in chunks:
        if len(chunk):
            buf = string_buffers(chunk)
            xxh3_128_kernel(buf.data, buf.starts, buf.ends, SECRET64,
                            high[row:row + len(chunk)], low[row:row + len(chunk)])
            row += len(chunk)
    return high, low
