"""Gopher repetition rules (Rae et al. 2021, table A1), as datatrove 0.10.1's
GopherRepetitionFilter computes them: paragraphs split on 2+ newlines, lines on 1+; duplicate
fractions count elements after their first occurrence; n-gram fractions are characters over
``len(text)``. Word n-grams run on space-delimited languages only (the Japanese presets have
their own character n-gram rules)."""

from __future__ import annotations

import re
from functools import cache

import numpy as np

from curator.counts import ScoreBins
from curator.stages.filters.heuristic.rules import Family, Rule
from curator.stages.filters.heuristic.text import tokenize_all

PARAGRAPH = re.compile(r"\n{2,}")
LINE = re.compile(r"\n+")
TOP = (2, 3, 4)
DUP = (5, 6, 7, 8, 9, 10)


def find_duplicates(items: list[str]) -> tuple[int, int]:
    seen: set[str] = set()
    elements = chars = 0
    for item in items:
        if item in seen:
            elements += 1
            chars += len(item)
        else:
            seen.add(item)
    return elements, chars


_MULT = np.random.default_rng(0x5EED).integers(1, 2**63, size=16, dtype=np.uint64) | np.uint64(1)


def _hashes(ids: np.ndarray, n: int) -> np.ndarray:
    """A 64-bit hash per word n-gram (position i covers words i..i+n-1)."""
    m = len(ids) - n + 1
    h = np.zeros(m, dtype=np.uint64)
    for k in range(n):
        h = h * _MULT[15] + ids[k:k + m] * _MULT[k]
    return h


def top_ngram_chars(ids: np.ndarray, cum: np.ndarray, n: int) -> int:
    """Characters of the most frequent n-gram (joined with spaces) times its count; ties go to
    the n-gram seen first, as Counter.most_common does."""
    if len(ids) < n:
        return -1
    _, first, counts = np.unique(_hashes(ids, n), return_index=True, return_counts=True)
    best = counts.max()
    start = first[counts == best].min()
    return int(cum[start + n] - cum[start] + n - 1) * int(best)


@cache
def _dup_kernel():
    import numba

    @numba.njit(cache=True, nogil=True)
    def scan(h: np.ndarray, cum: np.ndarray, n: int) -> int:
        seen = set()
        seen.add(np.uint64(0))
        seen.discard(np.uint64(0))
        repeated = 0
        idx = 0
        last = len(h)
        while idx < last:
            if h[idx] in seen:
                repeated += cum[idx + n] - cum[idx]
                idx += n
            else:
                seen.add(h[idx])
                idx += 1
        return repeated

    return scan


def dup_ngram_chars(ids: np.ndarray, cum: np.ndarray, n: int) -> int:
    """Characters of the repeated n-grams, by datatrove's greedy scan."""
    if len(ids) < n:
        return 0
    return int(_dup_kernel()(_hashes(ids, n), cum, n))


def word_arrays(words: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Word ids (in order of first appearance) and cumulative character counts: the input of
    ``top_ngram_chars`` and ``dup_ngram_chars``."""
    vocab: dict[str, int] = {}
    ids = np.fromiter((vocab.setdefault(w, len(vocab)) for w in words), np.uint64, len(words))
    cum = np.zeros(len(words) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, words), np.int64, len(words)), out=cum[1:])
    return ids, cum


SCORES = ("dup_para_frac", "dup_para_char_frac", "dup_line_frac", "dup_line_char_frac",
          *(f"top_{n}_gram" for n in TOP), *(f"dup_{n}_gram" for n in DUP))


def compute(texts: list[str], params: dict) -> dict[str, np.ndarray]:
    out = {name: np.full(len(texts), np.nan) for name in SCORES}
    tokens = tokenize_all(texts)
    for i, text in enumerate(texts):
        if not text:
            continue
        size = len(text)
        paragraphs = PARAGRAPH.split(text.strip())
        dups, chars = find_duplicates(paragraphs)
        out["dup_para_frac"][i] = dups / len(paragraphs)
        out["dup_para_char_frac"][i] = chars / size
        lines = LINE.split(text)
        dups, chars = find_duplicates(lines)
        out["dup_line_frac"][i] = dups / len(lines)
        out["dup_line_char_frac"][i] = chars / size
        ids, cum = word_arrays(tokens[i])
        for n in TOP:
            top = top_ngram_chars(ids, cum, n)
            out[f"top_{n}_gram"][i] = top / size if top >= 0 else 0.0
        for n in DUP:
            out[f"dup_{n}_gram"][i] = dup_ngram_chars(ids, cum, n) / size
    return out


GOPHER_TOP = {2: 0.2, 3: 0.18, 4: 0.16}
GOPHER_DUP = {5: 0.15, 6: 0.14, 7: 0.13, 8: 0.12, 9: 0.11, 10: 0.10}

FAMILY = Family(
    name="gopher_repetition", languages="space",
    source="Rae et al. 2021 (Gopher) table A1; datatrove GopherRepetitionFilter defaults",
    scopes={**{s: "neutral" for s in SCORES[:4]}, **{s: "words" for s in SCORES[4:]}},
    bins={s: ScoreBins(0, 1, 20) for s in SCORES},
    rules=(
        Rule("max_dup_para_frac", "dup_para_frac", "max", 0.3),
        Rule("max_dup_para_char_frac", "dup_para_char_frac", "max", 0.2),
        Rule("max_dup_line_frac", "dup_line_frac", "max", 0.3),
        Rule("max_dup_line_char_frac", "dup_line_char_frac", "max", 0.2),
        *(Rule(f"max_top_{n}_gram", f"top_{n}_gram", "max", t) for n, t in GOPHER_TOP.items()),
        *(Rule(f"max_dup_{n}_gram", f"dup_{n}_gram", "max", t) for n, t in GOPHER_DUP.items()),
    ),
    compute=compute,
)
