"""HTML bytes to text, choosing the charset as a browser does.

Order: a byte-order mark, the HTTP ``Content-Type`` charset, the ``<meta charset>`` /
``http-equiv`` tag (or an XML declaration) in the first 1024 bytes, then detection. Labels are
mapped the WHATWG way (resiliparse's ``map_encoding_to_html5``), and Shift_JIS to CP932 as
browsers do. Detection is resiliparse's ``detect_encoding`` (uchardet, C++): it is an order of
magnitude faster than charset-normalizer and reads Shift_JIS, EUC-JP and ISO-2022-JP well.
Undecodable bytes become U+FFFD and are counted.
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
_ESCAPED = re.compile("[\udc80-\udcff]")
_XML_DECL = re.compile(rb"""^\s*<\?xml\s[^>]*?encoding\s*=\s*["']([A-Za-z0-9._:+-]+)""", re.I)
#: Python codec -> the codec browsers actually use for that label (superset encodings).
_BROWSER_CODEC = {"shift_jis": "cp932", "iso-8859-1": "cp1252", "latin-1": "cp1252",
                  "ascii": "cp1252", "gb2312": "gbk", "euc_kr": "cp949"}
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
         (codecs.BOM_UTF16_BE, "utf-16-be"))


@dataclass(frozen=True)
class Decoded:
    """A page as UTF-8, the codec used, where it came from and what could not be decoded."""

    utf8: bytes  # the payload itself where it was valid UTF-8: no decoding, no copy
    encoding: str
    source: str  # bom, http, meta, detected
    replaced_bytes: int
    unknown_label: bool  # a label (header or meta) named no known charset

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


@lru_cache(maxsize=1024)
def browser_codec(label: str | None) -> str | None:
    """The Python codec a browser would use for charset ``label`` (WHATWG names first, then
    Python's aliases); None when unknown."""
    if not label:
        return None
    label = label.strip().strip("\"'")
    mapped = map_encoding_to_html5(label, fallback_utf8=False) or label  # cp932: Python's
    try:
        name = codecs.lookup(mapped).name
    except LookupError:
        return None
    return _BROWSER_CODEC.get(name, name)


def meta_charset(head: bytes) -> str | None:
    """The charset label of a ``<meta>`` tag or XML declaration in ``head``."""
    found = _META.search(head) or _XML_DECL.search(head)
    return found.group(1).decode("ascii") if found else None


def decode_html(payload: bytes, http_charset: str | None = None) -> Decoded:
    """Decode an HTML (or XML) page; see the module docstring for the order of evidence."""
    unknown = False
    for bom, codec in _BOMS:
        if payload.startswith(bom):
            return _decode(payload[len(bom):], codec, "bom", unknown)
    for source in ("http", "meta"):  # the meta tag looked for only where the header fails
        label = http_charset if source == "http" else meta_charset(payload[:PRESCAN_BYTES])
        if label:
            codec = browser_codec(label)
            if codec is None:
                unknown = True
                continue
            if codec.startswith("utf_16") and source == "meta":
                codec = "utf-8"  # a page that names UTF-16 in ASCII is not UTF-16 (WHATWG)
            return _decode(payload, codec, source, unknown)
    detected = browser_codec(detect_encoding(payload, max_len=DETECT_BYTES)) or "utf-8"
    return _decode(payload, detected, "detected", unknown)


def _decode(payload: bytes, codec: str, source: str, unknown: bool) -> Decoded:
    if codec == "utf-8" and (payload.isascii() or _valid_utf8(payload)):
        return Decoded(payload, codec, source, 0, unknown)
    try:
        return Decoded(payload.decode(codec).encode("utf-8"), codec, source, 0, unknown)
    except UnicodeDecodeError:
        pass
    # surrogateescape keeps each undecodable byte as one lone surrogate: count, then replace
    escaped = payload.decode(codec, "surrogateescape")
    text, replaced = _ESCAPED.subn("\ufffd", escaped)
    return Decoded(text.encode("utf-8"), codec, source, replaced, unknown)
