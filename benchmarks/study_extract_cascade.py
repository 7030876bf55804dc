"""Issue 35, first study: how far a cascade (resiliparse on every page, trafilatura only where a
cheap signal distrusts resiliparse's text) gets towards trafilatura's quality at a fraction of
its CPU, on the Zyte article benchmark and trafilatura's evaluation pages.

    python benchmarks/study_extract_cascade.py [--corpus ../shared/corpus]

Per page: each extractor's text and CPU time (``time.process_time``, one core, best of
``--repeat``), the page's quality counts (Zyte: upstream's normalised shingle tp/fp/fn;
trafilatura's set: its with/without snippets), so that a cascade's score is the sum of the
counts of the extractor it picked for each page, and its CPU the resiliparse time of every page
plus trafilatura's where it falls back. Signals (from resiliparse's two outputs, both cheap):
the main-content text's length, and its share of the whole page's visible text. The oracle picks
per page the better of the two (an upper bound for any signal at the same fallback share).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness
from bench_extract import DIRECT, ROOT, load_sets, prf, shingle_counts

SHARED = ROOT.parent / "shared" / "corpus"


def _timed(function, pages: list[str], repeat: int) -> tuple[list[str], np.ndarray]:
    texts, best = [], np.full(len(pages), np.inf)
    for _ in range(repeat):
        texts = []
        for k, page in enumerate(pages):
            started = time.process_time()
            text = function(page) or ""
            best[k] = min(best[k], time.process_time() - started)
            texts.append(text.strip())
    return texts, best


def _counts(name: str, ref, texts: list[str]) -> np.ndarray:
    """Per page (tp, fp, fn) as the set's metric sums them."""
    if name == "zyte":
        keys, truth = ref
        return np.array([shingle_counts(truth[k], t) for k, t in zip(keys, texts, strict=True)])
    rows = []
    for case, text in zip(ref, texts, strict=True):
        rows.append((sum(s in text for s in case["with"]), sum(s in text for s in case["without"]),
                     sum(s not in text for s in case["with"])))
    return np.array(rows, np.float64)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=SHARED)
    ap.add_argument("--repeat", type=int, default=2)
    harness.add_results_argument(ap, ROOT / "benchmarks" / "results_extract_cascade.md")
    args = ap.parse_args()
    import trafilatura
    from resiliparse.extract.html2text import extract_plain_text

    def traf(page: str) -> str:
        return trafilatura.extract(page, **DIRECT)

    def resi(page: str) -> str:
        return extract_plain_text(page, main_content=True, alt_texts=False, comments=False)

    def resi_all(page: str) -> str:
        return extract_plain_text(page, main_content=False, alt_texts=False, comments=False)

    lines = ["# A resiliparse → trafilatura cascade: quality and CPU (issue 35, first study)", "",
             "Per set: F1 of each extractor alone and of cascades that fall back to trafilatura "
             "where resiliparse's main text is shorter than L characters or holds less than a "
             "share S of the page's visible text; CPU as a multiple of trafilatura alone's "
             "(pages per CPU-second, one core, each page's best of "
             f"{args.repeat}); the oracle picks the better extractor per page.", ""]
    figures = {}
    for name, (pages, ref) in load_sets(args.corpus).items():
        t_text, t_cpu = _timed(traf, pages, args.repeat)
        r_text, r_cpu = _timed(resi, pages, args.repeat)
        a_text, a_cpu = _timed(resi_all, pages, args.repeat)
        t_counts, r_counts = _counts(name, ref, t_text), _counts(name, ref, r_text)
        length = np.array([len(t) for t in r_text])
        share = length / np.maximum([len(t) for t in a_text], 1)
        base_cpu = t_cpu.sum()
        rows = [("trafilatura", prf(*t_counts.sum(0))[2], 1.0, 1.0),
                ("resiliparse", prf(*r_counts.sum(0))[2], 0.0, base_cpu / r_cpu.sum())]
        better = (np.array([prf(*c)[2] for c in t_counts]) >
                  np.array([prf(*c)[2] for c in r_counts]))
        for min_len in (0, 200, 500, 1000):
            for min_share in (0.0, 0.2, 0.35, 0.5):
                fall = (length < min_len) | (share < min_share)
                counts = np.where(fall[:, None], t_counts, r_counts).sum(0)
                cpu = r_cpu.sum() + a_cpu.sum() * (min_share > 0) + t_cpu[fall].sum()
                rows.append((f"cascade L={min_len} S={min_share:g}", prf(*counts)[2],
                             fall.mean(), base_cpu / cpu))
        counts = np.where(better[:, None], t_counts, r_counts).sum(0)
        rows.append(("oracle (per page the better)", prf(*counts)[2], better.mean(),
                     base_cpu / (r_cpu.sum() + t_cpu[better].sum())))
        lines += [f"## {name} ({len(pages)} pages)", "",
                  "| extraction | F1 | sent to trafilatura | pages per CPU-s vs trafilatura |",
                  "|---|---:|---:|---:|"]
        lines += [f"| {r[0]} | {r[1]:.4f} | {r[2]:.0%} | {r[3]:.2f}x |" for r in rows]
        lines.append("")
        figures[name] = {r[0]: {"f1": r[1], "fallback": r[2], "speed": r[3]} for r in rows}
    harness.record(args.results, "\n".join(lines), figures=figures)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
