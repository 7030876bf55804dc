"""Issue 35, second study: how much faster trafilatura's own algorithm can be made while it
keeps its output, on the Zyte article benchmark and trafilatura's evaluation pages.

    python benchmarks/study_extract_speedups.py [--corpus ../shared/corpus]

Variants, each over every page (CPU seconds, ``time.process_time``, one core, best of
``--repeat``; F1 by each set's own metric, as ``study_extract_cascade.py``; how many pages give
exactly trafilatura's text):

* ``fast``: trafilatura's own ``fast=True`` (no readability / jusText comparison);
* ``C class lookup``: lxml's element class lookup done in C (``ElementDefaultClassLookup`` with
  ``HtmlElement``) instead of ``lxml.html``'s Python callback, called for every element proxy;
* ``pruned by Lexbor``: the page parsed by resiliparse (Lexbor, C++), scripts, styles, forms,
  media and other tags trafilatura drops anyway removed there, serialised, then trafilatura;
* a profile of trafilatura (cProfile, cumulative seconds of its main steps) says where the rest
  goes.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness
from bench_extract import DIRECT, ROOT, load_sets, prf
from study_extract_cascade import _counts

SHARED = ROOT.parent / "shared" / "corpus"
#: Tags trafilatura's own cleaning removes whole (its MANUALLY_CLEANED list), removed by Lexbor.
LEXBOR_DROP = ("script, style, noscript, svg, template, iframe, object, embed, canvas, link, "
               "input, select, button, textarea, form")
#: trafilatura's steps as the profile names them (module:function).
STEPS = {"readability / jusText comparison": "compare_extraction",
         "main extraction (_extract)": "_extract", "pruning (prune_unwanted_nodes)":
         "prune_unwanted_nodes", "tree cleaning": "tree_cleaning", "parsing (load_html)":
         "load_html", "baseline (html2txt)": "html2txt", "lxml.html class lookup": "lookup",
         "tree copies (copy.copy)": "copy"}


def _timed(function: Callable[[str], str | None], pages: list[str], repeat: int
           ) -> tuple[list[str], float]:
    best, texts = np.full(len(pages), np.inf), []
    for _ in range(repeat):
        texts = []
        for k, page in enumerate(pages):
            started = time.process_time()
            texts.append((function(page) or "").strip())
            best[k] = min(best[k], time.process_time() - started)
    return texts, float(best.sum())


def _pruned(page: str) -> str:
    from resiliparse.parse.html import HTMLTree

    tree = HTMLTree.parse(page)
    for node in tree.document.query_selector_all(LEXBOR_DROP):
        node.decompose()
    return str(tree)


def _profile(pages: list[str]) -> dict[str, float]:
    import trafilatura

    profile = cProfile.Profile()
    profile.enable()
    for page in pages:
        trafilatura.extract(page, **DIRECT)
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    total = sum(tt for (_, _, name), (_, _, tt, _, _) in stats.items())
    out = {"total": total}
    for label, function in STEPS.items():
        out[label] = sum(ct for (_, _, name), (_, _, _, ct, _) in stats.items()
                         if name == function)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=SHARED)
    ap.add_argument("--repeat", type=int, default=2)
    harness.add_results_argument(ap, ROOT / "benchmarks" / "results_extract_speedups.md")
    args = ap.parse_args()
    import trafilatura
    import trafilatura.utils
    from lxml import etree
    from lxml.html import HtmlElement, HtmlElementClassLookup

    def traf(page: str) -> str | None:
        return trafilatura.extract(page, **DIRECT)

    def fast(page: str) -> str | None:
        return trafilatura.extract(page, **{**DIRECT, "no_fallback": True})

    def lexbor(page: str) -> str | None:
        return trafilatura.extract(_pruned(page), **DIRECT)

    parser = trafilatura.utils.HTML_PARSER
    lines = ["# trafilatura's own algorithm, made faster (issue 35, second study)", "",
             "Per set: F1, pages per CPU-second against trafilatura alone (one core, each page's "
             f"best of {args.repeat}), and pages whose text equals trafilatura's.", ""]
    figures: dict[str, dict] = {}
    sets = load_sets(args.corpus)
    for name, (pages, ref) in sets.items():
        base, base_cpu = _timed(traf, pages, args.repeat)
        variants = {"fast": _timed(fast, pages, args.repeat),
                    "pruned by Lexbor": _timed(lexbor, pages, args.repeat)}
        parser.set_element_class_lookup(etree.ElementDefaultClassLookup(element=HtmlElement))
        try:
            variants["C class lookup"] = _timed(traf, pages, args.repeat)
        finally:
            parser.set_element_class_lookup(HtmlElementClassLookup())
        rows = [("trafilatura", prf(*_counts(name, ref, base).sum(0))[2], 1.0, len(pages))]
        rows += [(label, prf(*_counts(name, ref, texts).sum(0))[2], base_cpu / cpu,
                  sum(a == b for a, b in zip(base, texts, strict=True)))
                 for label, (texts, cpu) in variants.items()]
        lines += [f"## {name} ({len(pages)} pages)", "",
                  "| variant | F1 | pages per CPU-s vs trafilatura | pages as trafilatura |",
                  "|---|---:|---:|---:|"]
        lines += [f"| {r[0]} | {r[1]:.4f} | {r[2]:.2f}x | {r[3]} |" for r in rows]
        lines.append("")
        figures[name] = {r[0]: {"f1": r[1], "speed": r[2], "same": r[3]} for r in rows}
    every = [page for pages, _ in sets.values() for page in pages]
    profile = _profile(every)
    lines += ["## Where trafilatura's CPU goes (cProfile over both sets, cumulative)", "",
              "| step | share of trafilatura's time |", "|---|---:|"]
    lines += [f"| {label} | {seconds / profile['total']:.0%} |"
              for label, seconds in profile.items() if label != "total"]
    figures["profile"] = profile
    harness.record(args.results, "\n".join(lines), figures=figures)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
