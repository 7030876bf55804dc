"""Text normalisation shared by task texts and documents, as per-code-point tables.

Each code point maps to ``NFKC(c).casefold()`` (one code point, or an expansion such as
``ﬁ`` → ``fi``). Mapped code points are letters (Unicode L* and N*), marks (M*), ignorable
(Cf: soft hyphen, zero-width space, BOM) or separators (everything else: whitespace, line
breaks, punctuation, symbols). A mark right after a letter composes with it when NFC has a
composite (``か`` + ``゙`` → ``が``, so half-width ``ｶﾞ`` reads as ``ガ``), as NFKC of the
whole string does. Word mode: a word is a maximal run of letters and marks. Character mode:
every letter or mark is a unit and separators vanish, so re-spaced or re-wrapped Japanese
reads the same.
"""

from __future__ import annotations

import unicodedata
from functools import cache
from typing import NamedTuple

import numpy as np

SEPARATOR, LETTER, MARK, IGNORABLE = 0, 1, 2, 3
MAX_CODE_POINT = 0x110000


class UnicodeTables(NamedTuple):
    """NumPy tables the kernels read (see the module docstring)."""

    mapping: np.ndarray  # int32[0x110000]: mapped code point, or -(k + 1) for expansion k
    expansion_offsets: np.ndarray  # int32[k + 1]
    expansion_points: np.ndarray  # int32
    kinds: np.ndarray  # uint8[0x110000], the kind of a mapped code point
    compose_keys: np.ndarray  # uint64, sorted: base << 21 | mark
    compose_values: np.ndarray  # int32: the composite


def _kind(category: str) -> int:
    if category[0] in "LN":
        return LETTER
    if category[0] == "M":
        return MARK
    return IGNORABLE if category == "Cf" else SEPARATOR


@cache
def unicode_tables() -> UnicodeTables:
    """Build the tables (about 0.4 s, once per process)."""
    mapping = np.arange(MAX_CODE_POINT, dtype=np.int32)
    kinds = np.zeros(MAX_CODE_POINT, dtype=np.uint8)
    offsets, points = [0], []
    pairs: dict[int, int] = {}
    for cp in range(MAX_CODE_POINT):
        if 0xD800 <= cp < 0xE000:
            continue
        char = chr(cp)
        kinds[cp] = _kind(unicodedata.category(char))
        mapped = unicodedata.normalize("NFKC", char).casefold()
        if len(mapped) == 1:
            mapping[cp] = ord(mapped)
        else:
            mapping[cp] = -len(offsets)
            points += [ord(c) for c in mapped]
            offsets.append(len(points))
        parts = unicodedata.decomposition(char).split()
        if len(parts) == 2 and not parts[0].startswith("<"):
            base, mark = (int(p, 16) for p in parts)
            if unicodedata.normalize("NFC", chr(base) + chr(mark)) == char:
                pairs[base << 21 | mark] = cp
    keys = np.array(sorted(pairs), dtype=np.uint64)
    values = np.array([pairs[int(k)] for k in keys], dtype=np.int32)
    return UnicodeTables(mapping, np.array(offsets, np.int32), np.array(points, np.int32),
                         kinds, keys, values)
