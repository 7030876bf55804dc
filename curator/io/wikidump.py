"""MediaWiki XML dumps streamed page by page: .xml, .xml.bz2, and byte ranges of a multistream
.bz2 (a run of whole bz2 streams, read with the dump's first stream for its site info).

A multistream dump is a series of bz2 streams: the first holds ``<mediawiki>`` and
``<siteinfo>``, each of the next holds about 100 ``<page>`` elements, and the last closes
``</mediawiki>``. Its index (``offset:page id:title`` lines) gives the stream offsets, so a
dump splits into shards of whole streams that each parse as a document: first stream +
the shard's streams + a closing tag.

The parser keeps only the fields it reads, each cut at a limit (a page's text at
``max_text_chars``; what is past it is counted, :attr:`Page.text_chars`, not kept), so that a
page of any size, a bz2 bomb included, costs bounded memory; bytes that end no XML token within
``MAX_TOKEN_BYTES`` (a gigantic tag or comment expat would buffer whole) are a damaged dump.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from xml.etree import ElementTree

import fsspec

from curator.io.streams import DamagedInput, bz2_chunks

READ_SIZE = 1 << 20
CLOSING = b"</mediawiki>"
MAX_TEXT_CHARS = 4 << 20  # a page's wikitext kept up to this many characters
MAX_FIELD_CHARS = 1 << 12  # every other field
MAX_TOKEN_BYTES = 16 << 20


class DumpError(ValueError):
    """The dump is truncated, corrupt or not a MediaWiki export."""


@dataclass
class SiteInfo:
    dbname: str = ""
    base: str = ""  # the main page's URL: https://ja.wikipedia.org/wiki/...
    namespaces: dict[int, str] = field(default_factory=dict)  # key -> local name

    @property
    def article_url_prefix(self) -> str:
        cut = self.base.find("/wiki/")
        return self.base[:cut + len("/wiki/")] if cut >= 0 else self.base.rsplit("/", 1)[0] + "/"

    @property
    def lang(self) -> str:
        """``jawiki`` -> ``ja``, ``zh_yuewiki`` -> ``zh-yue``."""
        name = self.dbname.removesuffix("wiki")
        return name.replace("_", "-")


@dataclass
class Page:
    page_id: str
    title: str
    namespace: int
    redirect: bool
    timestamp: str
    text: str
    offset: int  # byte offset of the stream (or file start) it came from
    text_chars: int = 0  # the text's length in the dump (more than len(text) when cut)


def stream_offsets(index_url: str) -> list[int]:
    """The distinct stream offsets of a multistream index (``offset:page id:title`` lines)."""
    offsets: set[int] = set()
    with fsspec.open(index_url, "rt", compression="infer", encoding="utf-8") as lines:
        for line in lines:
            head, _, _ = line.partition(":")
            if head.strip():
                offsets.add(int(head))
    return sorted(offsets)


class _ByteRange:
    """``raw[start:end]`` as a file to read: what :func:`bz2_chunks` reads to its end."""

    def __init__(self, raw, start: int, end: int) -> None:
        raw.seek(start)
        self.raw, self.left = raw, end - start

    def read(self, size: int) -> bytes:
        block = self.raw.read(min(size, self.left)) if self.left > 0 else b""
        self.left -= len(block)
        return block


def _bz2_streams(raw, start: int, end: int) -> Iterator[bytes]:
    """Decompress the concatenated bz2 streams in ``raw[start:end]``."""
    try:
        yield from bz2_chunks(_ByteRange(raw, start, end))
    except DamagedInput as err:
        raise DumpError(str(err)) from None


def _whole_file(url: str) -> Iterator[bytes]:
    with fsspec.open(url, "rb", compression="infer") as handle:
        read = getattr(handle, "read1", handle.read)  # (read() loses the data before a cut)
        while block := read(READ_SIZE):
            yield block


def _stream_range(url: str, start: int, end: int, header_end: int) -> Iterator[bytes]:
    with fsspec.open(url, "rb") as raw:
        yield from _bz2_streams(raw, 0, header_end)
        for block in _bz2_streams(raw, start, end):
            # The closing tag has the dump's last stream to itself, so one block holds it.
            yield block.replace(CLOSING, b"")
    yield CLOSING


#: The fields kept, by their element path (local names) below <mediawiki>.
_FIELDS = {("siteinfo", "dbname"): "dbname", ("siteinfo", "base"): "base",
           ("siteinfo", "namespaces", "namespace"): "namespace", ("page", "title"): "title",
           ("page", "ns"): "ns", ("page", "id"): "id", ("page", "revision", "timestamp"):
           "timestamp", ("page", "revision", "text"): "text"}


class _Target:
    """An ElementTree parser target that turns a dump's events into :class:`SiteInfo` and
    :class:`Page` items, keeping each field up to its limit."""

    def __init__(self, offset: int, max_text_chars: int) -> None:
        self.offset, self.max_text = offset, max_text_chars
        self.path: list[str] = []
        self.items: list[SiteInfo | Page] = []
        self.fields: dict[str, str] = {}
        self.site = SiteInfo()
        self.redirect = False
        self.field: str | None = None
        self.parts: list[str] = []
        self.chars = 0
        self.events = 0
        self.key = 0

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        self.events += 1
        self.path.append(_local(tag))
        where = tuple(self.path[1:])
        if where == ("page",):
            self.fields, self.redirect = {}, False
        elif where == ("page", "redirect"):
            self.redirect = True
        elif where == ("siteinfo", "namespaces", "namespace"):
            self.key = int(attrib.get("key", "0") or 0)
        self.field = _FIELDS.get(where)
        if self.field == "id" and "id" in self.fields:
            self.field = None  # a page's first <id> is its own
        self.parts, self.chars = [], 0

    def data(self, text: str) -> None:
        self.events += 1
        if self.field is None:
            return
        limit = self.max_text if self.field == "text" else MAX_FIELD_CHARS
        if self.chars < limit:
            self.parts.append(text[:limit - self.chars])
        self.chars += len(text)

    def end(self, tag: str) -> None:
        self.events += 1
        where = tuple(self.path[1:])
        self.path.pop()
        if self.field is not None:
            value = "".join(self.parts)
            if self.field == "namespace":
                self.site.namespaces[self.key] = value
            elif where[0] == "siteinfo":
                setattr(self.site, self.field, value)
            else:
                self.fields[self.field] = value
                if self.field == "text":
                    self.fields["text_chars"] = self.chars
            self.field = None
        if where == ("siteinfo",):
            self.items.append(self.site)
        elif where == ("page",):
            f = self.fields
            self.items.append(Page(page_id=f.get("id", ""), title=f.get("title", ""),
                                   namespace=int(f.get("ns") or 0), redirect=self.redirect,
                                   timestamp=f.get("timestamp", ""), text=f.get("text", ""),
                                   offset=self.offset, text_chars=int(f.get("text_chars", 0))))

    def close(self) -> None:
        return None


def iter_pages(url: str, byte_range: tuple[int, int, int] | None = None,
               max_text_chars: int = MAX_TEXT_CHARS) -> Iterator[SiteInfo | Page]:
    """The dump's :class:`SiteInfo`, then its pages in order. ``byte_range`` =
    (start, end, end of the first stream) reads only those streams of a multistream dump."""
    chunks = _whole_file(url) if byte_range is None else _stream_range(url, *byte_range)
    target = _Target(0 if byte_range is None else byte_range[0], max_text_chars)
    parser = ElementTree.XMLParser(target=target)
    quiet, seen = 0, 0  # bytes fed since the last event
    try:
        for chunk in chunks:
            for piece in range(0, len(chunk), READ_SIZE):
                part = chunk[piece:piece + READ_SIZE]
                try:
                    parser.feed(part)
                finally:  # the pages that ended before an error are good
                    yield from target.items
                    target.items.clear()
                quiet = 0 if target.events != seen else quiet + len(part)
                seen = target.events
                if quiet > MAX_TOKEN_BYTES:
                    raise DumpError(f"{quiet} bytes without an XML element or text ending: "
                                    "not a MediaWiki dump there")
        parser.close()
        yield from target.items
    except ElementTree.ParseError as err:
        raise DumpError(f"XML error: {err}") from None
    except (EOFError, OSError) as err:
        raise DumpError(f"unreadable dump: {err}") from None


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]
