"""url_filter: block lists (plain files and the UT1 layout), subdomains, look-alikes, case,
ports, user info, IDN, substrings, documents without a URL, and a real run."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from curator import Pipeline, ReadJsonl, UrlFilter, WriteParquet
from tests.conftest import assert_accounting, sample_documents


@pytest.fixture()
def lists(tmp_path) -> Path:
    (tmp_path / "mine.txt").write_text("# my list\nexample.com\n\n例え.jp  # IDN\n*.wild.net\n")
    for category, domains in {"adult": "porn.example\nxxx.test\n",
                              "gambling": "casino.test\n.bet.example\n"}.items():
        (tmp_path / "ut1" / category).mkdir(parents=True)
        (tmp_path / "ut1" / category / "domains").write_text(domains)
        (tmp_path / "ut1" / category / "urls").write_text("ignored.test/path\n")
    return tmp_path


CASES = {  # url -> expected reason
    "https://example.com/page": "url_blocked:mine",
    "https://a.b.example.com/x?y=1": "url_blocked:mine",
    "HTTPS://WWW.EXAMPLE.COM/": "url_blocked:mine",
    "http://example.com:8080/p": "url_blocked:mine",
    "https://user:pw@example.com/": "url_blocked:mine",
    "https://example.com./": "url_blocked:mine",
    "example.com/no-scheme": "url_blocked:mine",
    "//cdn.example.com/lib.js": "url_blocked:mine",
    "http://例え.jp/": "url_blocked:mine",
    "http://xn--r8jz45g.jp/": "url_blocked:mine",
    "http://www.例え.jp/a": "url_blocked:mine",
    "https://deep.wild.net/": "url_blocked:mine",
    "https://m.porn.example/v": "url_blocked:adult",
    "https://casino.test": "url_blocked:gambling",
    "https://x.bet.example/": "url_blocked:gambling",
    "https://example.com.evil.org/": None,
    "https://myexample.com/": None,
    "https://example.co/": None,
    "https://notexample.com/": None,
    "https://evil.org/?next=example.com": None,
    "https://evil.org/example.com/": None,
    "https://ignored.test/path": None,
    "http://[2001:db8::1]:80/": None,
    "https://例え.com/": None,
    "https://news.org/ads/banner": "url_substring",
    "https://news.org/Sponsored-post": "url_substring",
}


def _table(urls: list[str | None]) -> pa.Table:
    return pa.table({"id": [str(i) for i in range(len(urls))], "text": ["x"] * len(urls),
                     "url": pa.array(urls, pa.string())})


def test_block_lists_subdomains_and_look_alikes(lists):
    stage = UrlFilter(lists=[str(lists / "mine.txt"), str(lists / "ut1")],
                      substrings=["/ads/", "sponsored"])
    reasons = stage.reasons(_table(list(CASES))).to_pylist()
    assert dict(zip(CASES, reasons, strict=True)) == CASES


def test_categories_and_ut1_category_folder(lists):
    only = UrlFilter(lists=[str(lists / "ut1")], categories=["gambling"])
    assert only.reasons(_table(["https://porn.example/", "https://casino.test/"])).to_pylist() \
        == [None, "url_blocked:gambling"]
    folder = UrlFilter(lists=[str(lists / "ut1" / "adult")])
    assert folder.reasons(_table(["https://porn.example/"])).to_pylist() == ["url_blocked:adult"]
    with pytest.raises(ValueError, match="not found among the lists"):
        UrlFilter(lists=[str(lists / "ut1")], categories=["nope"]).setup()
    with pytest.raises(ValueError, match="no such block list"):
        UrlFilter(lists=[str(lists / "missing.txt")])


def test_documents_without_url_are_kept(lists):
    stage = UrlFilter(lists=[str(lists / "mine.txt")], substrings=["ads"])
    assert stage.reasons(_table([None, "", "   "])).to_pylist() == [None, None, None]
    no_column = pa.table({"id": ["a"], "text": ["x"]})
    assert stage.process(no_column).kept.num_rows == 1
    other = UrlFilter(lists=[str(lists / "mine.txt")], url_field="link")
    table = pa.table({"id": ["a"], "text": ["x"], "link": ["https://example.com"]})
    assert other.reasons(table).to_pylist() == ["url_blocked:mine"]


def test_run(tmp_path, lists):
    docs = sample_documents()[:len(CASES)]
    src = tmp_path / "in"
    src.mkdir()
    with open(src / "part-0.jsonl", "w", encoding="utf-8") as f:
        for doc, url in zip(docs, [*CASES, None], strict=False):
            f.write(json.dumps({"id": doc["id"], "text": doc["text"], "url": url},
                               ensure_ascii=False) + "\n")
    run = tmp_path / "run"
    Pipeline([ReadJsonl(path=f"{src}/*.jsonl"),
              UrlFilter(lists=[str(lists / "mine.txt"), str(lists / "ut1")],
                        substrings=["/ads/", "sponsored"]),
              WriteParquet()], output=str(run)).run(executor="local", progress=False)
    stats = assert_accounting(run)
    entry = next(s for s in stats["stages"] if s["type"] == "url_filter")
    expected: dict[str, int] = {}
    for reason in list(CASES.values())[:len(docs)]:
        if reason:
            expected[reason] = expected.get(reason, 0) + 1
    assert entry["removed_by_reason"] == expected
