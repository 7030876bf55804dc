"""wikipedia source: small ja and en dumps with real wikitext (templates, refs, tables, files,
lists, a redirect, disambiguation pages by template and by category, other namespaces) read as
.xml, .xml.bz2 and multistream shards; `curate run` counts every page; resume; damaged dumps."""

from __future__ import annotations

import bz2
import json
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from curator.cli import app
from curator.io.wikidump import SiteInfo, iter_pages
from curator.runtime.worker.sandbox import release_all
from curator.stages.sources.wikipedia import Wikipedia
from tests.conftest import assert_accounting

pytest.importorskip("mwparserfromhell")

DATA = Path(__file__).parents[2] / "data" / "sample" / "wikipedia"


def read_all(source: Wikipedia) -> tuple[list[dict], list[dict], list]:
    kept, removed, failed = [], [], []
    for shard in source.shards():
        for batch in source.read(shard, 1 << 20):
            kept += batch.table.to_pylist()
            removed += [] if batch.removed is None else batch.removed.to_pylist()
            failed += batch.failed
    return kept, removed, failed


def test_japanese_dump_to_plain_text():
    kept, removed, failed = read_all(Wikipedia(path=str(DATA / "jawiki-sample.xml")))
    assert not failed
    fuji = next(d for d in kept if d["title"] == "富士山")
    assert fuji["id"] == "jawiki:2135" and fuji["lang"] == "ja"
    assert fuji["url"] == "https://ja.wikipedia.org/wiki/%E5%AF%8C%E5%A3%AB%E5%B1%B1"
    assert fuji["date"] == "2024-03-01T08:15:42Z"
    text = fuji["text"]
    assert text.startswith("富士山（ふじさん）は、静岡県（富士宮市、裾野市など）と山梨県")  # noqa: RUF001
    lines = text.split("\n")
    assert {"地理", "周辺の湖", "登山", "西湖", "河口湖"} <= set(lines)  # headings, list items
    for markup in ("{{", "}}", "[[", "]]", "<ref", "'''", "==", "|", "Cite web"):
        assert markup not in text, markup
    assert "2,305" not in text  # the table
    assert "山中湖から望む富士山" not in text  # the image caption
    assert "日本の活火山" not in text and "Mount Fuji" not in text  # categories, interwiki
    assert "脚注" not in lines  # a section left empty once its {{Reflist}} is gone
    assert {r["title"]: r["reason"] for r in removed} == {
        "富士の山": "redirect", "富士山 (曖昧さ回避)": "disambiguation",
        "田中太郎": "disambiguation", "Template:Infobox 山": "not_article"}


def test_english_dump_to_plain_text():
    kept, removed, _ = read_all(Wikipedia(path=str(DATA / "enwiki-sample.xml")))
    assert [d["title"] for d in kept] == ["Mount Fuji", "Lake Biwa"]
    fuji = kept[0]["text"]
    assert fuji.startswith("Mount Fuji (富士山, Fujisan) is an active volcano about 100 km "
                           "southwest of Tokyo on the island of Honshu. It is the highest "
                           "mountain in Japan")
    assert "Lake Kawaguchi" in fuji.split("\n") and "Climbing" in fuji.split("\n")
    assert "Yoshida" not in fuji and "Volcanoes of Japan" not in fuji
    assert kept[0]["url"] == "https://en.wikipedia.org/wiki/Mount_Fuji"
    assert {r["title"]: r["reason"] for r in removed} == {
        "Fujiyama": "redirect", "Fuji (disambiguation)": "disambiguation",
        "Mercury": "disambiguation", "Springfield": "disambiguation",
        "Talk:Mount Fuji": "not_article"}


@pytest.mark.parametrize("lang", ["ja", "en"])
def test_bz2_and_multistream_shards_read_the_same(lang):
    plain = read_all(Wikipedia(path=str(DATA / f"{lang}wiki-sample.xml")))
    packed = read_all(Wikipedia(path=str(DATA / f"{lang}wiki-sample-pages-articles.xml.bz2")))
    multi = Wikipedia(path=str(DATA / f"{lang}wiki-sample-pages-articles-multistream.xml.bz2"),
                      streams_per_shard=1)
    assert len(multi.shards()) == {"ja": 3, "en": 4}[lang]  # 2 pages per stream (6, 7 pages)
    globbed = Wikipedia(path=str(DATA / f"{lang}wiki-sample-pages-articles-multistream*"),
                        streams_per_shard=1)
    assert globbed.shards() == multi.shards()  # the index beside it is no dump
    assert plain == packed == read_all(multi)


def test_truncated_dump_keeps_what_came_before_and_fails_with_a_reason(tmp_path):
    data = (DATA / "enwiki-sample-pages-articles.xml.bz2").read_bytes()
    broken = tmp_path / "enwiki-broken.xml.bz2"
    broken.write_bytes(data[: len(data) * 3 // 4])
    kept, removed, failed = read_all(Wikipedia(path=str(broken)))
    assert len(failed) == 1 and failed[0].reason == "damaged_dump"
    assert failed[0].error.endswith("; the pages after it are lost")
    assert failed[0].file == "enwiki-broken.xml.bz2"
    assert len(kept) + len(removed) < 7


def test_curate_run_counts_every_page_and_resumes(tmp_path):
    config = tmp_path / "p.yaml"
    config.write_text(
        f"name: wiki\noutput: {tmp_path / 'run'}\nexecutor: {{type: local}}\nstages:\n"
        f"  - {{type: wikipedia, streams_per_shard: 1, path: ['{DATA}/jawiki-sample-pages-"
        f"articles-multistream.xml.bz2', '{DATA}/enwiki-sample-pages-articles.xml.bz2']}}\n"
        "  - {type: write_jsonl}\n")
    first = CliRunner().invoke(app, ["run", str(config)])
    assert first.exit_code == 0, first.output
    assert "4 shards run, 0 resumed" in first.output
    run = tmp_path / "run"
    stats = assert_accounting(run)
    source = stats["stages"][0]
    assert source["in"] == 13 and source["kept"] == 4 and source["failed"] == 0
    assert source["removed_by_reason"] == {"disambiguation": 5, "not_article": 2,
                                           "redirect": 2}
    parts = sorted((run / "write_jsonl").rglob("*.jsonl"))
    docs = [json.loads(line) for p in parts for line in p.read_text().splitlines()]
    assert sorted(d["id"] for d in docs) == ["enwiki:160238", "enwiki:361001", "jawiki:2135",
                                             "jawiki:2301"]
    assert all(d["source"] == "wikipedia" for d in docs)
    rejected = pa.concat_tables([pq.read_table(p) for p in
                                 sorted((run / "rejected" / "wikipedia").glob("*.parquet"))])
    reasons = dict(zip(rejected.column("id").to_pylist(), rejected.column("reason").to_pylist(),
                       strict=True))
    assert len(reasons) == 9 and reasons["enwiki:160240"] == "redirect"
    assert reasons["jawiki:2140"] == "disambiguation" and reasons["enwiki:19700"] == \
        "disambiguation"
    written = {p: p.read_bytes() for p in parts}
    again = CliRunner().invoke(app, ["run", str(config)])
    assert again.exit_code == 0 and "0 shards run, 4 resumed" in again.output
    assert {p: p.read_bytes() for p in parts} == written


# ---- issue 27, defect 3: a page that stalls mwparserfromhell fails at timeout_s, alone
SITE = ('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/"><siteinfo>'
        "<dbname>xxwiki</dbname><base>https://xx.wikipedia.org/wiki/Main</base>"
        "</siteinfo>")


def _dump(*texts: str) -> str:
    pages = "".join(f"<page><title>P{i}</title><ns>0</ns><id>{i}</id><revision><timestamp>t"
                    f"</timestamp><text>{text}</text></revision></page>"
                    for i, text in enumerate(texts))
    return f"{SITE}{pages}</mediawiki>"


def test_the_source_guards_every_page_by_default():
    source = Wikipedia(path="x")
    assert (source.timeout_s, source.max_page_chars) == (60.0, 4 << 20)


def test_a_page_that_never_finishes_fails_at_timeout_s_and_the_others_go_on(
        tmp_path, monkeypatch, request):
    """40 KB of unbalanced {{a| held the source 225 s; here a page that provably never
    finishes (the parser sleeps on it) stands in for it, under a 1 s timeout."""
    import mwparserfromhell

    real = mwparserfromhell.parse

    def stalls(text, *args, **kwargs):
        if "STALL" in str(text):
            time.sleep(10**6)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(mwparserfromhell, "parse", stalls)
    release_all()  # pooled children were forked before the patch
    request.addfinalizer(release_all)  # and must not keep it
    (tmp_path / "d.xml").write_text(_dump("Words here.", "{{a|STALL", "More words."))
    kept, removed, failed = read_all(Wikipedia(path=str(tmp_path / "d.xml"), timeout_s=1))
    assert [d["id"] for d in kept] == ["xxwiki:0", "xxwiki:2"] and removed == []
    assert [(f.id, f.reason, f.file, f.offset) for f in failed] == [
        ("xxwiki:1", "timeout", "d.xml", 0)]


def test_a_page_over_max_page_chars_fails_and_is_never_held_whole(tmp_path):
    """A bz2 bomb: 90 MB of wikitext in one page from 100 copies of a 1 KB bz2 stream."""
    head, tail = _dump("Words here.", "BOMB", "More words.").split("BOMB")
    data = bz2.compress(head.encode()) + bz2.compress(b"a" * 900_000) * 100 + \
        bz2.compress(tail.encode())
    (tmp_path / "bomb.xml.bz2").write_bytes(data)
    pages = [p for p in iter_pages(str(tmp_path / "bomb.xml.bz2"), max_text_chars=1000)
             if not isinstance(p, SiteInfo)]
    assert [(len(p.text), p.text_chars) for p in pages] == [(11, 11), (1000, 90_000_000),
                                                            (11, 11)]
    kept, _, failed = read_all(Wikipedia(path=str(tmp_path / "bomb.xml.bz2"),
                                         max_page_chars=1000))
    assert [d["id"] for d in kept] == ["xxwiki:0", "xxwiki:2"]
    assert [(f.id, f.reason) for f in failed] == [("xxwiki:1", "too_large")]
