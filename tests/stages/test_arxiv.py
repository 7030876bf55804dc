"""arxiv source and extract_latex: arXiv ids from names, main-file detection and \\input
resolution on real papers, LaTeX -> prose rules, and a `curate run` over the real papers plus
a traversal archive and a decompression bomb that are refused, counted and reported."""

from __future__ import annotations

import gzip
import json
import shutil
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from typer.testing import CliRunner

from curator.cli import app
from curator.io.latex_project import InputTooLarge, resolve_inputs
from curator.runtime.worker.sandbox import release_all
from curator.stages.extract.latex import ExtractLatex
from curator.stages.extract.latex_text import LatexTooLarge, latex_to_text, leftover_commands
from curator.stages.sources.arxiv import ArxivSource, arxiv_id
from tests.conftest import assert_accounting
from tests.io.test_archives import make_tar

pytest.importorskip("pylatexenc")

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "arxiv_latex"
needs_corpus = pytest.mark.skipif(not CORPUS.exists(), reason="shared corpus not staged")

PAPER = r"""\documentclass[11pt]{article}
\usepackage{amsmath}
% \input{never-read}
\newcommand{\method}{SparseFlow}
\newcommand\R{\mathbb{R}}
\def\etal{et al.}
\newcommand{\norm}[1]{\lVert #1 \rVert}
\title{A \method{} paper}
\begin{document}
\maketitle
\begin{abstract}
We present \method, a method for flows in $\R^n$.
\end{abstract}
\section{Introduction}\label{sec:intro}
Prior work by Smith \etal{} \cite{smith2020} is \emph{slow} and \textbf{costly}. % a remark
See Section~\ref{sec:method} and 50\% of cases.
As \citet{jones} showed
\citep[e.g.][p.~3]{a,b}, flows help.
\begin{figure}[t]
\centering
\includegraphics[width=\linewidth]{fig1.pdf}
\caption{Speed of \method{} on \textit{large} graphs.}
\label{fig:speed}
\end{figure}
\section{Method}\label{sec:method}
We minimise $\norm{x}$ subject to
\begin{equation}
  x \in \R^n .
\end{equation}
\begin{table}
\begin{tabular}{cc} a & b \\ \end{tabular}
\caption{Results.}
\end{table}
\bibliographystyle{plain}
\bibliography{refs}
\end{document}
"""


def test_arxiv_ids_from_names():
    assert arxiv_id("1911.02782.source-textonly.tar.gz") == "1911.02782"
    assert arxiv_id("2004.14974v2.tar.gz") == "2004.14974v2"
    assert arxiv_id("scipy-1.0_1907.10121") == "1907.10121"
    assert arxiv_id("hep-th9901001.gz") == "hep-th/9901001"
    assert arxiv_id("math.AG_0601001.tar.gz") == "math.AG/0601001"
    assert arxiv_id("my-paper.tar.gz") == "my-paper"


def test_latex_to_prose_rules():
    text = latex_to_text(PAPER)
    lines = text.split("\n")
    assert lines[0] == "Abstract"  # the abstract kept, the title and preamble cut
    assert "We present SparseFlow, a method for flows in $\\mathbb{R}^n$." in text
    assert "Introduction" in lines and "Method" in lines  # headings as their own lines
    assert "Prior work by Smith et al. is slow and costly." in text  # cite dropped
    assert "See Section [ref] and 50% of cases. As [cite] showed, flows help." in text
    assert "Speed of SparseFlow on large graphs." in lines  # figure -> its caption
    assert "Results." in lines and "a & b" not in text  # table -> caption, tabular gone
    assert "\\begin{equation}\nx \\in \\mathbb{R}^n .\n\\end{equation}" in text  # math kept
    assert "never-read" not in text and "remark" not in text  # comments gone
    assert "plain" not in text and "refs" not in text  # bibliography cut
    assert "fig1.pdf" not in text and "sec:intro" not in text
    assert leftover_commands(text)[1] == 0
    assert "Abstract" not in latex_to_text(PAPER, keep_abstract=False)


def test_extract_latex_removes_empty_and_accounts_for_every_row():
    batch = pa.table({"id": ["a", "b", "c"],
                      "text": [PAPER, "\\documentclass{article}\\begin{document}\\end{document}",
                               "% only a comment"],
                      "arxiv_id": ["a", "b", "c"]})
    result = ExtractLatex().process(batch)
    assert result.kept.column("id").to_pylist() == ["a"]
    assert result.removed.column("reason").to_pylist() == ["no_text", "no_text"]
    assert result.kept.column_names == ["id", "text", "arxiv_id"]
    assert result.kept.num_rows + result.removed.num_rows + len(result.failed) == 3


@needs_corpus
def test_main_file_and_inputs_of_real_papers():
    source = ArxivSource(path=[str(CORPUS / "2004.14974.source-textonly.tar.gz"),
                               str(CORPUS / "scipy-1.0_1907.10121")])
    docs = {}
    for shard in source.shards():
        for batch in source.read(shard, 1 << 20):
            assert not batch.failed
            docs.update(zip(batch.table.column("id").to_pylist(),
                            batch.table.column("text").to_pylist(), strict=True))
    assert set(docs) == {"2004.14974", "1907.10121"}
    scifact = docs["2004.14974"]
    assert scifact.count("\\documentclass") == 1  # emnlp2020.tex, not a draft or ._ file
    assert "\\input{" not in scifact and "\\input " not in scifact
    introduction = (CORPUS / "scipy-1.0_1907.10121" / "core-dev.tex").read_text()
    assert introduction.strip().splitlines()[-1].strip() in docs["1907.10121"]


def _bomb() -> bytes:
    return make_tar({"main.tex": PAPER.encode(), "pad.tex": bytes(64 << 20)})


@needs_corpus
def test_curate_run_real_papers_with_hostile_archives(tmp_path, dask_scheduler):
    inputs = tmp_path / "in"
    inputs.mkdir()
    for item in CORPUS.iterdir():
        if item.is_dir():
            shutil.copytree(item, inputs / item.name)
        elif item.name.endswith(".tar.gz"):
            shutil.copy(item, inputs / item.name)
    (inputs / "2301.00001.tar.gz").write_bytes(make_tar({"main.tex": PAPER.encode(),
                                                         "../evil.tex": b"x"}))
    (inputs / "2301.00002.tar.gz").write_bytes(_bomb())
    (inputs / "2301.00003.gz").write_bytes(gzip.compress(PAPER.encode()))  # a single .tex
    (inputs / "2301.00004.tar.gz").write_bytes(make_tar({"notes.txt": b"no LaTeX here"}))
    config = tmp_path / "p.yaml"
    config.write_text(f"name: arxiv\noutput: {tmp_path / 'run'}\nexecutor: {{type: dask}}\n"
                      "stages:\n"
                      f"  - {{type: arxiv, path: '{inputs}/*'}}\n"
                      "  - {type: extract_latex}\n"
                      "  - {type: write_jsonl}\n")
    result = CliRunner().invoke(app, ["run", str(config), "--scheduler", dask_scheduler])
    assert result.exit_code == 0, result.output
    run = tmp_path / "run"
    stats = assert_accounting(run)
    source, extract = stats["stages"][0], stats["stages"][1]
    assert source["in"] == 12 and source["failed"] == 3 and source["kept"] == 9
    assert extract["kept"] == 9
    errors = [json.loads(line) for path in sorted((run / "errors" / "arxiv").glob("*.jsonl"))
              for line in path.read_text().splitlines()]
    by_reason = {e["reason"]: e for e in errors}
    assert by_reason["unsafe_archive"]["error"] == \
        "unsafe_archive: member ../evil.tex escapes the root"
    assert by_reason["unsafe_archive"]["file"] == "2301.00001.tar.gz"
    assert by_reason["archive_bomb"]["error"].startswith("archive_bomb: compression ratio")
    assert by_reason["no_main_file"]["id"] == "2301.00004"
    docs = [json.loads(line) for path in sorted((run / "write_jsonl").rglob("*.jsonl"))
            for line in path.read_text().splitlines()]
    assert len(docs) == 9 and {"2301.00003", "1911.02782", "1907.10121"} <= {
        d["arxiv_id"] for d in docs}
    again = CliRunner().invoke(app, ["run", str(config), "--scheduler", dask_scheduler])
    assert again.exit_code == 0 and "0 shards run, 12 resumed" in again.output, again.output
    for doc in docs:
        tokens, leftover = leftover_commands(doc["text"])
        assert leftover / tokens < 0.005, doc["id"]
        assert tokens > 2000 or doc["id"] == "2301.00003", doc["id"]  # real papers are long


# ---- issue 27: \input bounded (defect 3), links in folders (defect 6), time per paper
def _fan_out(levels: int, width: int, leaf: int) -> dict[str, bytes]:
    """Files that each input the next ``width`` times: width**levels copies of the leaf."""
    files = {f"f{i}.tex": (rf"\input{{f{i + 1}}}" * width).encode() for i in range(levels)}
    files[f"f{levels}.tex"] = b"w " * (leaf // 2)
    files["main.tex"] = rb"\documentclass{article}\begin{document}\input{f0}\end{document}"
    return files


def _read(source: ArxivSource) -> tuple[list[dict], list, Counter]:
    rows, failed, notes = [], [], Counter()
    for shard in source.shards():
        for batch in source.read(shard, 1 << 20):
            rows += batch.table.to_pylist()
            failed += batch.failed
            notes.update(batch.notes)
    return rows, failed, notes


def test_the_source_guards_every_paper_by_default():
    source = ArxivSource(path="x")
    assert (source.timeout_s, source.max_text_bytes) == (60.0, 16 << 20)


@pytest.mark.parametrize(("name", "files"), [
    ("2401.00001.tar.gz", _fan_out(19, 3, 200)),  # 3 KB that expanded for ever
    ("2401.00002.tar.gz", _fan_out(8, 4, 400)),  # 1 KB that expanded to 26 MB
])
def test_inputs_that_expand_past_max_text_bytes_fail_fast(tmp_path, name, files):
    assert sum(map(len, files.values())) < 4000
    (tmp_path / name).write_bytes(make_tar(files))
    started = time.perf_counter()
    rows, failed, _ = _read(ArxivSource(path=str(tmp_path / name)))
    assert time.perf_counter() - started < 20  # (a second here; the bound is the work's)
    assert rows == []
    [failure] = failed
    assert (failure.reason, failure.id, failure.file) == ("too_large", name[:10], name)
    assert "over 16777216 bytes" in failure.error


def test_input_cycles_and_depth_are_bounded_and_noted():
    notes: Counter = Counter()
    sources = {"main.tex": r"\input{a}", "a.tex": r"a \input{b}", "b.tex": r"b \input{a}"}
    assert resolve_inputs("main.tex", sources, notes) == "a b "
    chain = {f"c{i}.tex": rf"{i} \input{{c{i + 1}}}" for i in range(30)}
    text = resolve_inputs("c0.tex", chain, notes)
    assert text.split()[-1] == "19" and notes == {"input_cycle": 1, "input_too_deep": 1}
    with pytest.raises(InputTooLarge):
        resolve_inputs("c0.tex", chain, Counter(), max_bytes=5000)


def test_a_link_out_of_a_project_folder_is_refused_and_never_read(tmp_path):
    """Defect 6: a file outside the folder landed in the output text through a link."""
    (tmp_path / "secret.tex").write_text("SECRET-OUTSIDE")
    project = tmp_path / "in" / "2401.00003"
    project.mkdir(parents=True)
    (project / "main.tex").write_bytes(PAPER.replace("\\section{Method}",
                                                     "\\input{notes}\\section{Method}").encode())
    (project / "notes.tex").symlink_to(tmp_path / "secret.tex")
    inside = tmp_path / "in" / "2401.00004"
    inside.mkdir()
    (inside / "main.tex").write_text(PAPER)
    (inside / "alias.tex").symlink_to(inside / "main.tex")
    rows, failed, _ = _read(ArxivSource(path=str(tmp_path / "in" / "*")))
    assert [r["id"] for r in rows] == ["2401.00004"] and "SECRET" not in rows[0]["text"]
    assert [(f.reason, f.id, f.file) for f in failed] == [
        ("unsafe_archive", "2401.00003", "2401.00003")]
    assert "link notes.tex" in failed[0].error


def test_a_paper_that_never_finishes_fails_at_timeout_s(tmp_path, monkeypatch, request):
    """A paper whose resolution provably never finishes (it sleeps) stands in for one that
    stalls a regex; the others go on."""
    import curator.stages.sources.arxiv as arxiv

    real = arxiv.resolve_inputs

    def stalls(main, sources, notes, max_bytes):
        if "STALL" in sources[main]:
            time.sleep(10**6)
        return real(main, sources, notes, max_bytes)

    monkeypatch.setattr(arxiv, "resolve_inputs", stalls)
    release_all()  # pooled children were forked before the patch
    request.addfinalizer(release_all)  # and must not keep it
    (tmp_path / "2401.00005.tar.gz").write_bytes(make_tar({"main.tex": PAPER.encode()}))
    (tmp_path / "2401.00006.tar.gz").write_bytes(make_tar({"main.tex": (PAPER + "STALL")
                                                           .encode()}))
    rows, failed, _ = _read(ArxivSource(path=str(tmp_path / "*.tar.gz"), timeout_s=1))
    assert [r["id"] for r in rows] == ["2401.00005"]
    assert [(f.reason, f.id, f.file) for f in failed] == [
        ("timeout", "2401.00006", "2401.00006.tar.gz")]


def test_a_macro_bomb_is_a_latex_error_not_a_memory_blow_up():
    bomb = PAPER.replace("\\begin{document}", "\\def\\a{\\a\\a\\a\\a\\a\\a\\a\\a\\a\\a}"
                         "\\begin{document}" + "\\a " * 2000)
    with pytest.raises(LatexTooLarge):
        latex_to_text(bomb)
    result = ExtractLatex().process(pa.table({"id": ["b"], "text": [bomb]}))
    assert [(f.id, f.reason) for f in result.failed] == [("b", "latex_error")]


def test_the_arxiv_pipeline_bounds_extract_latex():
    """extract_latex's own defaults are none (curator/stages/extract/latex.py): the shipped
    pipeline sets its time and size limits."""
    config = yaml.safe_load((Path(__file__).parents[2] / "pipelines" / "arxiv.yaml").read_text())
    extract = ExtractLatex(**{k: v for k, v in next(
        s for s in config["stages"] if s["type"] == "extract_latex").items() if k != "type"})
    assert extract.timeout_s and extract.max_document_bytes
