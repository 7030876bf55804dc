"""report.html in a real headless Chromium: a real run (sample documents with planted exact and
near duplicates and GSM8K questions → langid → decontaminate → heuristic_filter → exact_dedup →
fuzzy_dedup → write_parquet) renders every plot with the run's figures, offline; user data
(stage names, reasons) cannot inject markup. Screenshots land in the test's tmp dir."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from curator import (
    Decontaminate,
    ExactDedup,
    FuzzyDedup,
    HeuristicFilter,
    LangId,
    Pipeline,
    ReadJsonl,
    WriteParquet,
)
from curator.report.html import write_report
from tests.conftest import assert_accounting, require_lid_model, sample_documents, write_parts

require_lid_model()

CHROMIUM = next(filter(None, map(shutil.which, ("chromium", "chromium-browser",
                                                "google-chrome"))), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH (make test "
                                "installs it with apt-get where it can)")
GSM8K = Path(__file__).parents[2] / "data" / "decontaminate" / "gsm8k" / "test.jsonl.gz"
KEPT_GREEN = (0x2B, 0x8A, 0x3E)


class Dom(HTMLParser):
    """The elements of a dumped DOM with their attributes, the enclosing svg's label and the
    text inside each element kind."""

    def __init__(self, markup: str) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str], str | None]] = []
        self.svg: str | None = None
        self.tags: list[str] = []
        self.titles: dict[str | None, list[str]] = {}
        self.text: list[str] = []
        self.feed(markup)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attributes = {k: v or "" for k, v in attrs}
        if tag == "svg":
            self.svg = attributes.get("aria-label")
        self.elements.append((tag, attributes, self.svg))
        self.tags.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "svg":
            self.svg = None
        if self.tags and self.tags[-1] == tag:
            self.tags.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self.tags and self.tags[-1] == "title" and self.svg is not None:
            self.titles.setdefault(self.svg, []).append(data)

    def labels(self, svg: str) -> list[str]:
        """The row labels of a bar chart, in order."""
        return [a["data-label"] for tag, a, s in self.elements
                if s == svg and tag == "g" and "data-label" in a]

    def count(self, svg: str, tag: str) -> int:
        return sum(1 for t, _, s in self.elements if s == svg and t == tag)


def chromium(page: Path, *args: str) -> str:
    out = subprocess.run([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
                          "--no-first-run", "--user-data-dir=" + str(page.parent / ".chromium"),
                          *args, page.resolve().as_uri()],
                         capture_output=True, text=True, timeout=30, check=True)
    return out.stdout


def screenshot(page: Path, target: Path) -> None:
    chromium(page, f"--screenshot={target}", "--window-size=1400,3000",
             "--hide-scrollbars")
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _documents() -> list[dict]:
    """The sample, plus exact copies, near copies (a word changed) and three documents that
    quote GSM8K test questions."""
    docs = [{"id": f"s{i:04d}", "text": d["text"]} for i, d in enumerate(sample_documents())]
    with gzip.open(GSM8K, "rt", encoding="utf-8") as f:
        questions = [json.loads(next(f))["question"] for _ in range(3)]
    english = [d for d in docs if d["text"].isascii()]
    extra = [{"id": f"x{i}", "text": d["text"]} for i, d in enumerate(english[:4])]
    extra += [{"id": f"n{i}", "text": d["text"].replace(" the ", " a ", 1) + " Thanks."}
              for i, d in enumerate(english[4:10])]
    extra += [{"id": f"q{i}", "text": f"{d['text']}\n\nA puzzle for you: {q}"}
              for i, (d, q) in enumerate(zip(english[10:13], questions, strict=True))]
    return docs + extra


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("report-input")
    docs = _documents()
    write_parts(folder, [docs[i::3] for i in range(3)])
    run = tmp_path_factory.mktemp("report-run") / "run"
    Pipeline([ReadJsonl(path=f"{folder}/*.jsonl"), LangId(),
              Decontaminate(tasks=[{"name": "gsm8k", "path": str(GSM8K)}]),
              HeuristicFilter(presets=["gopher_quality", "c4"]), ExactDedup(), FuzzyDedup(),
              WriteParquet()],
             name="report-test", output=str(run)).run(executor="local", progress=False)
    return run


def test_report_renders_every_plot_with_the_runs_figures(run):
    stats = assert_accounting(run)
    stages = {s["name"]: s for s in stats["stages"]}
    page = run / "report.html"
    dom = Dom(chromium(page, "--dump-dom"))
    shot = run.parent / "report.png"
    screenshot(page, shot)

    assert dom.labels("funnel") == [s["name"] for s in stats["stages"]]  # named by type
    for s in stats["stages"]:
        assert f"kept {s['kept']:,}" in dom.titles["funnel"]
    for s in stats["stages"]:
        if s["removed_by_reason"]:
            assert set(dom.labels(f"reasons {s['name']}")) == set(s["removed_by_reason"])
    assert stages["exact_dedup"]["removed"] >= 1 and stages["fuzzy_dedup"]["removed"] >= 1
    assert dom.labels("timeline") == [s["name"] for s in stats["stages"]]
    # one lane per worker process, one span per shard task of the run (here: this process),
    # then one lane per dataset stage, a span per phase
    dataset = list(dict.fromkeys(p[1] for p in stats["phase_timeline"]))
    assert dataset == [s["name"] for s in stats["stages"] if "phases" in s]  # in pipeline order
    assert dom.labels("workers") == ["worker 1", *(f"{name} phases" for name in dataset)]
    assert dom.count("workers", "rect") == len(stats["timeline"]) + len(stats["phase_timeline"])
    assert len(stats["timeline"]) > 0

    languages = dom.labels("languages")
    assert languages[0] == "langid" and languages[-1] == "write_parquet"
    assert {"en: ", "ja: "} <= {t[:4] for t in dom.titles["languages"]}
    assert dom.count("lengths", "rect") >= 2
    for score in stages["heuristic_filter"]["histograms"]:
        assert dom.count(score, "rect") >= 1, score

    for name in ("exact_dedup", "fuzzy_dedup"):  # every cluster but its survivor is removed
        sizes = stages[name]["dedup"]["cluster_sizes"]
        assert sum((int(k) - 1) * n for k, n in sizes.items()) == stages[name]["removed"]
        assert dom.labels(f"cluster sizes {name}") == [f"size {k}" for k in sizes]
    found = stages["decontaminate"]["decontamination"]["tasks"]["gsm8k"]["documents"]
    assert found >= 3
    assert f"gsm8k: {found:,} documents" in dom.titles["contamination decontaminate"]

    assert not [a for tag, a, _ in dom.elements if tag in ("script", "link")
                or "http" in a.get("src", "")], "the page must load nothing"
    assert shot.stat().st_size > 50_000


def test_screenshot_shows_the_funnel(run):
    """The funnel's kept bars are drawn: their green covers a good part of the screenshot."""
    Image = pytest.importorskip("PIL.Image")
    shot = run.parent / "funnel.png"
    screenshot(run / "report.html", shot)
    image = Image.open(shot).convert("RGB")
    assert image.size == (1400, 3000)
    green = sum(n for n, colour in image.getcolors(1 << 24) if colour == KEPT_GREEN)
    stages = len(json.loads((run / "stats.json").read_text())["stages"])
    assert green > stages * 400 * 20  # 22 px high bars, most of 560 px wide


def test_user_data_is_escaped(run, tmp_path):
    """A stage name and a reason full of markup show as text and inject nothing."""
    stats = json.loads((run / "stats.json").read_text())
    evil = '<img src=x onerror="document.title=1">&<b>'
    stats["stages"][3]["name"] = evil
    stats["stages"][3]["removed_by_reason"] = {"<script>alert(1)</script>": 1}
    stats["name"] = "</title><script>x()</script>"
    page = write_report(tmp_path, stats)
    dom = Dom(chromium(page, "--dump-dom"))
    assert not [t for t, _, _ in dom.elements if t in ("img", "script", "b")]
    text = "".join(dom.text)
    assert evil in text and "<script>alert(1)</script>" in text
    assert f"{evil} ({stats['stages'][3]['type']})" in dom.labels("funnel")
