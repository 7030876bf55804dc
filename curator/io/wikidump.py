"""MediaWiki XML dumps streamed page by page: .xml, .xml.bz2, and byte ranges of a multistream
.bz2 (a run of whole bz2 streams, read with the dump's first stream for its site info).

A multistream dump is a series of bz2 streams: the first holds ``<mediawiki>`` and
``<siteinfo>``, each of the next holds about 100 ``<page>`` elements, and the last closes
``</mediawiki>``. Its index (``offset:page id:title`` lines) gives the stream offsets, so a
dump splits into shards of whole streams that each parse as a document: first stream +
the shard's streams + a closing tag.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from xml.etree import ElementTree

import fsspec

from curator.io.streams import DamagedInput, bz2_chunks

READ_SIZE = 1 << 20
CLOSING = b"</mediawiki>"


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
        while block := handle.read(READ_SIZE):
            yield block


def _stream_range(url: str, start: int, end: int, header_end: int) -> Iterator[bytes]:
    with fsspec.open(url, "rb") as raw:
        yield from _bz2_streams(raw, 0, header_end)
        for block in _bz2_streams(raw, start, end):
            # The closing tag has the dump's last stream to itself, so one block holds it.
            yield block.replace(CLOSING, b"")
    yield CLOSING


def iter_pages(url: str, byte_range: tuple[int, int, int] | None = None
               ) -> Iterator[SiteInfo | Page]:
    """The dump's :class:`SiteInfo`, then its pages in order. ``byte_range`` =
    (start, end, end of the first stream) reads only those streams of a multistream dump."""
    chunks = _whole_file(url) if byte_range is None else _stream_range(url, *byte_range)
    offset = 0 if byte_range is None else byte_range[0]
    parser = ElementTree.XMLPullParser(events=("start", "end"))
    root = None
    site = SiteInfo()
    try:
        for chunk in chunks:
            parser.feed(chunk)
            for event, elem in parser.read_events():
                if root is None and event == "start":
                    root = elem
                if event != "end":
                    continue
                tag = _local(elem.tag)
                if tag == "siteinfo":
                    site = _site_info(elem)
                    yield site
                    root.clear()
                elif tag == "page":
                    yield _page(elem, offset)
                    root.clear()
        parser.close()
    except ElementTree.ParseError as err:
        raise DumpError(f"XML error: {err}") from None
    except (EOFError, OSError) as err:
        raise DumpError(f"unreadable dump: {err}") from None


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _child(elem: ElementTree.Element, name: str) -> ElementTree.Element | None:
    for child in elem:
        if _local(child.tag) == name:
            return child
    return None


def _text(elem: ElementTree.Element | None, name: str) -> str:
    child = None if elem is None else _child(elem, name)
    return (child.text or "") if child is not None else ""


def _site_info(elem: ElementTree.Element) -> SiteInfo:
    namespaces = {}
    spaces = _child(elem, "namespaces")
    for ns in [] if spaces is None else spaces:
        namespaces[int(ns.get("key", "0"))] = ns.text or ""
    return SiteInfo(_text(elem, "dbname"), _text(elem, "base"), namespaces)


def _page(elem: ElementTree.Element, offset: int) -> Page:
    revision = _child(elem, "revision")
    return Page(page_id=_text(elem, "id"), title=_text(elem, "title"),
                namespace=int(_text(elem, "ns") or 0),
                redirect=_child(elem, "redirect") is not None,
                timestamp=_text(revision, "timestamp"), text=_text(revision, "text"),
                offset=offset)
