"""A plain reference implementation of decontamination (strings, tuples and sets), and the
text variants used to plant benchmark items: for checking the stage, not used by it."""

from __future__ import annotations

import random
import re
import unicodedata
from collections import defaultdict
from dataclasses import dataclass


@dataclass(frozen=True)
class Params:
    n_word: int = 13
    min_word: int = 8
    n_char: int = 50
    min_char: int = 20
    max_docs: int = 10
    margin: int = 200
    min_fragment: int = 200
    max_splits: int = 10
    separator: str = "\n\n"
    cjk_threshold: float = 0.5
    char_languages: tuple[str, ...] = ("ja", "zh")


def is_cjk(c: str) -> bool:
    cp = ord(c)
    return any(lo <= cp <= hi for lo, hi in (
        (0x3040, 0x30FF), (0x31F0, 0x31FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF),
        (0xF900, 0xFAFF), (0xFF66, 0xFF9F), (0x20000, 0x3FFFF)))


def mostly_cjk(text: str, threshold: float) -> bool:
    letters = [c for c in text if unicodedata.category(c)[0] in "LN"]
    return bool(letters) and sum(map(is_cjk, letters)) >= threshold * len(letters)


def units(text: str, char_mode: bool) -> list[tuple[str, int, int]]:
    """Normalised units with their first and past-last character: each character NFKC'd and
    case-folded; letters, digits and marks make words (or are units in character mode); a mark
    composes with the letter before it where NFC does; format characters are skipped; the rest
    separates."""
    out: list[list] = []
    in_word = after_letter = False
    for i, ch in enumerate(text):
        for c in unicodedata.normalize("NFKC", ch).casefold():
            category = unicodedata.category(c)
            if category == "Cf":
                continue
            if category[0] not in "LNM":
                in_word = after_letter = False
                continue
            if category[0] == "M" and after_letter:
                composed = unicodedata.normalize("NFC", out[-1][0][-1] + c)
                if len(composed) == 1:
                    out[-1][0] = out[-1][0][:-1] + composed
                    out[-1][2] = i + 1
                    continue
            if char_mode or not in_word:
                out.append([c, i, i + 1])
                in_word = not char_mode
            else:
                out[-1][0] += c
                out[-1][2] = i + 1
            after_letter = True
    return [(u, a, b) for u, a, b in out]


def doc_mode(text: str, lang: str | None, p: Params) -> bool:
    """True for character n-grams."""
    if lang:
        code = re.sub(r"[-_].*", "", lang.lower())
        if code:
            return code in p.char_languages
    return mostly_cjk(text, p.cjk_threshold)


@dataclass(frozen=True)
class Task:
    name: str
    items: list[tuple[str, list[str], list[str]]]  # (id, texts used whole if short, answers)


def reference(docs: list[dict], tasks: list[Task], p: Params) -> dict:
    """What the stage should do to ``docs`` ({id, text, lang?}): ``kept`` id → text,
    ``removed`` id → why, ``spans`` id → [(task, item, start, end)]."""
    keys: dict[tuple[bool, tuple[str, ...]], tuple[int, str, str]] = {}
    order = 0
    for task in tasks:
        for item, texts, answers in task.items:
            for text, whole in [(t, True) for t in texts] + [(a, False) for a in answers]:
                char = mostly_cjk(text, p.cjk_threshold)
                seq = tuple(u for u, _, _ in units(text, char))
                n, least = (p.n_char, p.min_char) if char else (p.n_word, p.min_word)
                grams = {seq[i:i + n] for i in range(len(seq) - n + 1)} if len(seq) >= n \
                    else {seq} if len(seq) >= least and whole else set()
                for gram in sorted(grams):
                    keys.setdefault((char, gram), (order, task.name, item))
            order += 1
    sizes = {mode: sorted({len(g) for m, g in keys if m == mode}) for mode in (False, True)}
    found: dict[str, list] = defaultdict(list)
    docs_of: dict[tuple, set] = defaultdict(set)
    for doc in docs:
        char = doc_mode(doc["text"], doc.get("lang"), p)
        seq = units(doc["text"], char)
        words = tuple(u for u, _, _ in seq)
        for m in sizes[char]:
            for i in range(len(seq) - m + 1):
                key = (char, words[i:i + m])
                if key in keys:
                    found[doc["id"]].append((seq[i][1], keys[key], seq[i + m - 1][2]))
                    docs_of[key].add(doc["id"])
    frequent = {keys[k] for k, ids in docs_of.items() if len(ids) > p.max_docs}
    out: dict = {"kept": {}, "removed": {}, "spans": {}}
    for doc in docs:
        matches = sorted(m for m in found[doc["id"]] if m[1] not in frequent)
        if not matches:
            out["kept"][doc["id"]] = doc["text"]
            continue
        spans: list[list] = []
        for start, (_, task, item), end in matches:
            if spans and start <= spans[-1][3]:
                spans[-1][3] = max(spans[-1][3], end)
            else:
                spans.append([task, item, start, end])
        out["spans"][doc["id"]] = [tuple(s) for s in spans]
        text = doc["text"]
        regions: list[list[int]] = []
        for a, b in sorted((max(0, s - p.margin), min(len(text), e + p.margin))
                           for _, _, s, e in spans):
            if regions and a <= regions[-1][1]:
                regions[-1][1] = max(regions[-1][1], b)
            else:
                regions.append([a, b])
        cuts = [0] + [x for r in regions for x in r] + [len(text)]
        pieces = [text[a:b] for a, b in zip(cuts[::2], cuts[1::2], strict=True)
                  if b - a >= p.min_fragment]
        if len(regions) > p.max_splits:
            out["removed"][doc["id"]] = "split_too_often"
        elif not pieces:
            out["removed"][doc["id"]] = "fragments_too_short"
        else:
            out["kept"][doc["id"]] = p.separator.join(pieces)
    return out


# ----------------------------------------------------------------------------- text variants
def _halfwidth_map() -> dict[str, str]:
    """Full-width katakana → half-width (voiced ones as base + ﾞ/ﾟ), from NFKC itself."""
    table = {unicodedata.normalize("NFKC", chr(c)): chr(c) for c in range(0xFF61, 0xFFA0)}
    marks = {"\u3099": "\uff9e", "\u309a": "\uff9f"}
    for c in range(0x30A1, 0x30FB):
        base, *mark = unicodedata.normalize("NFD", chr(c))
        if base in table and all(m in marks for m in mark):
            table[chr(c)] = table[base] + "".join(marks[m] for m in mark)
    return table


_HALF = _halfwidth_map()


def _fullwidth_ascii(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if c.isascii() and c.isalnum() else c for c in text)


def variant(text: str, kind: str, japanese: bool, rng: random.Random) -> str:
    """``text`` as contamination is found in the wild: ``verbatim``, ``case`` changed,
    ``spacing`` and punctuation changed, ``rewrapped`` into short lines, or ``width`` (full-
    width ASCII, half-width katakana)."""
    if kind == "verbatim":
        return text
    if kind == "case":
        return text.upper() if not japanese else _fullwidth_ascii(text).upper()
    if kind == "spacing":
        if japanese:
            text = text.translate(str.maketrans({"。": "\uff0e", "、": "\uff0c", "\uff1f": "?",
                                                 "「": "『", "」": "』"}))
            return "".join(c + ("　" if rng.random() < 0.1 else "") for c in text)
        text = re.sub(r"[.,;:?!](?=\s|$)", lambda _: rng.choice([" ;", " -", "...", "!", ""]),
                      text)
        return re.sub(r"\s+", lambda _: rng.choice([" ", "  ", "\t", " \n "]), text)
    if kind == "rewrapped":
        if japanese:
            flat = re.sub(r"\s+", "", text)
            return "\n".join(flat[i:i + 7] for i in range(0, len(flat), 7))
        words = text.split()
        return "\n".join(" ".join(words[i:i + 4]) for i in range(0, len(words), 4))
    if kind == "width":
        return "".join(_HALF.get(c, c) for c in _fullwidth_ascii(text))
    raise ValueError(kind)


VARIANTS = ("verbatim", "case", "spacing", "rewrapped", "width")


def plant(host: str, text: str, rng: random.Random, japanese: bool) -> tuple[str, int]:
    """``host`` with ``text`` inserted mid-paragraph (at a word boundary for space-delimited
    text); the insertion point."""
    paragraphs = [m.span() for m in re.finditer(r"[^\n]{80,}", host)]
    start, end = paragraphs[len(paragraphs) // 2] if paragraphs else (0, len(host))
    at = rng.randrange(start + (end - start) // 3, start + 2 * (end - start) // 3 + 1)
    if not japanese:
        at = host.index(" ", at) + 1 if " " in host[at:end] else end
        return host[:at] + text + " " + host[at:], at
    return host[:at] + text + host[at:], at
