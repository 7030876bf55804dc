# ruff: noqa: RUF002, RUF003  (full-width forms are the point here)
"""Mask personal data: e-mail addresses, phone numbers (Japanese and international formats),
IPv4/IPv6 addresses and card numbers (Luhn-checked), each with its own token; counted per kind.

Full-width forms (``０３－１２３４－５６７８``, ``ｉｎｆｏ＠ｅｘａｍｐｌｅ．ｊｐ``: Japanese
pages type them in full-width ASCII) are found as their ASCII forms: a document holding a
full-width digit or ``＠`` is also searched in a copy where every full-width ASCII character
(U+FF01-FF5E) and the ideographic space read as ASCII, one code point for one, so a match's
position in the copy is its position in the document, where it is masked."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from curator.batch import TEXT, BatchResult
from curator.stages.base import BatchStage

Kind = Literal["email", "card", "ip", "phone"]
KINDS: tuple[Kind, ...] = ("email", "card", "ip", "phone")  # the order they are masked in

# RE2 (pyarrow): e-mail addresses, replaced in Arrow without leaving native code.
EMAIL = (r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*"
         r"@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}")
# RE2 prefilters: only documents that match one go through Python's regex for that kind.
_PREFILTER = {
    "card": r"\d[ -]?\d{3}",
    "ip": r"\d{1,3}\.\d{1,3}\.\d{1,3}\.\d|[0-9A-Fa-f]{0,4}:[0-9A-Fa-f]{0,4}:",
    "phone": r"\d{2,4}[-\x{2010}\x{2013}\x{2014}\x{2015}\x{2212}\x{30fc}\x{ff0d}\x{ff70} ).]"
             r"|\+\d|0\d{9}",
}
# ASCII hyphen, hyphen, en and em dash, horizontal bar, minus, the long-vowel mark (ー, ｰ: typed
# as a dash in Japanese numbers, 03ー1234ー5678) and full-width hyphen-minus
_DASH = "\\-\u2010\u2013\u2014\u2015\u2212\u30fc\uff0d\uff70"
_D = f"[{_DASH}]"
_CARD = re.compile(r"(?<![0-9A-Za-z_.,-])\d(?:[ -]?\d){12,18}(?![0-9A-Za-z_-]|[.,]\d)")
_V4 = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?:\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}"
_H = r"[0-9A-Fa-f]{1,4}"
_V6 = ("(?:"
       rf"(?:{_H}:){{7}}{_H}|(?:{_H}:){{1,7}}:|(?:{_H}:){{1,6}}:{_H}|"
       rf"(?:{_H}:){{1,5}}(?::{_H}){{1,2}}|(?:{_H}:){{1,4}}(?::{_H}){{1,3}}|"
       rf"(?:{_H}:){{1,3}}(?::{_H}){{1,4}}|(?:{_H}:){{1,2}}(?::{_H}){{1,5}}|"
       rf"{_H}:(?::{_H}){{1,6}}|:(?::{_H}){{1,7}}|"
       rf"::(?:[Ff]{{4}}(?::0{{1,4}})?:)?{_V4}|(?:{_H}:){{1,4}}:{_V4}"
       ")")
_IP = re.compile(rf"(?<![0-9A-Za-z_.:]){_V6}(?![0-9A-Za-z_:]|\.\d)"
                 rf"|(?<![0-9A-Za-z_.]){_V4}(?![0-9A-Za-z_]|\.\d)")
_PHONE = re.compile(
    rf"(?<![0-9A-Za-z_+./{_DASH}])(?:"
    # +81 3-1234-5678, +81 (0)90 1234 5678, +1 (415) 555-0132, +44 20 7946 0958, +8613812345678
    rf"\+\d{{1,3}}(?:[ .{_DASH}]?(?:\(\d{{1,4}}\)|\d{{1,6}})){{1,6}}"
    # 03-1234-5678, 090-1234-5678, 0120-123-456, 03(1234)5678, (03) 1234-5678, 0312345678
    rf"|0\d{{1,4}}(?:{_D}|\s)\d{{1,4}}(?:{_D}|\s)\d{{3,4}}|0\d{{1,4}}\(\d{{1,4}}\)\d{{3,4}}"
    rf"|\(0\d{{1,4}}\)\s?\d{{1,4}}{_D}\d{{3,4}}|0[5789]0\d{{8}}|0120\d{{6}}"
    # (415) 555-0132, 415-555-0132
    rf"|\(\d{{3}}\)\s?\d{{3}}{_D}\d{{4}}|\d{{3}}{_D}\d{{3}}{_D}\d{{4}}"
    rf")(?![0-9A-Za-z_{_DASH}]|[.,]\d)")


# A document with one of these is searched in its ASCII reading too: a full-width digit or ＠,
# full-width letters at an @, an ASCII digit next to a full-width character (０３, ｉｎｆｏ@x.jp,
# 192．168．0．1, 03（1234）5678).
_WIDE = "\\x{ff01}-\\x{ff5e}\\x{3000}"
_WIDE_PREFILTER = (rf"[\x{{ff10}}-\x{{ff19}}\x{{ff20}}]|[{_WIDE}]@|@[{_WIDE}]|\d[{_WIDE}]"
                   rf"|[{_WIDE}]\d")
_ASCII = str.maketrans({**{chr(c): chr(c - 0xFEE0) for c in range(0xFF01, 0xFF5F)},
                        "\u3000": " "})
_EMAIL = re.compile(EMAIL)


def ascii_reading(text: str) -> str:
    """``text`` with full-width ASCII (U+FF01-FF5E) and the ideographic space as ASCII: one
    code point for one, so positions are the same."""
    return text.translate(_ASCII)


def luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _is_card(match: re.Match[str]) -> bool:
    text = match.group()
    digits = re.sub(r"\D", "", text)
    if not 13 <= len(digits) <= 19 or digits[0] not in "23456" or not luhn(digits):
        return False
    groups = re.split(r"[ -]", text)  # no separators, or one kind in groups of 2-6 digits
    return len(groups) == 1 or (len(set(re.findall(r"[ -]", text))) == 1
                                and all(2 <= len(g) <= 6 for g in groups))


def _is_phone(match: re.Match[str]) -> bool:
    text = match.group()
    digits = re.sub(r"\D", "", text)
    if text.startswith("+"):
        return 8 <= len(digits) <= 15
    if text[0] == "0" or text.startswith("(0"):
        return len(digits) in (10, 11)
    return len(digits) == 10


def _is_ip(match: re.Match[str]) -> bool:
    """IPv4, or IPv6 with a digit in it (``a::b`` and ``dead::beef`` read as words)."""
    text = match.group()
    return ":" not in text or any(c.isdigit() for c in text)


_CHECKS: dict[str, tuple[re.Pattern[str], Callable[[re.Match[str]], bool] | None]] = {
    "card": (_CARD, _is_card), "ip": (_IP, _is_ip), "phone": (_PHONE, _is_phone)}


class Pii(BatchStage):
    """Replace personal data with a token per kind (``<EMAIL>``, ``<PHONE>``, ``<IP>``,
    ``<CARD>``). E-mail addresses are replaced in Arrow (RE2); for the other kinds Arrow finds the
    documents that may hold one and Python's regex checks them (digit counts, Luhn checksum and
    an issuer's first digit for cards), so years, prices, dates, ISBNs and version numbers stay.
    Phones: Japanese domestic (03-1234-5678, 090-1234-5678, 0120-123-456, 03(1234)5678, with
    any dash, ー included), ``+`` international (E.164: 8-15 digits, +81 included) and North
    American. Full-width forms (``０３－１２３４－５６７８``, ``ｉｎｆｏ＠ｅｘａｍｐｌｅ．ｊｐ``)
    are masked as their ASCII forms are. Masked spans are counted per kind in the stage's
    notes (``pii_email``, ...). Keeps every document."""

    type = "pii"
    rewrites_text = True
    version = 2  # 2: full-width forms masked; ー and other dashes in phone numbers

    kinds: list[Kind] = Field(default_factory=lambda: list(KINDS),
                              description="Kinds to mask: email, card, ip, phone.")
    tokens: dict[Kind, str] = Field(
        default_factory=lambda: {"email": "<EMAIL>", "card": "<CARD>", "ip": "<IP>",
                                 "phone": "<PHONE>"},
        description="Replacement per kind (kinds not named: <KIND>).")

    def token(self, kind: str) -> str:
        return self.tokens.get(kind, f"<{kind.upper()}>")  # type: ignore[call-overload]

    def mask(self, text: pa.Array) -> tuple[pa.Array, dict[str, int]]:
        """Masked texts and the number of spans masked per kind."""
        notes: dict[str, int] = {}
        text = text.cast(pa.string())
        for kind in (k for k in KINDS if k in self.kinds):
            if kind == "email":
                notes["pii_email"] = pc.sum(pc.count_substring_regex(text, EMAIL)).as_py() or 0
                text = pc.replace_substring_regex(text, EMAIL, self.token(kind).replace("\\",
                                                                                         "\\\\"))
                continue
            candidate = pc.fill_null(pc.match_substring_regex(text, _PREFILTER[kind]), False)
            rows = pc.indices_nonzero(candidate).to_pylist()
            if not rows:
                continue
            pattern, check = _CHECKS[kind]
            token, found = self.token(kind), 0

            def replace(m: re.Match[str], check=check, token=token) -> str:
                nonlocal found
                if check is not None and not check(m):
                    return m.group()
                found += 1
                return token

            values = text.to_pylist()
            for i in rows:
                values[i] = pattern.sub(replace, values[i])
            text = pa.array(values, pa.string())
            notes[f"pii_{kind}"] = found
        return self._mask_wide(text, notes)

    def _mask_wide(self, text: pa.Array, notes: dict[str, int]) -> tuple[pa.Array, dict[str, int]]:
        """Mask what only the ASCII reading of a document shows (full-width forms)."""
        wide = pc.fill_null(pc.match_substring_regex(text, _WIDE_PREFILTER), False)
        rows = pc.indices_nonzero(wide).to_pylist()
        if not rows:
            return text, notes
        values = text.to_pylist()
        for kind in (k for k in KINDS if k in self.kinds):
            pattern, check = (_EMAIL, None) if kind == "email" else _CHECKS[kind]
            token, found = self.token(kind), 0
            for i in rows:
                value = values[i]
                reading = ascii_reading(value)
                spans = [m.span() for m in pattern.finditer(reading)
                         if (check is None or check(m)) and reading[m.start():m.end()]
                         != value[m.start():m.end()]]
                for start, end in reversed(spans):
                    value = value[:start] + token + value[end:]
                found += len(spans)
                values[i] = value
            if found:
                notes[f"pii_{kind}"] = notes.get(f"pii_{kind}", 0) + found
        return pa.array(values, pa.string()), notes

    def process(self, batch: pa.Table) -> BatchResult:
        text, notes = self.mask(batch.column(TEXT).combine_chunks())
        batch = batch.set_column(batch.schema.get_field_index(TEXT), TEXT, text)
        return BatchResult(kept=batch, notes={k: v for k, v in notes.items() if v})

