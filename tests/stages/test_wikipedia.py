"""wikipedia source: small ja and en dumps with real wikitext (templates, refs, tables, files,
lists, a redirect, disambiguation pages by template and by category, other namespaces) read as
.xml, .xml.bz2 and multistream shards; `curate run` counts every page; resume; damaged dumps."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from curator.cli import app
from curator.stages.sources.wikipedia import Wikipedia
from tests.conftest import assert_accounting

pytest.importorskip("mwparserfromhell")

DATA = Path(__file__).parents[1] / "data" / "wikipedia"


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
