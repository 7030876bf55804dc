# ruff: noqa: RUF001  (Unicode bullets and brackets are the point here)
"""NeMo Curator's English heuristic set: the 28 ScoreFilters of NeMo Curator 1.4's
``config/text/heuristic_filter_english_pipeline.yaml`` with its thresholds, scored as its
``stages/text/filters/heuristic/{string,repetition}.py`` score them (Apache-2.0): words are
``text.strip().split()``, "sentences" the non-blank lines, paragraphs ``split("\\n\\n")``.

Two deliberate differences: the most frequent n-gram of ``repeating_top_*grams`` is, among ties,
the one seen first (NeMo takes ``max`` over a ``set``, so its choice follows ``PYTHONHASHSEED``),
and word n-grams are compared by a 64-bit hash of their word ids, as the Gopher family does.
Character classes follow NeMo: ``[[:alpha:]]`` of the ``regex`` module, ASCII digits. Routing:
the line-end-mark rule (ASCII ``. ? ! " '``) is a ``words`` rule, so Japanese lines ending in
``。`` are not judged by it; the share of non-ASCII-alphanumerics is an ``english`` rule.
"""

from __future__ import annotations

import re
from functools import cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import regex

from curator.counts import ScoreBins
from curator.stages.filters.heuristic.gopher_repetition import _hashes, word_arrays
from curator.stages.filters.heuristic.rules import Family, Rule

END_MARKS = (".", "?", "!", '"', "'")
ELLIPSIS = frozenset({"...", "[...]", "…", "(...)", "[…]", "-»", "read more..", "read more"})
ELLIPSIS_ENDS = tuple(ELLIPSIS)
BULLETS = ("•", "‣", "⁃", "⁌", "⁍", "∙", "○", "●", "◘", "◦", "⦾", "⦿")
COMMON_WORDS = frozenset({"the", "be", "to", "of", "and", "that", "have", "with"})
POLICY = (
    "terms of use", "privacy policy", "cookie policy", "uses cookies", "privacy overview",
    "use of cookies", "use cookies", "privacy & cookies policy", "privacy and cookies policy")
# NeMo's five long cookie-banner sentences all contain "cookie", and each holds one of the
# short phrases above except the last two; they are listed so that the set is NeMo's.
POLICY_LONG = (
    "this website uses cookies to improve your experience while you navigate through the "
    "website. out of these cookies, the cookies that are categorized as necessary are stored on "
    "your browser as they are essential for the working of basic functionalities of the website."
    " we also use third-party cookies that help us analyze and understand how you use this "
    "website. these cookies will be stored in your browser only with your consent. you also "
    "have the option to opt-out of these cookies. but opting out of some of these cookies may "
    "have an effect on your browsing experience.",
    "necessary cookies are absolutely essential for the website to function properly. this "
    "category only includes cookies that ensures basic functionalities and security features of "
    "the website. these cookies do not store any personal information.",
    "any cookies that may not be particularly necessary for the website to function and is used "
    "specifically to collect user personal data via analytics, ads, other embedded contents are "
    "termed as non-necessary cookies. it is mandatory to procure user consent prior to running "
    "these cookies on your website.",
    "this site uses cookies, including for analytics, personalization, and advertising purposes."
    " for more information or to change your cookie settings, click here.",
    "if you continue to browse this site without changing your cookie settings, you agree to "
    "this use. acceptread more")
URL = re.compile(r"https?://(?:[A-Za-z0-9$\-_@.&+/:=?#~]|[!*\(\),]|(?:%[0-9A-Fa-f]{2}))+")
ALPHA = regex.compile("[[:alpha:]]")
HASH_RUN = re.compile("#+")
HASH_WORD = re.compile(r"\S*#\S*")
TOP = {2: 0.20, 3: 0.18, 4: 0.16}
DUP = {5: 0.15, 6: 0.14, 7: 0.13, 8: 0.12, 9: 0.11, 10: 0.10}

SCORES = ("non_alpha_numeric", "symbol_to_word", "numbers_ratio", "urls_ratio", "white_space",
          "parentheses_ratio", "boilerplate_string_ratio", "repeated_lines",
          "repeated_paragraphs", "repeated_lines_char", "repeated_paragraphs_char", "word_count",
          "punctuation", "words_with_alphabets", "common_english_words", "mean_word_length",
          "max_word_length", "ellipsis", "bullet_ratio",
          *(f"repeating_top_{n}grams" for n in TOP), *(f"repeating_dup_{n}gram" for n in DUP))


def _char_ratios(texts: list[str]) -> dict[str, np.ndarray]:
    """Character-class shares over the whole batch in Arrow (RE2; one code point per match)."""
    array = pa.array(texts, pa.large_string())
    nchar = pc.utf8_length(array).to_numpy(zero_copy_only=False).astype(np.float64)

    def share(pattern: str) -> np.ndarray:
        counts = pc.count_substring_regex(array, pattern).to_numpy(zero_copy_only=False)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(nchar > 0, counts / nchar, 1.0)

    alnum = share(r"[a-zA-Z0-9\n?!,.]")
    return {"non_alpha_numeric": np.where(nchar > 0, 1.0 - alnum, 1.0),
            "numbers_ratio": share(r"[0-9]"), "white_space": share(r"[\t\n\r\x08 ]"),
            "parentheses_ratio": share(r"[{}⟨⟩\[\]()]")}


@cache
def _dup_kernel():
    import numba

    @numba.njit(cache=True, nogil=True)
    def scan(h: np.ndarray, cum: np.ndarray, n: int) -> int:
        seen = set()
        seen.add(np.uint64(0))
        seen.discard(np.uint64(0))
        duplicated = 0
        overlap = 0
        for i in range(len(h)):
            if h[i] in seen:
                duplicated += cum[i + n] - cum[i + overlap] + min(n - overlap, n - 1)
                overlap = n
            else:
                seen.add(h[i])
            overlap = max(overlap - 1, 0)
        return duplicated

    return scan


def _top_ngram(words: list[str], ids: np.ndarray, n: int) -> str:
    """The most frequent word n-gram joined by spaces (ties: the first seen)."""
    _, first, counts = np.unique(_hashes(ids, n), return_index=True, return_counts=True)
    start = int(first[counts == counts.max()].min())
    return " ".join(words[start:start + n])


def _boilerplate(text: str) -> float:
    lower = text.lower()
    if "lorem ipsum" not in lower and not any(p in lower for p in POLICY + POLICY_LONG):
        return 0.0
    paragraphs = text.split("\n\n")
    hits = 0
    for paragraph in paragraphs:
        paragraph = paragraph.strip().lower()
        if "lorem ipsum" in paragraph:
            return 1.0
        hits += any(p in paragraph for p in POLICY + POLICY_LONG)
    return hits / len(paragraphs)


def _symbol_words(text: str, words: list[str]) -> int:
    count = sum(1 for w in words if w in ELLIPSIS)
    for word in HASH_WORD.findall(text):
        if word not in ELLIPSIS and len(HASH_RUN.findall(word)) / len(word) > 0.5:
            count += 1
    return count


def compute(texts: list[str], params: dict) -> dict[str, np.ndarray]:
    out = {name: np.full(len(texts), np.nan) for name in SCORES}
    out.update(_char_ratios(texts))
    scan = _dup_kernel()
    for i, text in enumerate(texts):
        nchar = len(text)
        words = text.strip().split()
        lines = [x for x in text.split("\n") if x.strip()]
        paragraphs = text.split("\n\n")
        urls = URL.findall(text) if "http" in text else ()
        out["urls_ratio"][i] = sum(map(len, urls)) / nchar if nchar else 1.0
        out["boilerplate_string_ratio"][i] = _boilerplate(text)
        out["repeated_paragraphs"][i] = len(set(paragraphs)) / len(paragraphs)
        joined = len("".join(paragraphs))
        if joined:
            out["repeated_paragraphs_char"][i] = len("".join(set(paragraphs))) / joined
        if lines:
            stripped = [x.strip() for x in lines]
            n_lines = len(lines)
            out["repeated_lines"][i] = len(set(lines)) / n_lines
            out["repeated_lines_char"][i] = len("".join(set(lines))) / len("".join(lines))
            out["punctuation"][i] = sum(not s.endswith(END_MARKS) for s in stripped) / n_lines
            out["ellipsis"][i] = sum(s.lower().endswith(ELLIPSIS_ENDS)
                                     for s in stripped) / n_lines
            out["bullet_ratio"][i] = sum(s.startswith(BULLETS) for s in stripped) / n_lines
        n_words = len(words)
        out["word_count"][i] = n_words
        out["common_english_words"][i] = sum(1 for w in words if w in COMMON_WORDS)
        if not n_words:
            continue
        lengths = [len(w) for w in words]
        out["symbol_to_word"][i] = _symbol_words(text, words) / n_words
        out["words_with_alphabets"][i] = sum(
            1 for w in words if w.isalpha() or ALPHA.search(w)) / n_words
        out["mean_word_length"][i] = sum(lengths) / n_words
        out["max_word_length"][i] = max(lengths)
        ids, cum = word_arrays(words)
        for n in TOP:
            if n_words < n:
                out[f"repeating_top_{n}grams"][i] = 1.0
                continue
            gram = _top_ngram(words, ids, n)
            out[f"repeating_top_{n}grams"][i] = text.count(gram) * len(gram) / nchar
        for n in DUP:
            out[f"repeating_dup_{n}gram"][i] = (
                1.0 if n_words < n else scan(_hashes(ids, n), cum, n) / nchar)
    return out


FAMILY = Family(
    name="nemo_en", languages="space",
    source="NeMo Curator 1.4 config/text/heuristic_filter_english_pipeline.yaml (28 filters)",
    scopes={**{s: "neutral" for s in (
                "numbers_ratio", "urls_ratio", "white_space", "parentheses_ratio",
                "boilerplate_string_ratio", "repeated_lines", "repeated_paragraphs",
                "repeated_lines_char", "repeated_paragraphs_char", "ellipsis", "bullet_ratio")},
            **{s: "words" for s in (
                "symbol_to_word", "word_count", "punctuation", "words_with_alphabets",
                "mean_word_length", "max_word_length", *(f"repeating_top_{n}grams" for n in TOP),
                *(f"repeating_dup_{n}gram" for n in DUP))},
            "non_alpha_numeric": "english", "common_english_words": "english"},
    bins={**{s: ScoreBins(0, 1, 20) for s in SCORES},
          "word_count": ScoreBins(1, 1e6, 30, log=True),
          "common_english_words": ScoreBins(0, 50, 25),
          "mean_word_length": ScoreBins(0, 20, 40),
          "max_word_length": ScoreBins(1, 1e5, 25, log=True)},
    rules=(
        Rule("max_non_alpha_numeric", "non_alpha_numeric", "max", 0.25,
             "share of characters outside [a-zA-Z0-9\\n?!,.]"),
        Rule("max_symbol_to_word", "symbol_to_word", "max", 0.1, "ellipsis or '#' words"),
        Rule("max_numbers_ratio", "numbers_ratio", "max", 0.15),
        Rule("max_urls_ratio", "urls_ratio", "max", 0.2),
        Rule("max_white_space", "white_space", "max", 0.25),
        Rule("max_parentheses_ratio", "parentheses_ratio", "max", 0.1),
        Rule("max_boilerplate_string_ratio", "boilerplate_string_ratio", "max", 0.4),
        Rule("min_repeated_lines", "repeated_lines", "min", 0.7, "distinct lines / lines"),
        Rule("min_repeated_paragraphs", "repeated_paragraphs", "min", 0.7),
        Rule("min_repeated_lines_char", "repeated_lines_char", "min", 0.8),
        Rule("min_repeated_paragraphs_char", "repeated_paragraphs_char", "min", 0.8),
        Rule("min_word_count", "word_count", "min", 50),
        Rule("max_word_count", "word_count", "max", 100_000),
        Rule("max_punctuation", "punctuation", "max", 0.85, "lines without an end mark"),
        Rule("min_words_with_alphabets", "words_with_alphabets", "min", 0.8),
        Rule("min_common_english_words", "common_english_words", "min", 2),
        Rule("min_mean_word_length", "mean_word_length", "min", 3),
        Rule("max_mean_word_length", "mean_word_length", "max", 10),
        Rule("max_max_word_length", "max_word_length", "max", 1000),
        Rule("max_ellipsis", "ellipsis", "max", 0.3, "lines ending with an ellipsis"),
        *(Rule(f"max_repeating_top_{n}grams", f"repeating_top_{n}grams", "max", t)
          for n, t in TOP.items()),
        *(Rule(f"max_repeating_dup_{n}gram", f"repeating_dup_{n}gram", "max", t)
          for n, t in DUP.items()),
        Rule("max_bullet_ratio", "bullet_ratio", "max", 0.9, "lines starting with a bullet"),
    ),
    compute=compute,
)
