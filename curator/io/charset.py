"""HTML bytes to text, choosing the charset as a browser does.

Order: a byte-order mark, the HTTP ``Content-Type`` charset, the ``<meta charset>`` /
``http-equiv`` tag (or an XML declaration) in the first 1024 bytes, then detection. Labels are
mapped the WHATWG way (resiliparse's ``map_encoding_to_html5``), and Shift_JIS to CP932 as
browsers do. Detection is resiliparse's ``detect_encoding`` (uchardet, C++): it is an order of
magnitude faster than charset-normalizer and reads Shift_JIS, EUC-JP and ISO-2022-JP well.
Undecodable bytes become U+FFFD and are counted.

A label is only evidence: one that names no charset (``rot13``, ``base64``, ``zlib``: Python's
byte transforms; ``unicode_escape``, ``idna``, ``utf-7``, ``undefined``: text codecs that are no
web charset; a NUL, non-ASCII or over-long label) is unknown, and a codec that fails on the page
in any way hands it on to the next evidence; no page stops the reader (docs/limits.md).
"""

from __future__ import annotations

import codecs
import re
import struct
from dataclasses import dataclass
from functools import lru_cache

import pyarrow as pa
from resiliparse.parse.encoding import detect_encoding, map_encoding_to_html5

PRESCAN_BYTES = 1024
DETECT_BYTES = 64 << 10
_META = re.compile(rb"""<meta\s[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9._:+-]+)""", re.I)
#: Lone surrogates: undecodable bytes kept by ``surrogateescape`` (U+DC80..U+DCFF), or any a
#: codec lets through; each becomes U+FFFD.
_SURROGATES = re.compile("[\ud800-\udfff]")
_XML_DECL = re.compile(rb"""^\s*<\?xml\s[^>]*?encoding\s*=\s*["']([A-Za-z0-9._:+-]+)""", re.I)
#: Python codec -> the codec browsers actually use for that label (superset encodings).
_BROWSER_CODEC = {"shift_jis": "cp932", "iso-8859-1": "cp1252", "latin-1": "cp1252",
                  "ascii": "cp1252", "gb2312": "gbk", "euc_kr": "cp949"}
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
         (codecs.BOM_UTF16_BE, "utf-16-be"))
#: Python's text codecs that are no charset a page is written in: escapes, IDNA, the codec that
#: always fails, UTF-7 (browsers refuse it: WHATWG), the table-less and Windows-only ones.
_NOT_CHARSETS = frozenset({"undefined", "unicode-escape", "raw-unicode-escape", "idna",
                           "punycode", "utf-7", "charmap", "mbcs", "oem"})
#: Longest label looked up (the longest charset names are ~20 characters).
MAX_LABEL_CHARS = 64


@dataclass(frozen=True)
class Decoded:
    """A page as UTF-8, the codec used, where it came from and what could not be decoded."""

    utf8: bytes  # the payload itself where it was valid UTF-8: no decoding, no copy
    encoding: str
    source: str  # bom, http, meta, detected
    replaced_bytes: int
    unknown_label: bool  # a label (header or meta) named no charset, or one that failed

    @property
    def text(self) -> str:
        return self.utf8.decode("utf-8")


def _valid_utf8(data: bytes) -> bool:
    """Arrow's (SIMD) UTF-8 check over the bytes in place: no str built, no copy."""
    offsets = pa.py_buffer(struct.pack("<qq", 0, len(data)))
    text = pa.Array.from_buffers(pa.large_string(), 1, [None, offsets, pa.py_buffer(data)])
    try:
        text.validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


def browser_codec(label: str | None) -> str | None:
    """The Python codec a browser would use for charset ``label`` (WHATWG names first, then
    Python's aliases); None when it names no text charset (see the module docstring)."""
    if not label:
        return None
    label = label.strip().strip("\"'")
    if not (0 < len(label) <= MAX_LABEL_CHARS and label.isascii() and label.isprintable()):
        return None
    return _codec_of(label)


@lru_cache(maxsize=1024)
def _codec_of(label: str) -> str | None:
    mapped = map_encoding_to_html5(label, fallback_utf8=False) or label  # cp932: Python's
    try:
        info = codecs.lookup(mapped)
    except (LookupError, ValueError):
        return None
    if not getattr(info, "_is_text_encoding", True) or info.name in _NOT_CHARSETS:
        return None  # base64, zlib, rot13 (bytes or str transforms); escapes, IDNA, UTF-7
    return _BROWSER_CODEC.get(info.name, info.name)


def meta_charset(head: bytes) -> str | None:
    """The charset label of a ``<meta>`` tag or XML declaration in ``head``."""
    found = _META.search(head) or _XML_DECL.search(head)
    return found.group(1).decode("ascii") if found else None


def decode_html(payload: bytes, http_charset: str | None = None) -> Decoded:
    """Decode an HTML (or XML) page; see the module docstring for the order of evidence. Never
    raises on what the page or its labels hold: a label that fails is passed over."""
    unknown = False
    for bom, codec in _BOMS:
        if payload.startswith(bom) and (decoded := _decode(payload[len(bom):], codec, "bom",
                                                           unknown)):
            return decoded
    for source in ("http", "meta"):  # the meta tag looked for only where the header fails
        label = http_charset if source == "http" else meta_charset(payload[:PRESCAN_BYTES])
        if not label:
            continue
        codec = browser_codec(label)
        if codec is not None and codec.startswith(("utf-16", "utf_16")) and source == "meta":
            codec = "utf-8"  # a page that names UTF-16 in ASCII is not UTF-16 (WHATWG)
        decoded = _decode(payload, codec, source, unknown) if codec else None
        if decoded is not None:
            return decoded
        unknown = True
    detected = browser_codec(detect_encoding(payload, max_len=DETECT_BYTES)) or "utf-8"
    decoded = _decode(payload, detected, "detected", unknown) or \
        _decode(payload, "utf-8", "detected", unknown)
    assert decoded is not None  # UTF-8 with surrogateescape decodes any bytes
    return decoded


def _decode(payload: bytes, codec: str, source: str, unknown: bool) -> Decoded | None:
    """``payload`` as UTF-8 through ``codec``, undecodable bytes replaced and counted; None
    where the codec fails otherwise (UTF-16 of an odd length, say). UTF-8 never fails."""
    if codec == "utf-8" and (payload.isascii() or _valid_utf8(payload)):
        return Decoded(payload, codec, source, 0, unknown)
    try:
        return Decoded(payload.decode(codec).encode("utf-8"), codec, source, 0, unknown)
    except UnicodeError:  # undecodable bytes, or a lone surrogate decoded
        pass
    except Exception:  # a codec's own failure (of any kind): the next evidence decides
        return None
    try:
        # surrogateescape keeps each undecodable byte as one lone surrogate: count, replace
        escaped = payload.decode(codec, "surrogateescape")
    except Exception:  # what surrogateescape cannot mend (bytes < 0x80)
        return None
    text, replaced = _SURROGATES.subn("\ufffd", escaped)
    return Decoded(text.encode("utf-8"), codec, source, replaced, unknown)
