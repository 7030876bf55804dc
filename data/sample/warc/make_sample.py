"""Rebuild data/sample/warc/ from the team's corpus (../shared/corpus): see README.md here.

Real WARC files are copied byte for byte; real Japanese pages (no public Japanese WARC exists)
are wrapped into ``ja-pages.warc.gz`` as HTTP response records with warcio. Run from the repo
root: ``python data/sample/warc/make_sample.py``.
"""

from __future__ import annotations

import csv
import gzip
import io
import shutil
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parents[3] / "shared" / "corpus"
COPIED = [
    "warc/commoncrawl/resiliparse-cc-excerpt.warc.gz",
    "warc/commoncrawl/whirlwind.warc.gz",
    "warc/wget/dolma-sample-0000.warc.gz",
    "warc/wget/dolma-sample-0001.warc.gz",
    "warc/heritrix/IAH-20080430204825-00000-blackbook-truncated.warc.gz",
]
JA = CORPUS / "japanese" / "html"
SKIPPED_NEWS = {"000036.html.gz"}  # a 623 KB goo blog page: keeps the sample small


def japanese_pages() -> list[tuple[str, bytes]]:
    """(url, UTF-8 HTML) of the Japanese pages, in a fixed order."""
    pages = []
    with open(JA / "news_blogs_2021" / "index.tsv", encoding="utf-8") as f:
        for row in csv.DictReader(f, delimiter="\t"):
            if row["file"] not in SKIPPED_NEWS:
                path = JA / "news_blogs_2021" / "html" / row["file"]
                pages.append((row["url"], gzip.decompress(path.read_bytes())))
    pages.append(("https://www3.nhk.or.jp/news/easy/k10011959621000/k10011959621000.html",
                  gzip.decompress((JA / "trafilatura" / "nhk.or.jp.k100.html.gz").read_bytes())))
    for name in ("hukumusume", "yahoo-4"):  # readability's test pages have no URL: its fakehost
        html = gzip.decompress((JA / "readability" / name / "source.html.gz").read_bytes())
        pages.append((f"http://fakehost/readability/{name}/source.html", html))
    pages.append(("http://fakehost/uzushio/perldoc_ja.html",
                  gzip.decompress((JA / "uzushio" / "perldoc_ja.html.gz").read_bytes())))
    return pages


def write_japanese_warc(path: Path) -> int:
    pages = japanese_pages()
    with open(path, "wb") as f:
        writer = WARCWriter(f, gzip=True)
        for url, html in pages:
            http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                               ("Content-Length", str(len(html)))],
                                    protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(
                url, "response", payload=io.BytesIO(html), http_headers=http))
    return len(pages)


def main() -> None:
    for rel in COPIED:
        shutil.copyfile(CORPUS / rel, HERE / Path(rel).name)
    count = write_japanese_warc(HERE / "ja-pages.warc.gz")
    print(f"copied {len(COPIED)} WARC files; wrapped {count} Japanese pages")


if __name__ == "__main__":
    main()
