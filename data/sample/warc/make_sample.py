"""Rebuild data/sample/warc/ from the team's corpus (../shared/corpus): see README.md here.

Real WARC files are copied byte for byte; Japanese pages (no public Japanese WARC exists) are
wrapped into ``ja-pages.warc.gz`` as HTTP response records with warcio: real pages from
Apache-2.0 test suites, and Japanese Wikipedia articles (JaQuAD's paragraphs, CC BY-SA 3.0) in a
minimal HTML page each. Only files whose licence allows redistribution are used. Run from the
repo root: ``python data/sample/warc/make_sample.py``.
"""

from __future__ import annotations

import gzip
import html
import io
import json
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
]
JA = CORPUS / "japanese" / "html"
WIKI = CORPUS / "japanese" / "wiki_paragraphs" / "jaquad_train_contexts.jsonl.gz"
WIKI_ARTICLES = 36
PAGE = """<!DOCTYPE html>
<html lang="ja"><head><meta charset="utf-8"><title>{title} - Wikipedia</title></head>
<body><header><nav><a href="/wiki/">メインページ</a> | <a href="/wiki/random">おまかせ表示</a> |
<a href="/wiki/help">ヘルプ</a></nav></header>
<main><article><h1>{title}</h1>
{paragraphs}
</article></main>
<footer><p>テキストはクリエイティブ・コモンズ 表示-継承ライセンスの下で利用可能です。</p></footer>
</body></html>
"""


def wikipedia_pages() -> list[tuple[str, bytes]]:
    """The first WIKI_ARTICLES articles of JaQuAD's contexts, each one minimal HTML page."""
    articles: dict[str, list[str]] = {}
    with gzip.open(WIKI, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if row["title"] not in articles and len(articles) == WIKI_ARTICLES:
                break
            articles.setdefault(row["title"], []).append(row["text"])
    pages = []
    for number, (title, texts) in enumerate(articles.items()):
        paragraphs = "\n".join(f"<p>{html.escape(p)}</p>" for text in texts
                               for p in text.split("\n") if p.strip())
        page = PAGE.format(title=html.escape(title), paragraphs=paragraphs)
        pages.append((f"http://fakehost/jaquad/{number:03d}", page.encode("utf-8")))
    return pages


def japanese_pages() -> list[tuple[str, bytes]]:
    """(url, UTF-8 HTML) of the Japanese pages, in a fixed order."""
    pages = wikipedia_pages()
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
