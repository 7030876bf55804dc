# ruff: noqa: RUF001, RUF002  (Unicode punctuation sets are the point here)
"""The units of line dedup: a document cut into pieces (lines, paragraphs or sentences) and each
unit's normalised key for hashing (the definition the kernels in ``curator.kernels.line_units``
are tested equal to, and the keys of the units they leave to Python; the rebuilt text's
definition is in ``tests/kernels/reference.py``).

A document is ``head + p0 + g1 + p1 + … + gN + pN + tail``: pieces ``p`` and the separators
``g`` between them, kept byte for byte. Lines are split at ``\\r\\n``, ``\\r`` and ``\\n``;
paragraphs at line breaks with one or more blank (whitespace-only) lines between them;
sentences end at ``。！？｡`` (and closing brackets or quotes after them) anywhere, at ``.!?``
followed by whitespace, at half-width ``!?`` anywhere in Japanese, and at every line break.
A sentence-span unit is ``span`` consecutive sentences (a sliding window, as datatrove's
``SentenceDedup``); a document with fewer sentences has none.

Per-document Python loops (regular expressions, ``unicodedata``): no numba kernel yet.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

Unit = Literal["line", "paragraph", "sentence_span"]
Span = tuple[int, int]

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# ``\r(?!\n)``: a CRLF is one line break, never a break and an empty line
_PARAGRAPH_BREAK = re.compile(r"(?:\r\n|\r(?!\n)|\n)(?:[^\S\r\n]*(?:\r\n|\r(?!\n)|\n))+")
_CLOSE = r"[)\]}\"'’”」』）］】〕〉》]*"
_END = r"(?=[\r\n])|\Z"  # a line break or the text's end ends a sentence too
_SENTENCE = re.compile(rf"\S[^\r\n]*?(?:[。！？｡]+{_CLOSE}|[.!?]+{_CLOSE}(?=\s|\Z)|{_END})")
_SENTENCE_JA = re.compile(rf"\S[^\r\n]*?(?:[。！？｡!?]+{_CLOSE}|[.]+{_CLOSE}(?=\s|\Z)|{_END})")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff66-\uff9f]")
#: Share of non-space characters in kana or CJK ideographs above which a text without a
#: language is split as Japanese.
CJK_SHARE = 0.3


def is_japanese(text: str, lang: str | None) -> bool:
    """Japanese by the ``lang`` code (``ja``, ``ja-JP``, ``ja_Hira``…) where given, else by the
    share of kana and CJK ideographs among non-space characters."""
    if lang:
        return re.split(r"[-_]", lang, maxsplit=1)[0].lower() == "ja"
    letters = len(text) - sum(c.isspace() for c in text)
    return letters > 0 and len(_CJK.findall(text)) >= CJK_SHARE * letters


def pieces(text: str, unit: Unit, japanese: bool = False) -> list[Span]:
    """The (start, end) of each piece of ``text``: its lines, paragraphs, or sentences (for
    ``sentence_span``)."""
    if unit == "sentence_span":
        pattern = _SENTENCE_JA if japanese else _SENTENCE
        return [m.span() for m in pattern.finditer(text)]
    breaks = (_LINE_BREAK if unit == "line" else _PARAGRAPH_BREAK).finditer(text)
    spans, start = [], 0
    for found in breaks:
        spans.append((start, found.start()))
        start = found.end()
    spans.append((start, len(text)))
    return spans


def normalise(text: str) -> str:
    """NFKC, case-folded, runs of whitespace as one space, ends trimmed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def unit_keys(text: str, spans: list[Span], unit: Unit, span: int) -> list[str]:
    """Each unit's normalised key, by unit index: a piece's, or for ``sentence_span`` the
    window of ``span`` sentences starting at that sentence ("" for an empty unit: never a
    duplicate)."""
    keys = [normalise(text[s:e]) for s, e in spans]
    if unit != "sentence_span":
        return keys
    return ["\n".join(keys[j:j + span]) for j in range(len(keys) - span + 1)]
