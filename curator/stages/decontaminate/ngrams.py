"""N-gram hashing of task texts and matching of documents (numba, over Arrow string buffers).

A text is decoded from UTF-8 and normalised with the tables of ``normalise`` into units (words,
or characters in character mode). A unit hashes to ``fmix64(FNV-1a over its code points)``; an
n-gram of units ``u_0..u_{m-1}`` to ``sum u_k * B**(m-1-k) mod 2**64`` with a base ``B`` per
mode. With prefix sums ``P`` over a document any window's hash is ``P[j] - P[j-m] * B**m``, so a
document is hashed once and checked for n-grams of every length in one pass.

Keys: a task text of at least ``n`` units gives its n-grams (``long`` keys); a shorter one is
used whole from its own least length on (its task's minimum: a ``short`` key, found through the
hash of its last ``min`` units, ``min`` being the least length of any text of that mode, then
checked at its full length); shorter texts are left out. Modes: 0 words, 1 characters, 2 decide
per text (mostly CJK ideographs or kana → characters).
"""

from __future__ import annotations

import numba as nb
import numpy as np

from curator.kernels.shingles import fmix64_scalar
from curator.stages.decontaminate.normalise import IGNORABLE, LETTER, MARK, SEPARATOR

WORD, CHAR, AUTO = 0, 1, 2
FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)
BASES = np.array([0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9], dtype=np.uint64)  # word, char
_S21 = np.uint64(21)


def powers(n_max: int) -> np.ndarray:
    """``B**m`` for both bases and ``m`` in ``0..n_max`` (uint64[2, n_max + 1])."""
    out = np.ones((2, n_max + 1), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for m in range(1, n_max + 1):
            out[:, m] = out[:, m - 1] * BASES
    return out


# ------------------------------------------------------------------------------ primitives
@nb.njit(inline="always", nogil=True)
def _decode(data, i, end):
    """The code point starting at ``data[i]`` and the index after it (U+FFFD if invalid)."""
    b = data[i]
    if b < 0x80:
        return np.int64(b), i + 1
    if b < 0xC0:
        return np.int64(0xFFFD), i + 1
    if b < 0xE0:
        length, cp = 2, np.int64(b & 0x1F)
    elif b < 0xF0:
        length, cp = 3, np.int64(b & 0x0F)
    else:
        length, cp = 4, np.int64(b & 0x07)
    if i + length > end:
        return np.int64(0xFFFD), end
    for k in range(1, length):
        cp = (cp << 6) | np.int64(data[i + k] & 0x3F)
    if cp >= 0x110000:
        cp = np.int64(0xFFFD)
    return cp, i + length


@nb.njit(inline="always", nogil=True)
def _is_cjk(cp):
    return (0x3040 <= cp <= 0x30FF or 0x31F0 <= cp <= 0x31FF or 0x3400 <= cp <= 0x4DBF
            or 0x4E00 <= cp <= 0x9FFF or 0xF900 <= cp <= 0xFAFF or 0xFF66 <= cp <= 0xFF9F
            or 0x20000 <= cp <= 0x3FFFF)


@nb.njit(inline="always", nogil=True)
def _compose(keys, values, base, mark):
    """The NFC composite of ``base`` + ``mark``, or -1."""
    key = (np.uint64(base) << _S21) | np.uint64(mark)
    k = np.searchsorted(keys, key)
    if k < len(keys) and keys[k] == key:
        return np.int64(values[k])
    return np.int64(-1)


@nb.njit(inline="always", nogil=True)
def _char_hash(cp):
    return fmix64_scalar((FNV_OFFSET ^ np.uint64(cp)) * FNV_PRIME)


@nb.njit(nogil=True, cache=True)
def _mostly_cjk(data, start, end, kinds, threshold):
    letters = 0
    cjk = 0
    i = start
    while i < end:
        cp, i = _decode(data, i, end)
        if kinds[cp] == LETTER:
            letters += 1
            if _is_cjk(cp):
                cjk += 1
    return letters > 0 and cjk >= threshold * letters


@nb.njit(nogil=True, cache=True)
def resolve_modes(data, starts, ends, modes, kinds, threshold):
    """Each text's mode, ``AUTO`` resolved by its script."""
    out = modes.copy()
    for t in range(len(starts)):
        if out[t] == AUTO:
            out[t] = CHAR if _mostly_cjk(data, starts[t], ends[t], kinds, threshold) else WORD
    return out


@nb.njit(nogil=True, cache=True)
def _units(data, start, end, char_mode, mapping, exp_off, exp_pts, kinds, comp_keys, comp_vals,
           out_hash, out_start, out_end):
    """Units of ``data[start:end]``: hash, first and past-last code point index; their count."""
    n = 0
    ci = -1
    i = start
    in_word = False
    h = FNV_OFFSET
    h_before = FNV_OFFSET
    last = np.int64(-1)
    while i < end:
        cp, i = _decode(data, i, end)
        ci += 1
        m = mapping[cp]
        if m >= 0:
            lo, hi = -1, 0
        else:
            lo, hi = exp_off[-m - 1], exp_off[-m]
        while lo < hi:
            o = np.int64(m) if lo == -1 else np.int64(exp_pts[lo])
            lo += 1
            kind = kinds[o]
            if kind == IGNORABLE:
                continue
            if kind == SEPARATOR:
                if in_word:
                    out_hash[n] = fmix64_scalar(h)
                    n += 1
                    in_word = False
                last = -1
                continue
            if kind == MARK and last >= 0:
                composite = _compose(comp_keys, comp_vals, last, o)
                if composite >= 0:
                    if char_mode:
                        out_hash[n - 1] = _char_hash(composite)
                        out_end[n - 1] = ci + 1
                    else:
                        h = (h_before ^ np.uint64(composite)) * FNV_PRIME
                        out_end[n] = ci + 1
                    last = composite
                    continue
            if char_mode:
                out_hash[n] = _char_hash(o)
                out_start[n] = ci
                out_end[n] = ci + 1
                n += 1
            else:
                if not in_word:
                    in_word = True
                    h = FNV_OFFSET
                    out_start[n] = ci
                h_before = h
                h = (h ^ np.uint64(o)) * FNV_PRIME
                out_end[n] = ci + 1
            last = o
    if in_word:
        out_hash[n] = fmix64_scalar(h)
        n += 1
    return n


@nb.njit(inline="always", nogil=True)
def _prefix(hashes, u, base, out):
    out[0] = 0
    for k in range(u):
        out[k + 1] = out[k] * base + hashes[k]


@nb.njit(inline="always", nogil=True)
def _grow(rows, count):
    if count < rows.shape[0]:
        return rows
    bigger = np.empty((2 * rows.shape[0], rows.shape[1]), rows.dtype)
    bigger[: rows.shape[0]] = rows
    return bigger


# ------------------------------------------------------------------------------ task side
@nb.njit(nogil=True, cache=True)
def unit_counts(data, starts, ends, modes, mapping, exp_off, exp_pts, kinds, comp_keys,
                comp_vals):
    """The number of units of each text (modes resolved)."""
    size = 1
    for t in range(len(starts)):
        size = max(size, ends[t] - starts[t] + 1)
    hashes = np.empty(size, np.uint64)
    first = np.empty(size, np.int64)
    past = np.empty(size, np.int64)
    lengths = np.zeros(len(starts), np.int64)
    for t in range(len(starts)):
        lengths[t] = _units(data, starts[t], ends[t], modes[t] == CHAR, mapping, exp_off,
                            exp_pts, kinds, comp_keys, comp_vals, hashes, first, past)
    return lengths


@nb.njit(nogil=True, cache=True)
def text_keys(data, starts, ends, modes, least, n, mins, pows, mapping, exp_off, exp_pts, kinds,
              comp_keys, comp_vals):
    """Keys of task texts (modes resolved; ``least``: the fewest units at which a text shorter
    than an n-gram is used whole, 0 for never; never below ``mins`` of its mode).

    Returns ``long`` rows (key, text) and ``short`` rows (full key, suffix key, length, text)
    as uint64 arrays, and the number of units of each text."""
    size = 1
    for t in range(len(starts)):
        size = max(size, ends[t] - starts[t] + 1)
    hashes = np.empty(size, np.uint64)
    first = np.empty(size, np.int64)
    past = np.empty(size, np.int64)
    prefix = np.empty(size + 1, np.uint64)
    long_rows = np.empty((1024, 2), np.uint64)
    short_rows = np.empty((64, 4), np.uint64)
    n_long = 0
    n_short = 0
    lengths = np.zeros(len(starts), np.int64)
    for t in range(len(starts)):
        mode = modes[t]
        u = _units(data, starts[t], ends[t], mode == CHAR, mapping, exp_off, exp_pts, kinds,
                   comp_keys, comp_vals, hashes, first, past)
        lengths[t] = u
        _prefix(hashes, u, BASES[mode], prefix)
        size_n = n[mode]
        if u >= size_n:
            for j in range(size_n, u + 1):
                long_rows = _grow(long_rows, n_long)
                long_rows[n_long, 0] = prefix[j] - prefix[j - size_n] * pows[mode, size_n]
                long_rows[n_long, 1] = t
                n_long += 1
        elif least[t] > 0 and u >= least[t] and u >= mins[mode]:
            short_rows = _grow(short_rows, n_short)
            k = mins[mode]
            short_rows[n_short, 0] = prefix[u]
            short_rows[n_short, 1] = prefix[u] - prefix[u - k] * pows[mode, k]
            short_rows[n_short, 2] = u
            short_rows[n_short, 3] = t
            n_short += 1
    return long_rows[:n_long], short_rows[:n_short], lengths


# ------------------------------------------------------------------------------ document side
@nb.njit(inline="always", nogil=True)
def _find(keys, directory, shift, bitmap, key):
    """Index of ``key`` in sorted ``keys`` through the radix directory, or -1; ``bitmap``
    (bit ``key mod 64 * len(bitmap)``) rules most absent keys out first."""
    slot = key & np.uint64(64 * len(bitmap) - 1)
    if not (bitmap[slot >> np.uint64(6)] >> (slot & np.uint64(63))) & np.uint64(1):
        return -1
    bucket = key >> shift
    for k in range(directory[bucket], directory[bucket + 1]):
        if keys[k] == key:
            return k
        if keys[k] > key:
            break
    return -1


@nb.njit(nogil=True, cache=True)
def find_matches(data, starts, ends, modes, n, mins, pows, mapping, exp_off, exp_pts, kinds,
                 comp_keys, comp_vals, long_keys, long_dir, long_shift, long_bits, short_suffix,
                 short_full, short_len, short_dir, short_shift, short_bits):
    """Occurrences of index keys in documents (modes resolved).

    Returns rows (document, entry, first code point, past-last code point) as int64; long key
    ``k`` is entry ``k``, short key ``k`` entry ``len(long_keys) + k``."""
    size = 1
    for d in range(len(starts)):
        size = max(size, ends[d] - starts[d] + 1)
    hashes = np.empty(size, np.uint64)
    first = np.empty(size, np.int64)
    past = np.empty(size, np.int64)
    prefix = np.empty(size + 1, np.uint64)
    hits = np.empty((64, 4), np.int64)
    count = 0
    n_long = len(long_keys)
    for d in range(len(starts)):
        mode = modes[d]
        u = _units(data, starts[d], ends[d], mode == CHAR, mapping, exp_off, exp_pts, kinds,
                   comp_keys, comp_vals, hashes, first, past)
        _prefix(hashes, u, BASES[mode], prefix)
        size_n = n[mode]
        size_min = mins[mode]
        for j in range(size_min, u + 1):
            if j >= size_n:
                k = _find(long_keys, long_dir, long_shift, long_bits,
                          prefix[j] - prefix[j - size_n] * pows[mode, size_n])
                if k >= 0:
                    hits = _grow(hits, count)
                    hits[count, 0] = d
                    hits[count, 1] = k
                    hits[count, 2] = first[j - size_n]
                    hits[count, 3] = past[j - 1]
                    count += 1
            suffix = prefix[j] - prefix[j - size_min] * pows[mode, size_min]
            k = _find(short_suffix, short_dir, short_shift, short_bits, suffix)
            while k >= 0 and k < len(short_suffix) and short_suffix[k] == suffix:
                length = short_len[k]
                if length <= j and prefix[j] - prefix[j - length] * pows[mode, length] \
                        == short_full[k]:
                    hits = _grow(hits, count)
                    hits[count, 0] = d
                    hits[count, 1] = n_long + k
                    hits[count, 2] = first[j - length]
                    hits[count, 3] = past[j - 1]
                    count += 1
                k += 1
    return hits[:count]
