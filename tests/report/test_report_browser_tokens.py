"""report.html's trainer-facing sections in a real headless Chromium: tokens per language and
split (a run shaped as `make demo`'s: langid, then tokenize by `lang`), tokens and epochs per
source with the repeat warning (a two-source blend), and the compute section; each figure in
the page equals stats.json's. Screenshots land in the test's tmp dir."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from curator import LangId, Pipeline, ReadJsonl, Tokenize
from tests.conftest import ROOT, sample_documents, write_parts
from tests.report.test_report_browser import CHROMIUM, Dom, chromium, screenshot

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH")
TOKENIZER = str(ROOT / "data" / "tokenizer" / "tokenizer.json")


def _rows(markup: str, heading: str) -> list[list[str]]:
    """The cells' text of the table after the ``<h2>`` reading ``heading``, row by row (the
    header row left out), from the DOM Chromium rendered."""
    start = markup.index(f"<h2>{heading}</h2>")
    table = markup[start:markup.index("</table>", start)]
    return [[re.sub(r"<[^>]+>", "", cell).strip()
             for cell in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, flags=re.S)]
            for row in re.findall(r"<tr>(.*?)</tr>", table, flags=re.S)[1:]]


def _page(run: Path) -> tuple[str, str]:
    """The DOM Chromium rendered from the run's report.html, and its text."""
    markup = chromium(run / "report.html", "--dump-dom")
    return markup, "".join(Dom(markup).text)


def _tokens_table(markup: str, stage: str) -> dict[tuple[str, str], tuple[int, int, str]]:
    """(source, split) -> (tokens, documents, epochs) as the page shows them."""
    return {(r[0], r[1]): (int(r[2].replace(",", "")), int(r[4].replace(",", "")), r[6])
            for r in _rows(markup, f"Tokens: {stage}")}


def _expected(stage: dict) -> dict[tuple[str, str], tuple[int, int, str]]:
    epochs = stage.get("epochs", {})
    return {(source, split): (v["tokens"], v["documents"],
                              f"{epochs[source]:g}" if split == "train" and source in epochs
                              else "-")
            for source, splits in stage["by_source"].items() for split, v in splits.items()}


def test_tokens_per_language_and_split_as_the_demo_reports_them(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    docs = [{"id": f"s{i:04d}", "text": d["text"]} for i, d in enumerate(sample_documents())]
    write_parts(folder, [docs[i::2] for i in range(2)])
    run = tmp_path / "run"
    Pipeline([ReadJsonl(path=f"{folder}/*.jsonl"), LangId(languages=["en", "ja"]),
              Tokenize(tokenizer=TOKENIZER, source_field="lang", seq_length=256,
                       split={"train": 0.9, "valid": 0.1})],
             name="demo-shaped").run(output=run, executor="local", progress=False)
    stats = json.loads((run / "stats.json").read_text())
    tokenize = stats["stages"][-1]
    assert set(tokenize["by_source"]) == {"en", "ja"}
    markup, text = _page(run)
    shown = _tokens_table(markup, "tokenize")
    assert shown == _expected(tokenize)
    assert {split for _, split in shown} == {"train", "valid"}
    compute = {r[0]: float(r[2]) for r in _rows(markup, "Compute")}
    assert compute == {s["name"]: round(s["cpu_seconds"], 2) for s in stats["stages"]}
    assert "node-hours" in text
    screenshot(run / "report.html", tmp_path / "demo-shaped.png")
    assert (tmp_path / "demo-shaped.png").stat().st_size > 50_000


def test_a_two_source_blend_shows_tokens_epochs_and_the_repeat_warning(tmp_path):
    small, large = tmp_path / "wiki", tmp_path / "web"
    english = [d["text"] for d in sample_documents() if d["text"].isascii()]
    for folder, texts in ((small, english[:6]), (large, english[6:])):
        folder.mkdir()
        write_parts(folder, [[{"id": f"{folder.name}-{i}", "text": t}
                              for i, t in enumerate(texts)]])
    run = tmp_path / "run"
    Pipeline([ReadJsonl(path=f"{small}/*.jsonl", name="read_wiki", source="wiki"),
              ReadJsonl(path=f"{large}/*.jsonl", name="read_web", source="web"),
              Tokenize(tokenizer=TOKENIZER, weights={"wiki": 0.8, "web": 0.2}, max_epochs=2.0,
                       seq_length=256)],
             name="two-sources").run(output=run, executor="local", progress=False)
    stats = json.loads((run / "stats.json").read_text())
    tokenize = stats["stages"][-1]
    assert tokenize["epochs"]["wiki"] > 2.0 > tokenize["epochs"]["web"]
    markup, text = _page(run)
    assert _tokens_table(markup, "tokenize") == _expected(tokenize)
    warning = next(w for w in tokenize["warnings"] if "max_epochs" in w)
    assert warning in text and "source 'wiki' is repeated" in warning
    header = re.search(r"([\d,]+) documents in, ([\d,]+) kept", text)
    assert header is not None
    sources_in = sum(s["in"] for s in stats["stages"] if s.get("source"))
    assert int(header.group(1).replace(",", "")) == sources_in  # every source's documents
    read = sum(s["bytes_kept"] for s in stats["stages"] if s.get("source"))
    assert f"{read / 1e6:.1f} MB read" in text  # and every source's bytes
    screenshot(run / "report.html", tmp_path / "two-sources.png")
    assert (tmp_path / "two-sources.png").stat().st_size > 50_000
