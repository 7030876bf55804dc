"""arXiv LaTeX -> prose on the real papers of ../shared/corpus/arxiv_latex, through the product
path ``Pipeline([ArxivSource, ExtractLatex, WriteJsonl]).run(executor="local")`` (one process),
side by side in one run with two references on the same resolved LaTeX:

* pylatexenc's ``LatexNodes2Text().latex_to_text`` called directly (default settings, whole
  document): the library curator builds on, without curator's source steps;
* the RedPajama/Dolma arXiv recipe's source steps alone (comments, preamble cut, bibliography
  cut, argument-less macros expanded; markup kept), as curator implements them.

Per paper: output tokens (whitespace words), tokens holding a LaTeX command outside math (the
leftover fraction; target < 0.5%), tokens with a stray brace; and documents per second.
Writes ``benchmarks/results_latex.md``.

    python benchmarks/bench_latex.py [--corpus ../shared/corpus/arxiv_latex] [--copies 5]
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
import tempfile
import time
from pathlib import Path

import harness

from curator import ArxivSource, ExtractLatex, Pipeline, WriteJsonl
from curator.io.latex_project import strip_comments
from curator.stages.extract.latex_text import (
    body,
    expand_macros,
    latex_to_text,
    leftover_commands,
    stray_braces,
)


def papers_of(corpus: Path) -> list[Path]:
    return [p for p in sorted(corpus.iterdir()) if p.is_dir() or p.name.endswith(".tar.gz")]


def resolved_sources(corpus: Path) -> dict[str, str]:
    """The arxiv source's output (main file, inputs resolved) for every paper."""
    source = ArxivSource(path=[str(p) for p in papers_of(corpus)])
    docs = {}
    for shard in source.shards():
        for batch in source.read(shard, 1 << 20):
            docs.update(zip(batch.table.column("id").to_pylist(),
                            batch.table.column("text").to_pylist(), strict=True))
    return docs


def product_run(corpus: Path, work: Path, copies: int) -> tuple[dict[str, str], float, int]:
    """Every paper ``copies`` times (links under distinct names) through the pipeline."""
    inputs = work / "in"
    inputs.mkdir()
    papers = papers_of(corpus)
    for copy in range(copies):
        for paper in papers:
            (inputs / f"c{copy}_{paper.name}").symlink_to(paper)
    out = work / "run"
    start = time.perf_counter()
    Pipeline([ArxivSource(path=f"{inputs}/*"), ExtractLatex(), WriteJsonl()],
             output=str(out)).run(executor="local", progress=False)
    seconds = time.perf_counter() - start
    texts = {}
    for part in sorted((out / "write_jsonl").rglob("*.jsonl")):
        for line in part.read_text().splitlines():
            doc = json.loads(line)
            texts[re.sub(r"^c\d+_", "", doc["arxiv_id"])] = doc["text"]  # the copy's prefix
    return texts, seconds, copies * len(papers)


def timed(convert, sources: dict[str, str]) -> tuple[dict[str, str | None], float]:
    """Each paper converted (None where the converter raised) and the seconds it all took."""
    out: dict[str, str | None] = {}
    start = time.perf_counter()
    for key, tex in sources.items():
        try:
            out[key] = convert(tex)
        except Exception as err:  # a reference that crashes on a paper is a result too
            print(f"{key}: {type(err).__name__}: {err}", file=sys.stderr)
            out[key] = None
    return out, time.perf_counter() - start


def figures(text: str) -> tuple[int, int, int]:
    tokens, leftover = leftover_commands(text)
    return tokens, leftover, stray_braces(text)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", default=str(Path(__file__).resolve().parents[2] / "shared"
                                                   / "corpus" / "arxiv_latex"))
    parser.add_argument("--copies", type=int, default=5)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results_latex.md"))
    args = parser.parse_args()
    corpus = Path(args.corpus)
    from pylatexenc.latex2text import LatexNodes2Text

    sources = resolved_sources(corpus)
    with tempfile.TemporaryDirectory() as tmp:
        product, product_s, n_docs = product_run(corpus, Path(tmp), args.copies)
    ours, ours_s = timed(latex_to_text, sources)
    reference = LatexNodes2Text()
    direct, direct_s = timed(reference.latex_to_text, sources)
    recipe, recipe_s = timed(lambda t: body(expand_macros(strip_comments(t))), sources)
    assert all(product[k] == ours[k] for k in sources), "product path differs from the function"

    rows, totals = [], {name: [0, 0, 0] for name in ("curator", "pylatexenc", "recipe")}
    for paper in sorted(sources):
        cells = [paper, str(len(sources[paper]))]
        for name, texts in (("curator", product), ("pylatexenc", direct), ("recipe", recipe)):
            if texts[paper] is None:
                cells += ["crashed", "-"]
                continue
            tokens, leftover, braces = figures(texts[paper])
            for i, v in enumerate((tokens, leftover, braces)):
                totals[name][i] += v
            cells += [str(tokens), f"{leftover / max(tokens, 1):.4%}"]
            if name == "curator":
                cells.append(str(braces))
        rows.append("| " + " | ".join(cells) + " |")
    total_cells = ["**all**", str(sum(len(s) for s in sources.values()))]
    for name in ("curator", "pylatexenc", "recipe"):
        tokens, leftover, braces = totals[name]
        total_cells += [str(tokens), f"**{leftover / tokens:.4%}**"]
        if name == "curator":
            total_cells.append(str(braces))
    rows.append("| " + " | ".join(total_cells) + " |")
    n = len(sources)
    lines = [
        "# arXiv LaTeX -> prose (benchmarks/bench_latex.py)",
        "",
        f"Command: `{' '.join([Path(sys.executable).name, *sys.argv])}`  ",
        f"Machine: {platform.processor() or platform.machine()}, Python "
        f"{platform.python_version()}; input: {n} real papers of `{corpus}`.",
        "",
        "Leftover = whitespace tokens outside math (`$..$`, `\\[..\\]`, equation-like "
        "environments) that hold a `\\command`; braces = such tokens holding `{` or `}`. "
        "Math is kept as LaTeX by design (as RedPajama/Dolma keep it), so commands inside it "
        "are not leftovers.",
        "",
        "| paper | LaTeX chars | curator tokens | curator leftover | curator braces "
        "| pylatexenc tokens | pylatexenc leftover | recipe tokens | recipe leftover |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        "## Speed",
        "",
        f"* Product path (`ArxivSource -> ExtractLatex -> WriteJsonl`, executor local, one "
        f"process; unpacking, input resolution, conversion, writing): {n_docs} documents "
        f"({args.copies} copies of each paper) in {product_s:.2f} s = "
        f"**{n_docs / product_s:.1f} docs/s**.",
        f"* Conversion alone, {n} papers: curator `latex_to_text` {ours_s:.2f} s "
        f"({n / ours_s:.1f} docs/s); pylatexenc `LatexNodes2Text` direct {direct_s:.2f} s "
        f"({n / direct_s:.1f} docs/s): ratio curator/pylatexenc speed "
        f"**{direct_s / ours_s:.2f}x**; recipe steps alone {recipe_s:.3f} s.",
        "",
    ]
    harness.record(args.out, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
