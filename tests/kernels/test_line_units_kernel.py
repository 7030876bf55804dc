# ruff: noqa: RUF001  (full-width forms and Unicode whitespace are the point here)
"""The line-dedup kernels against the Python definition (``stages.dedup.line_units``) on random
texts of awkward characters, for lines, paragraphs and sentence spans: the same units, the same
keys (the kernel's own where it writes them, flagged where Python must), the same rebuilt texts
and removed characters, the same script decision."""

from __future__ import annotations

import random
import unicodedata

import numpy as np
import pyarrow as pa
import pytest
import xxhash

from curator.kernels.line_units import (
    LINE,
    PARAGRAPH,
    SENTENCE,
    SKIPPED,
    japanese_by_script,
    key_tables,
    piece_bound,
    rebuild_kernel,
    unit_keys_kernel,
)
from curator.kernels.shingles import string_buffers
from curator.stages.dedup import line_units
from curator.stages.dedup.line import Units, unit_hashes
from tests.kernels import reference

ALPHABET = ["a", "B", "Zz", " ", "  ", "\t", "\n", "\n", "\r", "\r\n", "\x0b", "\x1c", "\x85",
            "\xa0", "\u1680", "\u2003", "\u2028", "\u3000", "ﾃﾞ", "Ａ", "ß", "İ", "e\u0301",
            "\u0308", "¨", "ﬁ", "日本", "。", "’", "Ω", "가", "\u1161", "😀", "x.", "ア", ". ", "!",
            "?", "。」", "！", "｡", "..", ".)", "”", "』", "）", "?!", "Mr. ", "e.g.", "…", "（",
            "１", "㍿", "ﾞ", "Ⅻ", "\u0b3e"]
UNITS = {"line": LINE, "paragraph": PARAGRAPH, "sentence_span": SENTENCE}
SPAN = 3


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choices(ALPHABET, k=rng.randint(0, 40))) for _ in range(n)]


def _buffers(texts: list[str]):
    buf = string_buffers(pa.array(texts, pa.large_string()))
    longest = int((buf.ends - buf.starts).max(initial=0))
    return buf, longest


def _japanese(texts: list[str]) -> np.ndarray:
    """Half of the documents split as Japanese, half as English, whatever their script."""
    return np.array([k % 2 == 0 for k in range(len(texts))])


def _definition(texts: list[str], japanese: np.ndarray, unit: str) -> dict:
    """(row, unit index) → the unit's pieces' keys, by ``line_units``."""
    want = {}
    for row, text in enumerate(texts):
        spans = line_units.pieces(text, unit, bool(japanese[row]))
        keys = [line_units.normalise(text[a:b]) for a, b in spans]
        for u, key in enumerate(line_units.unit_keys(text, spans, unit, SPAN)):
            if key:
                want[row, u] = keys[u:u + SPAN] if unit == "sentence_span" else [key]
    return want


@pytest.mark.parametrize("unit", list(UNITS))
def test_keys_equal_python(unit):
    texts = _texts(3000, 1)
    japanese = _japanese(texts)
    buf, longest = _buffers(texts)
    rows, index, first, flagged, us, ue, keys, ks, ke = unit_keys_kernel(
        buf.data, buf.starts, buf.ends, UNITS[unit], SPAN, japanese, *key_tables(), longest,
        piece_bound(buf.data, len(texts), UNITS[unit]))
    want = _definition(texts, japanese, unit)
    width = SPAN if unit == "sentence_span" else 1
    assert sorted(zip(rows.tolist(), index.tolist(), strict=True)) == sorted(want)
    for m in np.flatnonzero(~flagged):  # the kernel's own keys are the definition's
        got = [bytes(keys[ks[k]:ke[k]]).decode() for k in range(first[m], first[m] + width)]
        assert got == want[rows[m], index[m]], repr(bytes(buf.data[us[m]:ue[m]]).decode())
    assert 0 < flagged.sum() < len(flagged)


@pytest.mark.parametrize("unit", list(UNITS))
def test_unit_hashes_are_the_definition_s(unit):
    """Through ``unit_hashes`` (kernel, flagged units in Python): a line's hash is its key's
    XXH3-128, a span's the XXH3-128 of its sentences' key digests."""
    texts = _texts(3000, 6)
    japanese = _japanese(texts)
    buf, _ = _buffers(texts)
    rows, index, h1, h2 = unit_hashes(buf, Units(unit, SPAN, None), japanese)
    got = {(r, u): (a, b) for r, u, a, b in zip(rows.tolist(), index.tolist(), h1.tolist(),
                                                 h2.tolist(), strict=True)}
    want = {}
    for unit_id, keys in _definition(texts, japanese, unit).items():
        digests = [xxhash.xxh3_128_digest(k.encode()) for k in keys]
        digest = digests[0] if unit != "sentence_span" else xxhash.xxh3_128_digest(
            b"".join(digests))
        want[unit_id] = (int.from_bytes(digest[:8], "big"), int.from_bytes(digest[8:], "big"))
    assert got == want


@pytest.mark.parametrize("unit", list(UNITS))
def test_rebuild_equals_python(unit):
    texts = _texts(2000, 2)
    japanese = _japanese(texts)
    rng = random.Random(3)
    buf, longest = _buffers(texts)
    rows, drops = [], []
    for row, text in enumerate(texts):
        count = len(line_units.pieces(text, unit, bool(japanese[row])))
        if unit == "sentence_span":
            count = max(0, count - SPAN + 1)
        if rng.random() < 0.7:
            rows.append(row)
            drops.append(sorted(rng.sample(range(count), rng.randint(0, count))))
    ptr = np.cumsum([0, *map(len, drops)]).astype(np.int64)
    flat = np.array([u for d in drops for u in d], np.int64)
    lengths = np.array([len(texts[row]) for row in rows], np.int64)
    out, offsets, dropped, chars, stripped = rebuild_kernel(
        buf.data, buf.starts, buf.ends, UNITS[unit], SPAN, japanese[rows], np.array(rows, np.int64),
        lengths, ptr, flat, longest)
    for k, row in enumerate(rows):
        text = texts[row]
        gone = reference.dropped_pieces(drops[k], unit, SPAN)
        want = reference.rebuild(text, line_units.pieces(text, unit, bool(japanese[row])), gone)
        assert bytes(out[offsets[k]:offsets[k + 1]]).decode() == want
        assert chars[k] == len(text) - len(want)
        assert stripped[k] == len(want.strip())
        assert dropped[k] == len(gone)


def test_script_decides_japanese_as_python_does():
    texts = _texts(2000, 5)
    buf, _ = _buffers(texts)
    got = japanese_by_script(buf.data, buf.starts, buf.ends, np.arange(len(texts)),
                             line_units.CJK_SHARE)
    assert got.tolist() == [line_units.is_japanese(t, None) for t in texts]
    assert 0 < got.sum() < len(texts)


def test_each_code_point_is_kept_mapped_or_left_to_python_as_nfkc_and_casefold_say():
    kind, start, length, mapped = key_tables()
    rng = random.Random(4)
    sample = [cp for cp in rng.sample(range(0x80, 0x30000), 30000) if not 0xD800 <= cp < 0xE000]
    for cp in [*sample, ord("Ａ"), ord("…"), ord("ß"), ord("ﾃ")]:
        ch = chr(cp)
        if ch.isspace():
            continue
        key = unicodedata.normalize("NFKC", ch).casefold()
        if kind[cp] == 0:
            assert key == ch and not unicodedata.combining(ch), hex(cp)
        elif kind[cp] == 2:
            assert bytes(mapped[start[cp]:start[cp] + length[cp]]).decode() == key, hex(cp)
    assert kind[ord("Ａ")] == kind[ord("…")] == kind[ord("ß")] == kind[ord("ﾃ")] == 2
    assert kind[0x0301] == kind[0x1161] == kind[ord("ﾞ")] == kind[ord("㍿")] == 1
    assert kind[ord("日")] == kind[ord("’")] == kind[ord("。")] == 0


def test_the_blocks_the_tables_skip_hold_no_change():
    kind = key_tables().kind
    for first, end in SKIPPED:
        for cp in range(first, end):
            ch = chr(cp)
            assert (unicodedata.decomposition(ch) == "" and not unicodedata.combining(ch)
                    and ch.casefold() == ch), hex(cp)
        assert not kind[first:end].any()
