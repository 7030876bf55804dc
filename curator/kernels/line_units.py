# ruff: noqa: RUF002  (Unicode punctuation sets are the point here)
"""Units of line dedup over Arrow's UTF-8 buffers (numba): lines, paragraphs and sentence
spans, each unit's normalised key, and the documents rebuilt without dropped units, with no
Python string per line.

The units and keys are those of ``curator.stages.dedup.line_units`` (``pieces``, ``unit_keys``,
``rebuild``; tested equal on random texts). A key is the piece NFKC-normalised, case-folded,
its whitespace runs one space, trimmed. The kernel writes it itself where each character's form
cannot depend on its neighbours (``key_tables``: most characters are left alone; full-width
and half-width forms, ligatures and capitals are mapped); a unit holding a combining mark or
another character that may compose is flagged and its key computed in Python
(``line_units.normalise``). Sentences end as ``line_units``' regular
expressions end them (replayed character by character, lazy scan and lookaheads included).
"""

from __future__ import annotations

import functools
import itertools
import unicodedata
from collections.abc import Iterator
from typing import NamedTuple

import numba as nb
import numpy as np

MAX_CODE_POINT = 0x110000
LINE, PARAGRAPH, SENTENCE = 0, 1, 2  # the unit, as the kernels take it
#: Blocks NFKC and case folding leave alone whole (unified CJK ideographs, Hangul syllables,
#: private use, planes 3 to 13 and 15 to 16): not read, to build the table in a tenth of a
#: second; a test checks every code point of them.
SKIPPED = ((0x3400, 0x4DC0), (0x4E00, 0xA000), (0xAC00, 0xD7A4), (0xD800, 0xF900),
           (0x20000, 0x2A6E0), (0x2A700, 0x2F800), (0x30000, 0xE0000), (0xF0000, 0x110000))
#: Hangul vowel and trailing jamo: they compose with the syllable before them.
_HANGUL_SECOND = (range(0x1161, 0x1176), range(0x11A8, 0x11C3))


class KeyTables(NamedTuple):
    """What the kernel does with each code point of a key: ``kind[cp]`` 0 keeps its bytes, 1
    leaves the unit to Python, 2 writes ``mapped[start[cp]:start[cp] + length[cp]]`` (its NFKC
    form case-folded) instead."""

    kind: np.ndarray
    start: np.ndarray
    length: np.ndarray
    mapped: np.ndarray


def _read_code_points() -> Iterator[int]:
    """Every code point from U+0080 outside ``SKIPPED``."""
    edges = [0x80, *(x for pair in SKIPPED for x in pair)]
    return itertools.chain(*map(range, edges[::2], edges[1::2]))


def _second_halves() -> set[int]:
    """Code points that compose with the character before them: the second half of every
    canonical pair, and Hangul vowel and trailing jamo."""
    halves = {cp for block in _HANGUL_SECOND for cp in block}
    for cp in _read_code_points():
        decomposition = unicodedata.decomposition(chr(cp))
        if decomposition and not decomposition.startswith("<"):
            parts = decomposition.split()
            if len(parts) == 2:
                halves.add(int(parts[1], 16))
    return halves


@functools.cache
def key_tables() -> KeyTables:
    """The tables of ``KeyTables``. A code point NFKC or ``casefold`` changes is mapped where
    that change cannot depend on its neighbours (combining class 0 and never a second half,
    nor its NFKC form's first character; the form holds no whitespace and is no longer in
    UTF-8 than the code point: the kernel writes keys in place); else, like a combining mark or
    a second half, it leaves its unit to Python. ASCII capitals (lowered by the kernel) and
    whitespace (collapsed by it) are kept."""
    kind = np.zeros(MAX_CODE_POINT, np.uint8)
    start = np.zeros(MAX_CODE_POINT, np.int32)
    length = np.zeros(MAX_CODE_POINT, np.uint8)
    mapped = bytearray()
    halves = _second_halves()
    for cp in halves:
        kind[cp] = 1
    for cp in _read_code_points():
        ch = chr(cp)
        if ch.isspace() or kind[cp]:
            continue
        nfkc = unicodedata.normalize("NFKC", ch)
        key = nfkc.casefold()
        if key == ch and not unicodedata.combining(ch):
            continue
        kind[cp] = 1
        if (unicodedata.combining(ch) or unicodedata.combining(nfkc[0])
                or ord(nfkc[0]) in halves or any(c.isspace() for c in key)
                or len(key.encode()) > len(ch.encode())):
            continue
        kind[cp] = 2
        start[cp] = len(mapped)
        length[cp] = len(key.encode())
        mapped += key.encode()
    return KeyTables(kind, start, length, np.frombuffer(bytes(mapped) or b"\0", np.uint8))


@nb.njit(nogil=True, cache=True)
def _space(d, p, e):
    """Bytes of the whitespace character at ``p`` (Python's ``str.isspace`` set), else 0."""
    b = d[p]
    if b == 32 or 9 <= b <= 13 or 28 <= b <= 31:
        return 1
    if b == 0xC2 and p + 1 < e and (d[p + 1] == 0x85 or d[p + 1] == 0xA0):
        return 2
    if p + 2 < e:
        c, f = d[p + 1], d[p + 2]
        if b == 0xE1 and c == 0x9A and f == 0x80:  # U+1680
            return 3
        if b == 0xE2 and c == 0x80 and (0x80 <= f <= 0x8A or f == 0xA8 or f == 0xA9
                                        or f == 0xAF):  # U+2000-200A, 2028, 2029, 202F
            return 3
        if b == 0xE2 and c == 0x81 and f == 0x9F:  # U+205F
            return 3
        if b == 0xE3 and c == 0x80 and f == 0x80:  # U+3000
            return 3
    return 0


@nb.njit(nogil=True, cache=True)
def _code_point(d, p):
    """(code point, bytes) of the UTF-8 character at ``p``."""
    b = np.int64(d[p])
    if b < 0x80:
        return b, 1
    if b < 0xE0:
        return ((b & 0x1F) << 6) | (np.int64(d[p + 1]) & 0x3F), 2
    if b < 0xF0:
        return (((b & 0x0F) << 12) | ((np.int64(d[p + 1]) & 0x3F) << 6)
                | (np.int64(d[p + 2]) & 0x3F)), 3
    return (((b & 0x07) << 18) | ((np.int64(d[p + 1]) & 0x3F) << 12)
            | ((np.int64(d[p + 2]) & 0x3F) << 6) | (np.int64(d[p + 3]) & 0x3F)), 4


@nb.njit(nogil=True, cache=True)
def _blank(d, s, e):
    p = s
    while p < e:
        n = _space(d, p, e)
        if n == 0:
            return False
        p += n
    return True


@nb.njit(nogil=True, cache=True)
def _ends_anywhere(cp, japanese):
    """``。！？｡`` (and half-width ``!?`` in Japanese): a sentence ends after a run of them."""
    return (cp == 0x3002 or cp == 0xFF01 or cp == 0xFF1F or cp == 0xFF61
            or (japanese and (cp == 33 or cp == 63)))


@nb.njit(nogil=True, cache=True)
def _ends_before_space(cp, japanese):
    """``.!?`` (``.`` in Japanese): a sentence ends after a run of them before whitespace."""
    return cp == 46 or (not japanese and (cp == 33 or cp == 63))


@nb.njit(nogil=True, cache=True)
def _closing(cp):
    """Brackets and quotes a sentence end takes with it: ``)]}"'’”」』）］】〕〉》``."""
    return (cp == 41 or cp == 93 or cp == 125 or cp == 34 or cp == 39 or cp == 0x2019
            or cp == 0x201D or cp == 0x300D or cp == 0x300F or cp == 0xFF09 or cp == 0xFF3D
            or cp == 0x3011 or cp == 0x3015 or cp == 0x3009 or cp == 0x300B)


@nb.njit(nogil=True, cache=True)
def _run_end(d, q, e, japanese, kind):
    """The end of the run of sentence-ending characters of ``kind`` (0: anywhere, 1: before
    whitespace) at ``q`` and the closing characters after it."""
    while q < e:
        cp, n = _code_point(d, q)
        if not (_ends_anywhere(cp, japanese) if kind == 0 else _ends_before_space(cp, japanese)):
            break
        q += n
    while q < e:
        cp, n = _code_point(d, q)
        if not _closing(cp):
            break
        q += n
    return q


@nb.njit(nogil=True, cache=True)
def _sentences(d, s, e, japanese, ps, pe):
    """The sentences of ``d[s:e]`` as ``line_units``' ``_SENTENCE`` (``_SENTENCE_JA``) finds
    them: from a non-space character, lazily over the line, to the first place where a run of
    ``。！？｡`` ends, a run of ``.!?`` ends before whitespace or the end, a line break follows,
    or the text ends."""
    n = 0
    p = s
    while True:
        while p < e:
            w = _space(d, p, e)
            if w == 0:
                break
            p += w
        if p >= e:
            return n
        start = p
        p += _code_point(d, p)[1]  # \S
        while True:
            if p >= e:
                break
            b = d[p]
            if b < 0x80 and b != 33 and b != 46 and b != 63:  # ASCII but .!?
                if b == 10 or b == 13:
                    break
                p += 1
                continue
            cp, w = _code_point(d, p)
            if _ends_anywhere(cp, japanese):
                p = _run_end(d, p, e, japanese, 0)
                break
            if _ends_before_space(cp, japanese):
                q = _run_end(d, p, e, japanese, 1)
                if q >= e or _space(d, q, e):
                    p = q
                    break
            if cp == 10 or cp == 13:
                break
            p += w
        ps[n] = start
        pe[n] = p
        n += 1


@nb.njit(nogil=True, cache=True)
def _pieces(d, s, e, unit, japanese, ls, le, ps, pe):
    """The pieces of ``d[s:e]`` into ``ps``/``pe`` (absolute byte offsets); their count. Lines
    end at ``\\r\\n``, ``\\r`` or ``\\n``; paragraphs at a line break followed by one or
    more whitespace-only lines each ending in a line break (``ls``/``le``: scratch); sentences
    as ``_sentences``."""
    if unit == SENTENCE:
        return _sentences(d, s, e, japanese, ps, pe)
    n = 0
    p = s
    while True:
        ls[n] = p
        while p < e and d[p] != 10 and d[p] != 13:
            p += 1
        le[n] = p
        n += 1
        if p >= e:
            break
        p += 2 if d[p] == 13 and p + 1 < e and d[p + 1] == 10 else 1
    if unit == LINE:
        ps[:n] = ls[:n]
        pe[:n] = le[:n]
        return n
    count = 0
    ps[0] = ls[0]
    k = 0
    while k < n - 1:  # a line break follows line k
        j = k + 1
        while j < n - 1 and _blank(d, ls[j], le[j]):
            j += 1
        if j > k + 1:  # blank lines, each with its break, between k and j: a new paragraph
            pe[count] = le[k]
            count += 1
            ps[count] = ls[j]
            k = j
        else:
            k += 1
    pe[count] = le[n - 1]
    return count + 1


@nb.njit(nogil=True, cache=True)
def _cjk(cp):
    return (0x3040 <= cp <= 0x30FF or 0x3400 <= cp <= 0x4DBF or 0x4E00 <= cp <= 0x9FFF
            or 0xFF66 <= cp <= 0xFF9F)


@nb.njit(nogil=True, cache=True)
def japanese_by_script(data, starts, ends, rows, share):
    """Of documents ``rows``: kana and CJK ideographs at least ``share`` of the non-space
    characters (``line_units.is_japanese`` without a language)."""
    out = np.zeros(rows.shape[0], np.bool_)
    for k in range(rows.shape[0]):
        p, e = starts[rows[k]], ends[rows[k]]
        letters = 0
        cjk = 0
        while p < e:
            w = _space(data, p, e)
            if w:
                p += w
                continue
            cp, w = _code_point(data, p)
            letters += 1
            cjk += _cjk(cp)
            p += w
        out[k] = letters > 0 and cjk >= share * letters
    return out


@nb.njit(nogil=True, cache=True)
def _key(d, s, e, kind, start_of, length_of, mapped, out, o):
    """Write the key of ``d[s:e]`` at ``out[o:]`` (``KeyTables``' arrays): (end, needs
    Python)."""
    start = o
    pending = False  # a space is owed before the next non-space
    flagged = False
    p = s
    while p < e:
        b = d[p]
        if b < 0x80:
            if b == 32 or 9 <= b <= 13 or 28 <= b <= 31:
                pending = o > start
                p += 1
                continue
            if pending:
                out[o] = 32
                o += 1
                pending = False
            out[o] = b + 32 if 65 <= b <= 90 else b
            o += 1
            p += 1
            continue
        n = _space(d, p, e)
        if n:
            pending = o > start
            p += n
            continue
        cp, n = _code_point(d, p)
        if pending:
            out[o] = 32
            o += 1
            pending = False
        if kind[cp] == 2:
            m = start_of[cp]
            for k in range(length_of[cp]):
                out[o] = mapped[m + k]
                o += 1
        else:
            flagged = flagged or kind[cp] == 1
            for k in range(n):
                out[o] = d[p + k]
                o += 1
        p += n
    return o, flagged


@nb.njit(nogil=True, cache=True)
def _byte_counts(data):
    counts = np.zeros(256, np.int64)
    for b in data:
        counts[b] += 1
    return counts


def piece_bound(data: np.ndarray, documents: int, unit: int) -> int:
    """At least the pieces of ``documents`` documents in ``data``: one per document, one more
    per line break, and for sentences per ``.!?`` and per ``。！？｡`` (counted by their last
    UTF-8 byte, which other characters share: an upper bound)."""
    counts = _byte_counts(data)
    ends = (10, 13, 33, 46, 63, 0x81, 0x82, 0x9F, 0xA1) if unit == SENTENCE else (10, 13)
    return documents + int(counts[list(ends)].sum())


@nb.njit(nogil=True, cache=True)
def unit_keys_kernel(data, starts, ends, unit, span, japanese, kind, start_of, length_of,
                     mapped, longest, bound):
    """Every non-empty unit of every document (``japanese``: per document, how sentences
    split; ``kind`` to ``mapped``: ``KeyTables``; ``bound``: ``piece_bound``'s): per unit
    (row, unit index, its first key, flagged: a key needs Python, the unit's own byte range),
    and the keys (bytes, starts, ends). A line or paragraph has one key; a sentence span the
    keys of its ``span`` sentences from its first (each sentence's key written once, whatever
    the spans holding it)."""
    ls = np.empty(longest + 2, np.int64)
    le = np.empty(longest + 2, np.int64)
    ps = np.empty(longest + 2, np.int64)
    pe = np.empty(longest + 2, np.int64)
    total = np.int64(0)
    for i in range(starts.shape[0]):
        total += ends[i] - starts[i]
    out = np.empty(total + 1, np.uint8)  # a key is never longer than its piece
    k_start = np.empty(bound, np.int64)
    k_end = np.empty(bound, np.int64)
    k_flag = np.zeros(bound, np.bool_)
    rows = np.empty(bound, np.int64)
    index = np.empty(bound, np.int32)
    first = np.empty(bound, np.int64)
    flagged = np.zeros(bound, np.bool_)
    u_start = np.empty(bound, np.int64)
    u_end = np.empty(bound, np.int64)
    width = span if unit == SENTENCE else 1
    o = np.int64(0)
    keys = 0
    m = 0
    for i in range(starts.shape[0]):
        count = _pieces(data, starts[i], ends[i], unit, japanese[i], ls, le, ps, pe)
        if count < width:
            continue  # fewer sentences than a span: no unit
        base = keys
        for u in range(count):
            end, flag = _key(data, ps[u], pe[u], kind, start_of, length_of, mapped, out, o)
            if end == o and unit != SENTENCE:
                continue  # an empty line or paragraph: never a duplicate
            k_start[keys], k_end[keys], k_flag[keys] = o, end, flag
            o = end
            if unit != SENTENCE:
                rows[m], index[m], first[m], flagged[m] = i, u, keys, flag
                u_start[m], u_end[m] = ps[u], pe[u]
                m += 1
            keys += 1
        if unit != SENTENCE:
            continue
        for j in range(count - span + 1):
            flag = False
            for u in range(j, j + span):
                flag = flag or k_flag[base + u]
            rows[m], index[m], first[m], flagged[m] = i, j, base + j, flag
            u_start[m], u_end[m] = ps[j], pe[j + span - 1]
            m += 1
    return (rows[:m], index[:m], first[:m], flagged[:m], u_start[:m], u_end[:m], out[:o],
            k_start[:keys], k_end[:keys])


@nb.njit(nogil=True, cache=True)
def _chars(d, s, e):
    """Code points in ``d[s:e]``."""
    n = 0
    for p in range(s, e):
        if (d[p] & 0xC0) != 0x80:
            n += 1
    return n


@nb.njit(nogil=True, cache=True)
def _trimmed(d, s, e):
    """Code points of whitespace at the start and at the end of ``d[s:e]`` (all of it if it
    is only whitespace)."""
    lead = 0
    p = s
    while p < e:
        w = _space(d, p, e)
        if w == 0:
            break
        p += w
        lead += 1
    if p >= e:
        return lead
    trail = 0
    q = e
    while q > p:
        c = q - 1
        while c > p and (d[c] & 0xC0) == 0x80:
            c -= 1
        if _space(d, c, e) == 0:
            break
        q = c
        trail += 1
    return lead + trail


@nb.njit(nogil=True, cache=True)
def rebuild_kernel(data, starts, ends, unit, span, japanese, rows, lengths, drop_ptr,
                   drop_units, longest):
    """Documents ``rows`` (``lengths``: their code points) without their dropped units
    (``drop_units[drop_ptr[k]:drop_ptr[k + 1]]`` for ``rows[k]``, sorted; a sentence span's
    unit drops its ``span`` sentences): (bytes, offsets, pieces dropped, characters removed,
    each new text's characters once stripped) as ``line_units.rebuild`` builds them."""
    total = 0
    for k in range(rows.shape[0]):
        total += ends[rows[k]] - starts[rows[k]]
    out = np.empty(max(total, 1), np.uint8)
    offsets = np.zeros(rows.shape[0] + 1, np.int64)
    dropped = np.zeros(rows.shape[0], np.int32)
    chars = np.zeros(rows.shape[0], np.int64)
    stripped = np.zeros(rows.shape[0], np.int64)
    ls = np.empty(longest + 2, np.int64)
    le = np.empty(longest + 2, np.int64)
    ps = np.empty(longest + 2, np.int64)
    pe = np.empty(longest + 2, np.int64)
    width = span if unit == SENTENCE else 1
    o = np.int64(0)
    for k in range(rows.shape[0]):
        s, e = starts[rows[k]], ends[rows[k]]
        count = _pieces(data, s, e, unit, japanese[k], ls, le, ps, pe)
        q = drop_ptr[k]
        first = True
        for u in range(count):
            while q < drop_ptr[k + 1] and drop_units[q] + width <= u:
                q += 1
            if q < drop_ptr[k + 1] and drop_units[q] <= u:
                dropped[k] += 1
                continue
            if first:  # the head, then the piece alone
                out[o:o + ps[0] - s] = data[s:ps[0]]
                o += ps[0] - s
                a = ps[u]
            else:  # the separator before the piece, then the piece
                a = pe[u - 1]
            out[o:o + pe[u] - a] = data[a:pe[u]]
            o += pe[u] - a
            first = False
        if not first:
            out[o:o + e - pe[count - 1]] = data[pe[count - 1]:e]  # the tail
            o += e - pe[count - 1]
        offsets[k + 1] = o
        kept = _chars(out, offsets[k], o)
        chars[k] = lengths[k] - kept
        stripped[k] = kept - _trimmed(out, offsets[k], o)
    return out[:o], offsets, dropped, chars, stripped
