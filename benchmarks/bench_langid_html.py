"""The language pre-filter (langid_html) against the decision it anticipates: on every real HTML
page of ../shared/corpus (the Zyte and trafilatura_eval benchmark pages, the corpus's WARC files,
the bundled sample, the Japanese news pages), how many pages it removes before extraction and how
many of those trafilatura + langid would have kept, per wanted language and threshold, and what it
costs per page against trafilatura.

    PYTHONPATH=. python benchmarks/bench_langid_html.py
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
from pathlib import Path

import harness
import pyarrow as pa
import trafilatura

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_extract import load_sets, read_pages

from curator import LangIdHtml
from curator.io.charset import decode_html
from curator.stages.langid import LangId

ROOT = Path(__file__).resolve().parents[1]
KEEP_SCORE = 0.5  # the shipped pipelines' langid min_score


def pages_of(corpus: Path) -> list[str]:
    sets = load_sets(corpus)
    news = corpus / "japanese" / "html" / "news_blogs_2021" / "html"
    japanese = [decode_html(gzip.decompress(p.read_bytes())).text
                for p in sorted(news.glob("*.gz"))]
    return (sets["zyte"][0] + sets["trafilatura_eval"][0]
            + read_pages(str(ROOT / "data" / "sample" / "warc" / "*.warc.gz"))
            + read_pages(str(corpus / "warc" / "*" / "*.warc.gz")) + japanese)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=ROOT.parent / "shared" / "corpus")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results_langid_html.md")
    args = ap.parse_args()
    pages = pages_of(args.corpus)
    table = pa.table({"id": [str(i) for i in range(len(pages))], "text": pages})
    started = time.process_time()
    texts = [trafilatura.extract(p, favor_precision=True, include_comments=False,
                                 deduplicate=False) for p in pages]
    trafilatura_s = time.process_time() - started
    langs, scores = LangId().predict(texts)
    rows = []
    for wanted in ("en", "ja"):
        would_keep = {str(i) for i, (lang, score) in enumerate(zip(langs, scores, strict=True))
                      if lang == wanted and score >= KEEP_SCORE}
        for threshold in (0.5, 0.8, 0.9, 0.95):
            stage = LangIdHtml(languages=[wanted], min_other_score=threshold)
            stage.setup()
            started = time.process_time()
            removed = set(stage.process(table).removed.column("id").to_pylist())
            seconds = time.process_time() - started
            rows.append(f"| {wanted} | {threshold} | {len(removed)} | {len(removed & would_keep)} "
                        f"of {len(would_keep)} | {1000 * seconds / len(pages):.2f} |")
    lines = [
        "# Language pre-filter (langid_html) before extraction", "",
        f"`PYTHONPATH=. python benchmarks/bench_langid_html.py`: {len(pages)} real HTML pages "
        "(Zyte and trafilatura_eval benchmark pages, the WARC files of ../shared/corpus and of "
        "data/sample/warc, 40 Japanese news and blog pages). Reference decision: "
        "trafilatura (favor_precision) then langid (lid.176.ftz, three 2000-character windows) "
        f"keeps the page as the wanted language with a score of at least {KEEP_SCORE}.", "",
        f"trafilatura alone: {1000 * trafilatura_s / len(pages):.1f} ms a page (CPU).", "",
        "| wanted | min_other_score | pages removed before extraction | of them kept by "
        "trafilatura + langid | ms a page (CPU) |", "|---|---|---|---|---|", *rows, "",
        "Default: `min_other_score: 0.9`, one window of 2000 characters of resiliparse's main "
        "text.", ""]
    harness.record(args.out, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
