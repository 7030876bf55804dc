"""extract_html: extractors, titles, removal with reasons, huge pages, and read_warc ->
extract_html -> writer through ``curate run`` over the corpus WARCs (resumed after a kill)."""

from __future__ import annotations

import csv
import gzip
import json
import re
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pytest

from curator.stages.extract.html import ExtractHtml, page_title
from tests.conftest import assert_accounting
from tests.runtime import killing
from tests.warc_builder import CORPUS, write_warc

WARCS = CORPUS / "warc"
NEWS = CORPUS / "japanese" / "html" / "news_blogs_2021"
needs_corpus = pytest.mark.skipif(not WARCS.exists(), reason="shared corpus not staged")
JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
ARTICLE = ("<html><head><title>A &amp; B</title></head><body><nav><a href='/'>Home</a> | "
           "<a href='/news'>News</a></nav><article><h1>Rivers</h1>"
           + "".join(f"<p>The river number {i} runs through the valley, past the old mill and "
                     "the long stone bridge, before it reaches the sea at the harbour where "
                     "the fishing boats are tied up for the night and the people of the town "
                     "walk along the quay in the evening to watch them come in.</p>"
                     for i in range(8))
           + "</article><footer>Copyright 2024 Example Ltd. All rights reserved.</footer>"
           "</body></html>")


def _table(pages: list[str], **columns) -> pa.Table:
    return pa.table({"id": [str(i) for i in range(len(pages))], "text": pages, **columns})


@pytest.mark.parametrize("extractor", ["trafilatura", "resiliparse", "justext"])
def test_each_extractor_keeps_the_article_and_drops_the_navigation(extractor):
    result = ExtractHtml(extractor=extractor).process(_table([ARTICLE]))
    text = result.kept.column("text")[0].as_py()
    assert "river number 7 runs through the valley" in text
    assert "Home" not in text and "<p>" not in text
    assert result.kept.column("title").to_pylist() == ["A & B"]
    assert result.notes == {f"extracted_{extractor}": 1}


def test_pages_without_text_are_removed_with_a_reason():
    pages = [ARTICLE, "<html><head><title>empty</title></head><body></body></html>",
             "<html><body><script>var x = 1;</script></body></html>"]
    result = ExtractHtml().process(_table(pages))
    assert result.kept.column("id").to_pylist() == ["0"]
    assert result.removed.column("reason").to_pylist() == ["no_text", "no_text"]
    assert result.removed.column("title").to_pylist() == ["empty", None]


def test_a_list_falls_back_to_the_next_extractor():
    # jusText with the English stoplist finds no English paragraph in a Japanese page
    cat = "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。"
    page = f"<html><body><div>{cat * 5}</div></body></html>"
    stage = ExtractHtml(extractor=["justext", "resiliparse"])
    result = stage.process(_table([page, ARTICLE]))
    assert result.notes == {"extracted_resiliparse": 1, "extracted_justext": 1}
    assert "吾輩は猫である" in result.kept.column("text")[0].as_py()


def test_justext_takes_its_stoplist_from_the_lang_column():
    german = ("<html><body>" + "".join(
        "<p>Der Fluss fließt durch das Tal, an der alten Mühle und der langen Brücke vorbei, "
        "bevor er das Meer bei dem Hafen erreicht, wo die Boote der Fischer für die Nacht "
        "festgemacht werden und die Leute der Stadt am Abend auf dem Kai spazieren gehen, "
        "um sie hereinkommen zu sehen.</p>"
        for _ in range(6)) + "</body></html>")
    as_german = ExtractHtml(extractor="justext").process(_table([german], lang=["de"]))
    as_english = ExtractHtml(extractor="justext").process(_table([german], lang=["en"]))
    assert as_german.kept.num_rows == 1 and "Mühle" in as_german.kept.column("text")[0].as_py()
    assert as_english.kept.num_rows == 0


def test_a_title_column_already_there_is_kept():
    result = ExtractHtml().process(_table([ARTICLE], title=["given"]))
    assert result.kept.column("title").to_pylist() == ["given"]
    assert page_title("<TITLE>\n  two\n words </TITLE>") == "two words"


@pytest.mark.skipif(not NEWS.exists(), reason="shared corpus not staged")
def test_japanese_news_pages_yield_their_japanese_body_text():
    with open(NEWS / "index.tsv", encoding="utf-8") as index:
        rows = list(csv.DictReader(index, delimiter="\t"))
    pages = [gzip.decompress((NEWS / "html" / r["file"]).read_bytes()).decode() for r in rows]
    result = ExtractHtml().process(_table(pages))
    assert result.kept.num_rows == len(rows) == 41
    news = ("news.yahoo.co.jp", "www.asahi.com", "www.yomiuri.co.jp", "www.sankei.com",
            "mainichi.jp", "www.nikkei.com")
    for row, text, page in zip(rows, result.kept.column("text").to_pylist(), pages, strict=True):
        if row["host"] not in news:
            continue
        japanese = len(JAPANESE.findall(text))
        assert japanese >= 150 and japanese / len(text) >= 0.6, (row["file"], text[:200])
        assert len(JAPANESE.findall(page)) > japanese  # the page's boilerplate is cut


def _run_config(tmp: Path, inputs: str, extract: str, writer: str = "write_jsonl",
                workers: str = "{type: local}") -> Path:
    config = tmp / "pipeline.yaml"
    config.write_text(f"""
name: warc
batch_bytes: 262144
executor: {workers}
stages:
  - {{type: read_warc, path: "{inputs}"}}
  - {{type: extract_html, {extract}}}
  - {{type: {writer}}}
""")
    return config


def _stages(run: Path) -> dict[str, dict]:
    return {s["name"]: s for s in json.loads((run / "stats.json").read_text())["stages"]}


@needs_corpus
def test_curate_run_over_every_corpus_warc_accounts_for_every_record(tmp_path):
    config = _run_config(tmp_path, f"{WARCS}/*/*", "extractor: trafilatura")
    killing.run(config, tmp_path / "run", tmp_path / "run.log")
    assert_accounting(tmp_path / "run")
    stages = _stages(tmp_path / "run")
    read, extract = stages["read_warc"], stages["extract_html"]
    assert read["failed"] >= 2 and read["kept"] >= 90  # the clipped and truncated records
    assert extract["kept"] >= 0.9 * read["kept"]
    errors = [json.loads(line) for path in (tmp_path / "run/errors/read_warc").glob("*.jsonl")
              for line in path.read_text().splitlines()]
    assert {e["reason"] for e in errors} >= {"truncated_gzip", "bad_record"}
    assert all("offset" in e and e["file"] for e in errors)
    docs = [json.loads(line) for path in (tmp_path / "run/write_jsonl").glob("*.jsonl")
            for line in path.read_text().splitlines()]
    # ids are WARC-Record-IDs: unique within a file (warcio's test files share example.com's)
    assert len({(d["warc_file"], d["id"]) for d in docs}) == len(docs) == extract["kept"]
    assert all(d["text"] and "<html" not in d["text"].lower() for d in docs)


def test_a_50_mb_one_line_page_cannot_stall_the_run(tmp_path):
    huge = b"<html><body><p>" + b"word " * (10 << 20) + b"</p></body></html>"
    write_warc(tmp_path / "huge.warc.gz", [("http://a/huge", huge, "text/html"),
                                           ("http://a/ok", ARTICLE.encode(), "text/html")])
    config = _run_config(tmp_path, f"{tmp_path}/huge.warc.gz", "extractor: trafilatura")
    started = time.perf_counter()
    killing.run(config, tmp_path / "run", tmp_path / "run.log", timeout=60)
    assert time.perf_counter() - started < 40
    assert_accounting(tmp_path / "run")
    extract = _stages(tmp_path / "run")["extract_html"]
    assert (extract["kept"], extract["failed"]) == (1, 1)
    error = json.loads(next((tmp_path / "run/errors/extract_html").glob("*.jsonl")).read_text())
    assert error["reason"] == "too_large"


def test_a_page_slower_than_timeout_s_fails_and_the_run_goes_on(tmp_path):
    slow = ("<html><body>" + "<div><p>a paragraph of words that go on</p></div>" * 60000
            + "</body></html>").encode()  # about 3 MB: trafilatura needs seconds
    write_warc(tmp_path / "slow.warc.gz", [("http://a/slow", slow, "text/html"),
                                           ("http://a/ok", ARTICLE.encode(), "text/html")])
    config = _run_config(tmp_path, f"{tmp_path}/slow.warc.gz",
                         "extractor: trafilatura, timeout_s: 0.5")
    killing.run(config, tmp_path / "run", tmp_path / "run.log", timeout=60)
    assert_accounting(tmp_path / "run")
    extract = _stages(tmp_path / "run")["extract_html"]
    assert (extract["kept"], extract["failed"]) == (1, 1)
    error = json.loads(next((tmp_path / "run/errors/extract_html").glob("*.jsonl")).read_text())
    assert error["reason"] == "timeout"


@needs_corpus
def test_a_killed_run_resumes_to_the_same_bytes(tmp_path):
    inputs = tmp_path / "in"
    shutil.copytree(WARCS, inputs)
    config = _run_config(tmp_path, f"{inputs}/*/*", "extractor: [resiliparse, trafilatura]",
                         workers="{type: local, workers: 2}")
    n_shards = len(list(inputs.glob("*/*")))
    reference = killing.reference_run(config, tmp_path / "run", tmp_path / "reference",
                                      tmp_path / "reference.log")
    killed = tmp_path / "run"
    killing.kill_at(config, killed, killing.in_shards(0, n_shards, 3), tmp_path / "run.log",
                    reference)
    assert killing.shards_done(killed, 0) == 3  # one process: the halted driver wrote the third
    killing.run(config, killed, tmp_path / "resumed.log")
    assert killing.differences(killed, reference) == []
    assert_accounting(killed)
