# ruff: noqa: RUF001, RUF002  (Unicode punctuation sets are the point here)
"""Japanese rule sets: characters and sentences, never words.

* ``swallow``: Swallow corpus ``quality.py::apply_v1`` (Okazaki et al. 2024,
  swallow-llm/swallow-corpus, MIT) plus its NG-word ratio (``ngword.py``: NG characters /
  Japanese characters, keep below 0.05; lists from MosasoM/inappropriate-words-ja, MIT,
  ``data/ng_*_ja.txt``). Sentences: ``[^。．！？!?]+[。．！？!?]?`` per line; paragraphs are
  the non-blank lines (Swallow's input, Trafilatura output, has no blank lines: counting them
  would make every blank-line-separated text "duplicated"). 5-10-gram duplication is
  type-based (distinct n-grams seen twice / distinct n-grams), as in the code.
* ``hojichar``: HojiChar's document filters with their defaults (HojiChar/HojiChar,
  Apache-2.0): AcceptJapanese (kana in the first 50 characters), DiscardRareKuten (fewer than
  len/100 "。"), DiscardAds (more than 14 advertisement keywords, ``data/hojichar_*``),
  CharRepetitionRatioFilter (5-grams, 0.33), DiscardTooManyEndingEllipsis (0.7),
  DiscardTooShortLines (0.5 of lines <= 10 chars), SingleCharacterRepetitionFilter (200).
* ``fineweb2_ja``: FineWeb-2 ``jpn_Jpan`` thresholds on the statistics that need no word
  tokenizer: duplicate-line fraction (0.328), line punctuation (0.096) and the top/duplicate
  n-gram fractions (0.239/0.196/0.172 and 0.243...0.159) computed as datatrove does, on
  script runs (a kanji run, a hiragana run, a katakana run, an alphanumeric run, any other
  character alone) in place of SudachiPy words: an approximation, coarser than morphemes.
  The other word-based ones (new-line ratio per word, average word length, non-alpha words)
  are left out: they need SudachiPy, which is not a dependency.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import cache
from pathlib import Path

import numpy as np

from curator.counts import ScoreBins
from curator.stages.filters.heuristic.gopher_repetition import (
    GOPHER_DUP,
    GOPHER_TOP,
    dup_ngram_chars,
    find_duplicates,
    top_ngram_chars,
    word_arrays,
)
from curator.stages.filters.heuristic.rules import Family, Rule
from curator.stages.filters.heuristic.text import TERMINAL_PUNCTUATION

DATA = Path(__file__).parent / "data"
HIRAGANA = re.compile(r"[\u3041-\u3096]")
KATAKANA = re.compile(r"[\u30a1-\u30fa]")
JAPANESE = re.compile(r"[\u3041-\u3096\u30a1-\u30fa々〇〻\u3400-\u9fff\uf900-\ufaff。．！？、，]")
SENTENCE = re.compile(r"[^。．！？!?]+[。．！？!?]?")
KANA = re.compile(r"[ぁ-んァ-ン]")


@cache
def ng_words() -> re.Pattern:
    words: set[str] = set()
    for name in ("ng_offensive_ja.txt", "ng_sexual_ja.txt"):
        words |= {w.strip() for w in (DATA / name).read_text("utf-8").splitlines() if w.strip()}
    # longest first: the alternation then takes the longest match at each position
    return re.compile("|".join(map(re.escape, sorted(words, key=len, reverse=True))))


@cache
def ad_words() -> re.Pattern:
    words = [w.strip() for w in (DATA / "hojichar_advertisement_ja.txt").read_text(
        "utf-8").splitlines() if w.strip()]
    return re.compile("|".join(map(re.escape, sorted(words, key=len, reverse=True))))


def _dup_fraction(items: list[str]) -> tuple[float, float]:
    """Swallow: (sum(freq-1) / #items, chars in repeats beyond the first / total chars)."""
    if not items:
        return 0.0, 0.0
    counts = Counter(items)
    repeats = sum(c - 1 for c in counts.values())
    chars = sum((c - 1) * len(s) for s, c in counts.items())
    total = sum(map(len, items))
    return repeats / len(items), chars / total if total else 0.0


def _top_ngram(text: str, n: int) -> float:
    grams = Counter(text[k:k + n] for k in range(len(text) - n + 1))
    if not grams:
        return 0.0
    return grams.most_common(1)[0][1] / sum(grams.values())


def _dup_ngram_types(text: str, n: int) -> float:
    grams = Counter(text[k:k + n] for k in range(len(text) - n + 1))
    if not grams:
        return 0.0
    return sum(1 for c in grams.values() if c > 1) / len(grams)


SWALLOW_SCORES = ("letters", "japanese_letters", "hiragana_fraction", "katakana_fraction",
                  "japanese_fraction", "avg_sentence_length", "max_sentence_length",
                  "ellipsis_fraction", "dup_paragraph_fraction", "dup_sentence_fraction",
                  "dup_paragraph_char_fraction", "dup_sentence_char_fraction",
                  *(f"top_{n}gram" for n in (2, 3, 4)),
                  *(f"dup_{n}gram" for n in range(5, 11)), "ng_fraction")


def swallow(texts: list[str], params: dict) -> dict[str, np.ndarray]:
    out = {name: np.full(len(texts), np.nan) for name in SWALLOW_SCORES}
    ng = ng_words()
    for i, text in enumerate(texts):
        jp = len(JAPANESE.findall(text))
        out["letters"][i] = len(text)
        out["japanese_letters"][i] = jp
        out["japanese_fraction"][i] = jp / len(text) if text else 0.0
        if jp:
            out["hiragana_fraction"][i] = len(HIRAGANA.findall(text)) / jp
            out["katakana_fraction"][i] = len(KATAKANA.findall(text)) / jp
            out["ng_fraction"][i] = sum(map(len, ng.findall(text))) / jp
        paragraphs = [line for line in text.split("\n") if line.strip()]
        sentences = [s for line in paragraphs for s in SENTENCE.findall(line)]
        if sentences:
            lengths = [len(s) for s in sentences]
            out["avg_sentence_length"][i] = sum(lengths) / len(lengths)
            out["max_sentence_length"][i] = max(lengths)
            out["ellipsis_fraction"][i] = sum(
                1 for s in sentences if s.endswith(("・", "…"))) / len(sentences)
        out["dup_paragraph_fraction"][i], out["dup_paragraph_char_fraction"][i] = \
            _dup_fraction(paragraphs)
        out["dup_sentence_fraction"][i], out["dup_sentence_char_fraction"][i] = \
            _dup_fraction(sentences)
        for n in (2, 3, 4):
            out[f"top_{n}gram"][i] = _top_ngram(text, n)
        for n in range(5, 11):
            out[f"dup_{n}gram"][i] = _dup_ngram_types(text, n)
    return out


SWALLOW = Family(
    name="swallow", languages="ja",
    source="swallow-llm/swallow-corpus quality.py apply_v1 + ngword.py (MIT)",
    scopes={s: "ja" for s in SWALLOW_SCORES},
    bins={"letters": ScoreBins(1, 1e6, 30, log=True),
          "japanese_letters": ScoreBins(1, 1e6, 30, log=True),
          "avg_sentence_length": ScoreBins(0, 400, 40),
          "max_sentence_length": ScoreBins(1, 1e5, 25, log=True),
          **{s: ScoreBins(0, 1, 20) for s in SWALLOW_SCORES
             if s not in ("letters", "japanese_letters", "avg_sentence_length",
                          "max_sentence_length")}},
    rules=(
        Rule("min_letters", "letters", "min", 400),
        Rule("min_japanese_letters", "japanese_letters", "min", 400),
        Rule("min_hiragana_fraction", "hiragana_fraction", "min", 0.2),
        Rule("max_katakana_fraction", "katakana_fraction", "max", 0.5),
        Rule("min_japanese_fraction", "japanese_fraction", "min", 0.5),
        Rule("min_avg_sentence_length", "avg_sentence_length", "min", 20),
        Rule("max_avg_sentence_length", "avg_sentence_length", "max", 90),
        Rule("max_max_sentence_length", "max_sentence_length", "max", 200),
        Rule("max_ellipsis_fraction", "ellipsis_fraction", "max", 0.2),
        Rule("max_dup_paragraph_fraction", "dup_paragraph_fraction", "max", 0.3),
        Rule("max_dup_sentence_fraction", "dup_sentence_fraction", "max", 0.3),
        Rule("max_dup_paragraph_char_fraction", "dup_paragraph_char_fraction", "max", 0.2),
        Rule("max_dup_sentence_char_fraction", "dup_sentence_char_fraction", "max", 0.2),
        *(Rule(f"max_top_{n}gram", f"top_{n}gram", "max", t) for n, t in GOPHER_TOP.items()),
        *(Rule(f"max_dup_{n}gram", f"dup_{n}gram", "max", t) for n, t in GOPHER_DUP.items()),
        Rule("max_ng_fraction", "ng_fraction", "ge", 0.05, "NG chars / Japanese chars"),
    ),
    compute=swallow,
)


HOJICHAR_SCORES = ("kana_in_head", "kuten_per_100_chars", "ad_keywords", "char_repetition",
                   "ending_ellipsis", "short_lines", "max_char_run")
RUN = re.compile(r"(.)\1*", re.S)


def _char_repetition(text: str, n: int = 5) -> float:
    # BigScience: share of the most frequent sqrt(#distinct) n-grams among all n-grams
    grams = Counter(text[k:k + n] for k in range(len(text) - n + 1))
    if not grams:
        return 0.0
    freq = sorted(grams.values(), reverse=True)
    top = int(np.sqrt(len(freq)))
    return sum(freq[:top]) / sum(freq)


def hojichar(texts: list[str], params: dict) -> dict[str, np.ndarray]:
    out = {name: np.full(len(texts), np.nan) for name in HOJICHAR_SCORES}
    ads = ad_words()
    for i, text in enumerate(texts):
        out["kana_in_head"][i] = 1.0 if KANA.search(text[:50]) else 0.0
        out["kuten_per_100_chars"][i] = 100 * text.count("。") / len(text) if text else 0.0
        out["ad_keywords"][i] = len(ads.findall(text))
        out["char_repetition"][i] = _char_repetition(text)
        lines = text.splitlines()
        if lines:
            out["ending_ellipsis"][i] = sum(
                1 for s in lines if s.endswith(("...", "…"))) / len(lines)
            out["short_lines"][i] = sum(1 for s in lines if len(s) <= 10) / len(lines)
        out["max_char_run"][i] = max((len(m.group()) for m in RUN.finditer(text)), default=0)
    return out


HOJICHAR = Family(
    name="hojichar", languages="ja",
    source="HojiChar/HojiChar hojichar/filters/document_filters.py defaults (Apache-2.0)",
    scopes={s: "ja" for s in HOJICHAR_SCORES},
    bins={"kana_in_head": ScoreBins(0, 1, 2), "kuten_per_100_chars": ScoreBins(0, 10, 20),
          "ad_keywords": ScoreBins(0, 50, 25), "char_repetition": ScoreBins(0, 1, 20),
          "ending_ellipsis": ScoreBins(0, 1, 20), "short_lines": ScoreBins(0, 1, 20),
          "max_char_run": ScoreBins(1, 1e4, 20, log=True)},
    rules=(
        Rule("min_kana_in_head", "kana_in_head", "min", 1, "AcceptJapanese(lookup_size=50)"),
        Rule("min_kuten_per_100_chars", "kuten_per_100_chars", "min", 1,
             "DiscardRareKuten(max_average_sentence_length=100)"),
        Rule("max_ad_keywords", "ad_keywords", "max", 14, "DiscardAds(max_allowed_num=14)"),
        Rule("max_char_repetition", "char_repetition", "ge", 0.33,
             "CharRepetitionRatioFilter(0.33, 5)"),
        Rule("max_ending_ellipsis", "ending_ellipsis", "max", 0.7,
             "DiscardTooManyEndingEllipsis(0.7)"),
        Rule("max_short_lines", "short_lines", "max", 0.5, "DiscardTooShortLines(0.5)"),
        Rule("max_max_char_run", "max_char_run", "ge", 200,
             "SingleCharacterRepetitionFilter(200)"),
    ),
    compute=hojichar,
)


FW2_SCORES = ("dup_line_frac", "line_punct_ratio", *(f"top_{n}gram" for n in (2, 3, 4)),
              *(f"dup_{n}gram" for n in range(5, 11)))


SCRIPT_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff々〆]+|[\u3041-\u309f]+|[\u30a0-\u30ff]+"
                        r"|[A-Za-z0-9\uff10-\uff19\uff21-\uff3a\uff41-\uff5a]+|\S")


def fineweb2_ja(texts: list[str], params: dict) -> dict[str, np.ndarray]:
    out = {name: np.full(len(texts), np.nan) for name in FW2_SCORES}
    for i, text in enumerate(texts):
        if not text:
            continue
        lines = re.split(r"\n+", text)
        out["dup_line_frac"][i] = find_duplicates(lines)[0] / len(lines)
        nonblank = [s for s in text.split("\n") if s.strip()]
        if nonblank:
            out["line_punct_ratio"][i] = sum(
                1 for s in nonblank if s.endswith(TERMINAL_PUNCTUATION)) / len(nonblank)
        ids, cum = word_arrays(SCRIPT_RUN.findall(text))
        for n in (2, 3, 4):
            top = top_ngram_chars(ids, cum, n)
            out[f"top_{n}gram"][i] = top / len(text) if top >= 0 else 0.0
        for n in range(5, 11):
            out[f"dup_{n}gram"][i] = dup_ngram_chars(ids, cum, n) / len(text)
    return out


_FW2_TOP = {2: 0.239, 3: 0.196, 4: 0.172}
_FW2_DUP = {5: 0.243, 6: 0.225, 7: 0.207, 8: 0.19, 9: 0.175, 10: 0.159}
FINEWEB2_JA = Family(
    name="fineweb2_ja", languages="ja",
    source="huggingface/fineweb-2 configs/jpn_Jpan.yml (commit d331bee); script-run n-grams",
    scopes={s: "ja" for s in FW2_SCORES},
    bins={s: ScoreBins(0, 1, 20) for s in FW2_SCORES},
    rules=(
        Rule("max_dup_line_frac", "dup_line_frac", "max", 0.328),
        Rule("min_line_punct_ratio", "line_punct_ratio", "min", 0.096),
        *(Rule(f"max_top_{n}gram", f"top_{n}gram", "max", t) for n, t in _FW2_TOP.items()),
        *(Rule(f"max_dup_{n}gram", f"dup_{n}gram", "max", t) for n, t in _FW2_DUP.items()),
    ),
    compute=fineweb2_ja,
)
