"""Gopher quality rules (Rae et al. 2021, table A1), as datatrove 0.10.1's GopherQualityFilter
computes them: words are tokens of the text; "non-symbol" words hold a character outside
``PUNCTUATION``; lengths are in code points."""

from __future__ import annotations

import numpy as np

from curator.counts import ScoreBins
from curator.stages.filters.heuristic.rules import Family, Rule
from curator.stages.filters.heuristic.text import PUNCTUATION_SET, tokenize_all

STOP_WORDS = frozenset(["the", "be", "to", "of", "and", "that", "have", "with"])
SCORES = ("words", "avg_word_length", "hash_ratio", "ellipsis_ratio", "bullet_lines",
          "ellipsis_lines", "alpha_words", "stop_words")


def compute(texts: list[str], params: dict) -> dict[str, np.ndarray]:
    out = {name: np.full(len(texts), np.nan) for name in SCORES}
    punct = PUNCTUATION_SET
    for i, (text, words) in enumerate(zip(texts, tokenize_all(texts), strict=True)):
        n = len(words)
        lines = text.splitlines()
        if lines:
            out["bullet_lines"][i] = sum(
                s.lstrip().startswith(("•", "-")) for s in lines) / len(lines)
            out["ellipsis_lines"][i] = sum(
                s.rstrip().endswith(("...", "…")) for s in lines) / len(lines)
        non_symbol = [w for w in words if w[0] not in punct or not punct.issuperset(w)]
        out["words"][i] = len(non_symbol)
        if non_symbol:
            out["avg_word_length"][i] = sum(map(len, non_symbol)) / len(non_symbol)
        if n:
            out["hash_ratio"][i] = text.count("#") / n
            out["ellipsis_ratio"][i] = (text.count("...") + text.count("…")) / n
            out["alpha_words"][i] = _alpha(words) / n
        out["stop_words"][i] = len(STOP_WORDS.intersection(words))
    return out


def _alpha(words: list[str]) -> int:
    """Words holding a letter (``str.isalpha`` of any character)."""
    return sum(1 for w in words if w.isalpha() or (not w.isdigit() and _has_alpha(w)))


def _has_alpha(word: str) -> bool:
    return any(c.isalpha() for c in word)


FAMILY = Family(
    name="gopher_quality", languages="space",
    source="Rae et al. 2021 (Gopher) table A1; datatrove GopherQualityFilter defaults",
    scopes={"words": "words", "avg_word_length": "words", "hash_ratio": "words",
            "ellipsis_ratio": "words", "bullet_lines": "neutral", "ellipsis_lines": "neutral",
            "alpha_words": "words", "stop_words": "english"},
    bins={"words": ScoreBins(1, 1e6, 30, log=True), "avg_word_length": ScoreBins(0, 20, 40),
          "hash_ratio": ScoreBins(0, 1, 20), "ellipsis_ratio": ScoreBins(0, 1, 20),
          "bullet_lines": ScoreBins(0, 1, 20), "ellipsis_lines": ScoreBins(0, 1, 20),
          "alpha_words": ScoreBins(0, 1, 20), "stop_words": ScoreBins(0, 8, 8)},
    rules=(
        Rule("min_words", "words", "min", 50, "non-symbol words"),
        Rule("max_words", "words", "max", 100_000),
        Rule("min_avg_word_length", "avg_word_length", "min", 3),
        Rule("max_avg_word_length", "avg_word_length", "max", 10),
        Rule("max_hash_ratio", "hash_ratio", "max", 0.1, "'#' per word"),
        Rule("max_ellipsis_ratio", "ellipsis_ratio", "max", 0.1, "'...'/'…' per word"),
        Rule("max_bullet_lines", "bullet_lines", "max", 0.9, "lines starting with •/-"),
        Rule("max_ellipsis_lines", "ellipsis_lines", "max", 0.3, "lines ending with .../…"),
        Rule("min_alpha_words", "alpha_words", "min", 0.8, "words holding a letter"),
        Rule("min_stop_words", "stop_words", "min", 2, "distinct English stop words"),
    ),
    compute=compute,
)
