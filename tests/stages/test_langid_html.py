"""langid_html: on the bundled real WARC sample, the pre-filter removes pages of other languages
before extraction and (almost) never a page that extraction then langid would keep; Japanese
as the wanted language; pages without text go on; the product path accounts for every page."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("resiliparse")
pytest.importorskip("trafilatura")

from curator import ExtractHtml, LangId, LangIdHtml, Pipeline, ReadWarc, WriteParquet
from curator.batch import Shard
from curator.io.warc import read_warc_batches
from curator.runtime.worker.budget import FailureBudget
from curator.runtime.worker.isolation import apply_stage
from curator.runtime.worker.sandbox import release_all
from tests.conftest import assert_accounting, require_lid_model

require_lid_model()

SAMPLE = Path(__file__).parents[2] / "data" / "sample" / "warc"


@pytest.fixture(scope="module")
def pages() -> pa.Table:
    tables = [b.table for path in sorted(SAMPLE.glob("*.warc.gz"))
              for b in read_warc_batches(Shard(0, str(path), label=path.name), 1 << 30, "read")
              if b.table.num_rows]
    return pa.concat_tables(tables)


@pytest.fixture(scope="module")
def reference(pages) -> dict[str, str | None]:
    """Each page's language after trafilatura and langid (None: nothing extracted)."""
    extracted = ExtractHtml().process(pages).kept
    langs = LangId().process(extracted).kept
    found = dict(zip(langs.column("id").to_pylist(), langs.column("lang").to_pylist(),
                     strict=True))
    scores = dict(zip(langs.column("id").to_pylist(), langs.column("lang_score").to_pylist(),
                      strict=True))
    return {i: (found.get(i) if scores.get(i, 0) >= 0.65 else None)
            for i in pages.column("id").to_pylist()}


@pytest.mark.parametrize("wanted", ["en", "ja"])
def test_removes_other_languages_and_keeps_what_langid_would_keep(pages, reference, wanted):
    result = LangIdHtml(languages=[wanted]).process(pages)
    removed = set(result.removed.column("id").to_pylist())
    assert set(result.removed.column("reason").to_pylist()) <= {"lang_clearly_other"}
    assert result.kept.num_rows + len(removed) == pages.num_rows
    would_keep = {i for i, lang in reference.items() if lang == wanted}
    other = {i for i, lang in reference.items() if lang not in (None, wanted)}
    assert would_keep and other
    assert not removed & would_keep  # nothing langid keeps after extraction is lost
    assert len(removed & other) >= 0.5 * len(other)  # and most other-language pages go
    assert "html_lang" not in result.kept.column_names  # the stage adds no columns


def test_pages_without_text_go_on():
    table = pa.table({"id": ["a", "b", "c"],
                      "text": ["", "<html><body><p>12 34</p></body></html>", None]})
    result = LangIdHtml(languages=["en"]).process(table)
    assert result.kept.column("id").to_pylist() == ["a", "b", "c"]


def test_product_path_accounts_for_every_page(tmp_path):
    run = tmp_path / "run"
    Pipeline([ReadWarc(path=f"{SAMPLE}/*.warc.gz"), LangIdHtml(languages=["ja"]),
              ExtractHtml(), LangId(languages=["ja"]), WriteParquet()],
             output=str(run)).run(executor="local", progress=False)
    stats = assert_accounting(run)
    entry = next(s for s in stats["stages"] if s["type"] == "langid_html")
    assert entry["removed_by_reason"]["lang_clearly_other"] > 0 and entry["kept"] > 0


# ---- issue 27, defect 3: a page that stalls resiliparse fails at timeout_s, alone
def test_langid_html_and_extract_html_guard_every_page_by_default():
    for stage in (LangIdHtml(languages=["en"]), ExtractHtml()):
        assert (stage.timeout_s, stage.max_document_bytes) == (60.0, 4 << 20)
        assert stage.marks_documents  # chunks of pages per call in the sandbox


def test_a_page_that_never_finishes_fails_at_timeout_s_and_the_others_go_on(monkeypatch,
                                                                              request):
    """100k nested <div> stall resiliparse for minutes; here a page that provably never
    finishes (the extractor sleeps on it) stands in for them, under a 1 s timeout."""
    import resiliparse.extract.html2text as html2text

    real = html2text.extract_plain_text

    def stalls(page: str, **options) -> str:
        if "STALL" in page:
            time.sleep(10**6)
        return real(page, **options)

    monkeypatch.setattr(html2text, "extract_plain_text", stalls)
    release_all()  # pooled children were forked before the patch
    request.addfinalizer(release_all)  # and must not keep it
    english = "<html><body><p>" + "The river runs past the old mill every day. " * 20
    table = pa.table({"id": ["a", "b", "c"],
                      "text": [english + "</p></body></html>", "<div>STALL</div>",
                               english + "</p></body></html>"]})
    stage = LangIdHtml(languages=["en"], timeout_s=1)
    budget = FailureBudget("langid_html", "x", 1.0)
    result = apply_stage(stage, table, "langid_html", budget)
    assert result.kept.column("id").to_pylist() == ["a", "c"]
    [failure] = result.failed
    assert (failure.id, failure.reason) == ("b", "timeout")


def test_a_page_over_max_document_bytes_never_reaches_resiliparse():
    table = pa.table({"id": ["big", "ok"], "text": ["<p>" + "x" * 5000, "<p>fine</p>"]})
    result = apply_stage(LangIdHtml(languages=["en"], max_document_bytes=1000), table,
                         "langid_html", FailureBudget("langid_html", "x", 1.0))
    assert result.kept.column("id").to_pylist() == ["ok"]
    assert [(f.id, f.reason) for f in result.failed] == [("big", "too_large")]


def test_a_language_code_the_model_lacks_is_refused_by_validate(tmp_path):
    from typer.testing import CliRunner

    from curator.cli import app

    config = tmp_path / "p.yaml"
    config.write_text("name: x\nstages:\n"
                      "  - {type: read_warc, path: 'data/sample/warc/*.warc.gz'}\n"
                      "  - {type: langid_html, languages: [jp, en]}\n"
                      "  - {type: write_parquet}\n")
    result = CliRunner().invoke(app, ["validate", str(config)])
    assert result.exit_code == 2
    assert "'jp' is not a language" in result.output and "did you mean 'ja'" in result.output
