"""heuristic_filter decides as datatrove's chain does (issue 29, defect 5).

datatrove's FineWeb recipe runs GopherRepetition → GopherQuality → C4 → FineWeb on each
document, and its C4QualityFilter rewrites the document to the lines it keeps (stripped, only
lines ending in terminal punctuation with 3+ words): the FineWeb filter judges that text. On
prose whose lines still carry trailing spaces, ``fineweb.min_line_punct_ratio`` over the input
lines removed documents the chain keeps. Now, with ``c4`` before ``fineweb`` in ``presets``, the
FineWeb rules read the text C4 leaves; alone (or before ``c4``) they read the document's lines, as
datatrove's FineWeb filter alone does."""

from __future__ import annotations

import gzip
import json
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

from curator import HeuristicFilter
from curator.stages.filters.heuristic.c4 import kept_text
from tests.conftest import SAMPLE

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
CHAIN = ["gopher_repetition", "gopher_quality", "c4", "fineweb"]


def reasons(texts: list[str], presets: list[str], lang: str = "en",
            **kw) -> list[str | None]:
    table = pa.table({"text": texts, "lang": [lang] * len(texts)})
    return HeuristicFilter(presets=presets, **kw).reasons(table).to_pylist()


def wrapped(text: str, width: int = 72) -> str:
    """Each paragraph hard-wrapped, the space kept at the end of every line (a text dump)."""
    return "\n".join("\n".join(textwrap.wrap(p, width, drop_whitespace=False))
                     for p in text.split("\n"))


@pytest.fixture(scope="module")
def speeches() -> list[dict]:
    """The bundled speeches (124, public domain): every fourth one whole, and every fifth
    piece of 15 paragraphs of all, as they are and hard-wrapped with trailing spaces."""
    docs = []
    for name in ("inaugural", "state_union"):
        with gzip.open(SAMPLE / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                paragraphs = [p for p in d["text"].split("\n") if p.strip()]
                docs.append({"id": d["id"], "text": d["text"]})
                docs += [{"id": f"{d['id']}#{k}", "text": "\n".join(paragraphs[k:k + 15])}
                         for k in range(0, len(paragraphs), 15)]
    docs = [d for d in docs if "#" not in d["id"]][::4] + [d for d in docs if "#" in d["id"]][::5]
    return [*docs, *({"id": f"{d['id']}#wrapped", "text": wrapped(d["text"])} for d in docs)]


def test_decisions_agree_with_datatrove_chain_on_prose_with_trailing_spaces(speeches):
    """Defect 5: the wrapped speeches were removed by fineweb.min_line_punct_ratio (each line
    ends in a space), though the chain keeps them; now the decisions are the chain's."""
    pytest.importorskip("datatrove")
    pytest.importorskip("spacy")
    sys.path.insert(0, str(BENCH))
    from bench_heuristic_chain import datatrove_decisions

    theirs, _ = datatrove_decisions(speeches)
    ours = reasons([d["text"] for d in speeches], CHAIN)
    raw = [d for d in speeches if d["id"].endswith("#wrapped")]
    assert len(raw) == len(speeches) // 2 > 150
    assert sum(r is None for r in theirs) > 0.8 * len(speeches)  # the chain keeps most
    wrong = [(d["id"], a, b) for d, a, b in zip(speeches, theirs, ours, strict=True)
             if (a is None) != (b is None)]
    assert len(wrong) <= 0.01 * len(speeches), wrong
    assert not [w for w in wrong if w[2] and w[2].startswith("fineweb.")], wrong


def _sentences(speech: int, count: int) -> list[str]:
    """``count`` sentences of a bundled speech."""
    with gzip.open(SAMPLE / "inaugural.jsonl.gz", "rt", encoding="utf-8") as f:
        text = [json.loads(line) for line in f][speech]["text"]
    sentences = [s.strip() + "." for s in text.replace("\n", " ").split(". ") if s.strip()]
    return [s for s in sentences if len(s.split()) >= 5][:count]


def test_fineweb_reads_the_text_c4_leaves_only_after_c4():
    lines = [s + " " for s in _sentences(40, 12)]
    page = "\n".join(lines)  # every line ends in a space: none "ends in punctuation"
    assert reasons([page], ["fineweb"]) == ["fineweb.min_line_punct_ratio"]  # as datatrove alone
    assert reasons([page], ["fineweb", "c4"]) == ["fineweb.min_line_punct_ratio"]
    assert reasons([page], ["c4", "fineweb"]) == [None]  # as datatrove's chain
    assert reasons([page], CHAIN) == [None]
    assert kept_text(page, {}) == "\n".join(line.strip() for line in lines)
    # the document's text is not rewritten: a filter keeps or removes documents
    table = pa.table({"text": [page]})
    assert HeuristicFilter(presets=CHAIN).process(table).kept.column("text").to_pylist() == [page]


def test_fineweb_after_c4_counts_duplicates_and_short_lines_in_the_kept_lines():
    body = _sentences(12, 10)
    menu = [f"Section {k}" for k in range(30)]  # short lines, dropped by C4
    page = "\n".join(menu + body)
    assert reasons([page], ["fineweb"]) == ["fineweb.max_short_line_ratio"]
    assert reasons([page], ["c4", "fineweb"]) == [None]
    repeated = "\n".join(body[:5] + ["Share this page", "Print"] * 6 + body[5:])
    assert reasons([repeated], ["fineweb"]) == ["fineweb.max_char_dup_ratio"]
    assert reasons([repeated], ["c4", "fineweb"]) == [None]


def test_a_document_c4_leaves_empty_fails_fineweb_as_datatrove_does():
    """With C4's sentence rule off, a page none of whose lines C4 keeps reaches FineWeb empty
    (datatrove: removed, "empty")."""
    page = "\n".join(["Home | About | Contact", "Sign in", "Menu"] * 3)
    assert reasons([page], ["c4", "fineweb"], overrides={"c4.min_sentences": None}) == [
        "fineweb.min_line_punct_ratio"]


def test_languages_c4_does_not_judge_keep_their_own_lines():
    """C4's line rules are for space-delimited text: a Chinese page is not emptied by them."""
    page = "\n".join(["今天的天气很好我们一家人吃过早饭以后就一起去公园散步看花还拍了很多照片。",
                      "这是第二段讲的是别的事情我们在湖边遇到了多年不见的老朋友大家聊了很久。",
                      "第三段也很长有很多字中午我们在公园旁边的小饭馆吃了面条然后慢慢走回家。"])
    assert kept_text(page, {}) == ""  # C4 keeps no line of it (none ends in . ? !)
    assert reasons([page], CHAIN, lang="zh") == [None]
