"""Compress the sample dumps as Wikimedia publishes them: ``*-pages-articles.xml.bz2`` and
``*-pages-articles-multistream.xml.bz2`` with its ``-multistream-index.txt.bz2`` (the
siteinfo in the first stream, PAGES_PER_STREAM pages per stream, the closing tag in the last).
Run from this folder: ``python make_dumps.py``."""

from __future__ import annotations

import bz2
import re
from pathlib import Path
from xml.etree import ElementTree

PAGES_PER_STREAM = 2
HERE = Path(__file__).parent
NS = "{http://www.mediawiki.org/xml/export-0.11/}"


def main() -> None:
    for source in sorted(HERE.glob("*wiki-sample.xml")):
        xml = source.read_bytes()
        db = source.name.split("-")[0]
        (HERE / f"{db}-sample-pages-articles.xml.bz2").write_bytes(bz2.compress(xml, 9))
        first = xml.index(b"  <page>")
        last = xml.rindex(b"</mediawiki>")
        pages = re.findall(rb"  <page>.*?</page>\n", xml[first:last], re.S)
        streams = [xml[:first]]
        streams += [b"".join(pages[i:i + PAGES_PER_STREAM])
                    for i in range(0, len(pages), PAGES_PER_STREAM)]
        streams.append(xml[last:])
        data, index, offset = b"", [], 0
        for number, stream in enumerate(streams):
            packed = bz2.compress(stream, 9)
            if 0 < number < len(streams) - 1:
                for page in re.findall(rb"  <page>.*?</page>\n", stream, re.S):
                    element = ElementTree.fromstring(page)
                    index.append(f"{offset}:{element.findtext('id')}:{element.findtext('title')}")
            data += packed
            offset += len(packed)
        (HERE / f"{db}-sample-pages-articles-multistream.xml.bz2").write_bytes(data)
        (HERE / f"{db}-sample-pages-articles-multistream-index.txt.bz2").write_bytes(
            bz2.compress(("\n".join(index) + "\n").encode(), 9))


if __name__ == "__main__":
    main()
