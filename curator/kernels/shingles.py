"""Shingle hashing over Arrow string buffers (CPU, numba).

The hash is specified bit for bit so that the CPU kernels here and the CuPy kernels in
``minhash_gpu`` agree exactly. All arithmetic is on unsigned 64-bit integers modulo 2**64.

Decoding (never fails): a code point starts at the document's first byte and at every byte
that is not a UTF-8 continuation byte (``0b10xxxxxx``). Its value is the lead byte's payload
(``b`` if ``b < 0x80``, ``b & 0x1F`` if ``b < 0xE0``, ``b & 0x0F`` if ``b < 0xF0``, else
``b & 0x07``) followed by ``(v << 6) | (c & 0x3F)`` for each continuation byte ``c`` up to
the next start, truncated to 32 bits. For valid UTF-8 this is ordinary decoding.

``fmix64`` is MurmurHash3's 64-bit finaliser; ``poly(x_0..x_{L-1}; B) = sum x_i * B**(L-1-i)``.

* ``char`` mode: the shingles of a document of ``m`` code points ``c`` are the windows of
  ``n`` consecutive code points (no normalisation); the hash of a window is
  ``fmix64(poly(c; CHAR_BASE) + L)`` with ``L`` its length. A document shorter than ``n``
  (but not empty) has exactly one shingle: the whole document.
* ``word`` mode: tokens are maximal runs of code points that are not separators (Unicode
  White_Space, C0 controls and DEL, ASCII punctuation, General Punctuation U+2010-U+205F,
  CJK Symbols and Punctuation U+3000-U+303F, fullwidth ASCII punctuation). Tokens are
  lower-cased (ASCII, Latin-1, Greek and basic Cyrillic capitals; see ``_lower``). A token
  hashes to
  ``t = fmix64(poly(lower(c); CHAR_BASE) + L)``; a shingle of ``k`` consecutive tokens to
  ``fmix64(poly(t; WORD_BASE) + k)``. Shingles are ``n`` consecutive tokens, or all tokens
  when a document has fewer than ``n``.
* A document with no shingle (empty, or no token in word mode) has none: its MinHash
  signature is the sentinel (every value ``0xFFFFFFFF``).
"""

from __future__ import annotations

from typing import NamedTuple

import numba as nb
import numpy as np
import pyarrow as pa

CHAR_BASE = np.uint64(0x9E3779B97F4A7C15)
WORD_BASE = np.uint64(0xBF58476D1CE4E5B9)
FMIX_C1 = np.uint64(0xFF51AFD7ED558CCD)
FMIX_C2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
_MASK32 = np.uint64(0xFFFFFFFF)

MODES = ("char", "word")


class StringBuffers(NamedTuple):
    """Zero-copy numpy views of a string array: UTF-8 bytes and per-document byte ranges."""

    data: np.ndarray  # uint8
    starts: np.ndarray  # int64, absolute offsets into data
    ends: np.ndarray  # int64; equal to starts for null entries


def string_buffers(array: pa.Array | pa.ChunkedArray) -> StringBuffers:
    """Expose ``array``'s buffers without creating a Python string per document.

    Accepts ``string``/``large_string`` arrays (other string-like types are cast to
    ``large_string``); a chunked array is combined first. Nulls become empty documents.
    """
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    if not isinstance(array, pa.Array):
        raise TypeError(f"expected a pyarrow string array, found {type(array).__name__}")
    if pa.types.is_string(array.type):
        off_dtype = np.int32
    elif pa.types.is_large_string(array.type):
        off_dtype = np.int64
    elif pa.types.is_string_view(array.type) or pa.types.is_binary(array.type):
        return string_buffers(array.cast(pa.large_string()))
    else:
        raise TypeError(f"expected a string array, found type {array.type}")
    n = len(array)
    _validity, off_buf, data_buf = array.buffers()[:3]
    offsets = np.frombuffer(off_buf, dtype=off_dtype, count=array.offset + n + 1)
    offsets = offsets[array.offset :].astype(np.int64, copy=False)
    data = (
        np.frombuffer(data_buf, dtype=np.uint8)
        if data_buf is not None and data_buf.size
        else np.zeros(1, np.uint8)
    )
    starts, ends = offsets[:-1], offsets[1:]
    if array.null_count:
        valid = array.is_valid().to_numpy(zero_copy_only=False)
        ends = np.where(valid, ends, starts)
    return StringBuffers(data, starts, ends)


# --------------------------------------------------------------------------- primitives


@nb.njit(inline="always", nogil=True)
def fmix64_scalar(x):
    """MurmurHash3's 64-bit finaliser of one uint64 (numba, inlined)."""
    x ^= x >> _S33
    x *= FMIX_C1
    x ^= x >> _S33
    x *= FMIX_C2
    x ^= x >> _S33
    return x


@nb.njit(inline="always", nogil=True)
def _lead_payload(b):
    if b < 0x80:
        return np.uint64(b)
    if b < 0xE0:
        return np.uint64(b & 0x1F)
    if b < 0xF0:
        return np.uint64(b & 0x0F)
    return np.uint64(b & 0x07)


@nb.njit(nogil=True, cache=True)
def _decode(data, start, end, out):
    """Decode data[start:end] into code points (uint32) in ``out``; return their count."""
    m = 0
    i = start
    while i < end:
        v = _lead_payload(data[i])
        i += 1
        while i < end and (data[i] & 0xC0) == 0x80:
            v = ((v << np.uint64(6)) | np.uint64(data[i] & 0x3F)) & _MASK32
            i += 1
        out[m] = v
        m += 1
    return m


@nb.njit(inline="always", nogil=True)
def _is_sep(c):
    if c <= 0x7F:
        return (
            c <= 0x20
            or c == 0x7F
            or (0x21 <= c <= 0x2F)
            or (0x3A <= c <= 0x40)
            or (0x5B <= c <= 0x60)
            or (0x7B <= c <= 0x7E)
        )
    return (
        c == 0x85
        or c == 0xA0
        or c == 0x1680
        or (0x2000 <= c <= 0x200A)
        or (0x2010 <= c <= 0x205F)
        or (0x3000 <= c <= 0x303F)
        or (0xFF01 <= c <= 0xFF0F)
        or (0xFF1A <= c <= 0xFF20)
        or (0xFF3B <= c <= 0xFF40)
        or (0xFF5B <= c <= 0xFF65)
    )


@nb.njit(inline="always", nogil=True)
def _lower(c):
    if 0x41 <= c <= 0x5A:
        return c + 32
    if c >= 0xC0:
        if (0xC0 <= c <= 0xDE and c != 0xD7) or (0x391 <= c <= 0x3AB and c != 0x3A2):
            return c + 32
        if 0x410 <= c <= 0x42F:
            return c + 32
        if 0x400 <= c <= 0x40F:
            return c + 80
    return c


# --------------------------------------------------------------------------- per document


@nb.njit(nogil=True, cache=True)
def _char_shingles(cps, m, n, out):
    """Rolling char n-gram hashes of cps[:m] into ``out``; return the count."""
    if m == 0:
        return 0
    L = n if m >= n else m
    h = np.uint64(0)
    for i in range(L):
        h = h * CHAR_BASE + np.uint64(cps[i])
    top = np.uint64(1)  # CHAR_BASE ** (L - 1)
    for _ in range(L - 1):
        top *= CHAR_BASE
    lu = np.uint64(L)
    out[0] = fmix64_scalar(h + lu)
    for k in range(1, m - L + 1):
        h = (h - np.uint64(cps[k - 1]) * top) * CHAR_BASE + np.uint64(cps[k + L - 1])
        out[k] = fmix64_scalar(h + lu)
    return m - L + 1


@nb.njit(nogil=True, cache=True)
def _tokens(cps, m, out):
    """Hashes of the normalised word tokens of cps[:m] into ``out``; return the count."""
    t = 0
    h = np.uint64(0)
    L = 0
    for i in range(m):
        c = cps[i]
        if _is_sep(c):
            if L:
                out[t] = fmix64_scalar(h + np.uint64(L))
                t += 1
                h = np.uint64(0)
                L = 0
        else:
            h = h * CHAR_BASE + np.uint64(_lower(c))
            L += 1
    if L:
        out[t] = fmix64_scalar(h + np.uint64(L))
        t += 1
    return t


@nb.njit(nogil=True, cache=True)
def _word_shingles(tok, t, n, out):
    """Hashes of n-grams of token hashes tok[:t] into ``out``; return the count."""
    if t == 0:
        return 0
    L = n if t >= n else t
    lu = np.uint64(L)
    for k in range(t - L + 1):
        h = np.uint64(0)
        for i in range(L):
            h = h * WORD_BASE + tok[k + i]
        out[k] = fmix64_scalar(h + lu)
    return t - L + 1


@nb.njit(nogil=True, cache=True)
def doc_shingles(data, start, end, word, n, cps, tok, out):
    """Shingle hashes of one document into ``out`` (scratch ``cps``/``tok``); return count."""
    m = _decode(data, start, end, cps)
    if word:
        t = _tokens(cps, m, tok)
        return _word_shingles(tok, t, n, out)
    return _char_shingles(cps, m, n, out)


# --------------------------------------------------------------------------- batch API


@nb.njit(parallel=True, nogil=True, cache=True)
def _count_kernel(data, starts, ends, word, n, counts):
    for d in nb.prange(len(starts)):
        s, e = starts[d], ends[d]
        size = max(e - s, 1)
        cps = np.empty(size, np.uint32)
        tok = np.empty(size if word else 1, np.uint64)
        out = np.empty(size, np.uint64)
        counts[d] = doc_shingles(data, s, e, word, n, cps, tok, out)


@nb.njit(parallel=True, nogil=True, cache=True)
def _fill_kernel(data, starts, ends, word, n, offsets, hashes):
    for d in nb.prange(len(starts)):
        s, e = starts[d], ends[d]
        size = max(e - s, 1)
        cps = np.empty(size, np.uint32)
        tok = np.empty(size if word else 1, np.uint64)
        doc_shingles(data, s, e, word, n, cps, tok, hashes[offsets[d] : offsets[d + 1]])


def check_mode(mode: str, ngram: int) -> bool:
    """Validate ``mode``/``ngram``; return True for word mode."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, found {mode!r}")
    if ngram < 1:
        raise ValueError(f"ngram must be >= 1, found {ngram}")
    return mode == "word"


def shingle_hashes(
    array: pa.Array | pa.ChunkedArray, ngram: int = 24, mode: str = "char"
) -> tuple[np.ndarray, np.ndarray]:
    """All shingle hashes of every document: ``(offsets[n+1], hashes[uint64])``.

    Document ``d``'s hashes are ``hashes[offsets[d]:offsets[d+1]]`` in shingle order
    (duplicates kept). Meant for ground truth and audits; MinHash never materialises these.
    """
    word = check_mode(mode, ngram)
    buf = string_buffers(array)
    counts = np.zeros(len(buf.starts), np.int64)
    if len(counts):
        _count_kernel(buf.data, buf.starts, buf.ends, word, ngram, counts)
    offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    hashes = np.empty(int(offsets[-1]), np.uint64)
    if len(counts):
        _fill_kernel(buf.data, buf.starts, buf.ends, word, ngram, offsets, hashes)
    return offsets, hashes
