# ruff: noqa: RUF001  (full-width forms and Japanese punctuation are the point here)
"""line_dedup as a barrier on real runs: English and Japanese documents built from the bundled
speeches and Aozora texts, with planted shared lines, paragraphs and sentence spans. Every
planted unit goes as configured (first holder kept, or none), no character outside the planted
units changes, every document is accounted for, and an added input file reuses the old parts'
hash phase and publishes a from-scratch run's bytes."""

from __future__ import annotations

import difflib
import json
import unicodedata
from collections import Counter
from dataclasses import dataclass, field

import pyarrow.parquet as pq
import pytest

from curator import LineDedup, Pipeline, ReadJsonl, WriteParquet
from curator.report.html import render_html
from tests.conftest import assert_accounting, sample_documents
from tests.published import published_differences

FILES = 5
FOOTER = ["© 2024 Example News · All rights reserved · Privacy · Terms of use",
          "©  2024 EXAMPLE NEWS · All Rights Reserved · Privacy · Terms of Use"]
NOTICE = [["Notice: this archive is provided for research purposes only.",
           "Its pages may be updated or removed without further notice."],
          ["NOTICE:  This archive is provided for research purposes only.",
           "Its pages may be updated or removed without further notice.   "],
          ["Ｎｏｔｉｃｅ: this archive is provided for research purposes only.",
           "Its pages may be updated or removed without further notice."]]
SHOP = [["送料無料（一部地域を除く）", "カートに入れる", "ご注文は24時間受け付けております。"],
        ["送料無料（一部地域を除く）", "ｶｰﾄに入れる", "ご注文は２４時間受け付けております。"]]
SPAN_EN = ("Subscribe to our newsletter for weekly updates. We never share your address. "
           "You can unsubscribe at any time.")
SPAN_JA = "会員登録で五百ポイント進呈。今すぐ登録しましょう。詳しくは公式サイトをご覧ください。"
ENDS = (".", "!", "?", "。", "！", "？", "。」", '."', ".”")  # a span after it starts a sentence
SHORT = ["Archive page one.", "Archive page two."]  # all that is left of two site pages


def _key(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


@dataclass
class Doc:
    """A test document: blocks of lines; a line is (text, planted unit or None)."""

    id: str
    blocks: list[list[tuple[str, str | None]]]
    spans: dict[int, str] = field(default_factory=dict)  # line number -> planted span after it

    def lines(self, unit: str, drop: set[str]) -> list[list[str]]:
        """The blocks' lines without the planted units ``drop`` (those of ``unit``)."""
        out, n = [], 0
        for block in self.blocks:
            kept = []
            for text, planted in block:
                span = self.spans.get(n)
                n += 1
                if planted in drop and unit == "line":
                    continue
                if span and not (unit == "sentence_span" and _span_tag(span) in drop):
                    text += ("" if span == SPAN_JA else " ") + span
                kept.append(text)
            if unit == "paragraph" and any(p in drop for _, p in block):
                continue
            out.append(kept)
        return out

    def text(self, unit: str = "line", drop: frozenset[str] = frozenset()) -> str:
        """The text (with ``drop`` removed as ``unit`` removes it: a line with the break before
        it, a paragraph with the blank line before it, a span with the space before it)."""
        blocks = self.lines(unit, set(drop))
        if unit == "line":
            flat = [line for block in self.blocks_with_gaps(blocks) for line in block]
            return "\n".join(flat)
        return "\n\n".join("\n".join(b) for b in blocks)

    @staticmethod
    def blocks_with_gaps(blocks: list[list[str]]) -> list[list[str]]:
        return [[*b, ""] if k < len(blocks) - 1 else b for k, b in enumerate(blocks)]


def _span_tag(span: str) -> str:
    return "span-ja" if span == SPAN_JA else "span-en"


def _unique_lines() -> tuple[list[str], list[str]]:
    """English and Japanese lines of the sample that occur once in it (by key), 40+ chars,
    ending a sentence; of one edition of each title (the sample holds some Aozora works twice,
    with and without ruby: their lines differ, their sentences do not)."""
    docs = sample_documents()
    counts = Counter(_key(line) for d in docs for line in d["text"].splitlines())
    english, japanese = [], []
    works = set()
    for d in docs:
        ja = d["id"][0].isdigit()
        work = d.get("title") or d["id"]
        if work in works:
            continue
        works.add(work)
        for line in d["text"].splitlines():
            line = line.strip()
            if counts[_key(line)] == 1 and len(line) >= 40 and line.endswith(ENDS):
                (japanese if ja else english).append(line)
    return english, japanese


def _corpus(plant: set[str]) -> list[Doc]:
    """Documents of four unique lines in two paragraphs (120 English, 80 Japanese), planted:
    ``footer`` on 30 % of site A (English 0-59), ``notice`` on 5 % of all, ``shop`` on 40 % of
    the Japanese, ``span`` after the first line of 10 % of each; two site-A pages of one short
    line and the footer."""
    english, japanese = _unique_lines()
    docs = []
    for k in range(200):
        pool, ja = (english, False) if k < 120 else (japanese, True)
        lines = pool[4 * (k - 120 * ja):][:4]
        assert len(lines) == 4, "the sample has too few unique lines"
        doc = Doc(f"doc-{k:03d}", [[(lines[0], None), (lines[1], None)],
                                   [(lines[2], None), (lines[3], None)]])
        if "span" in plant and k % 10 == 7:
            doc.spans[0] = SPAN_JA if ja else SPAN_EN
        if "notice" in plant and k % 20 == 11:
            doc.blocks.insert(1, [(line, "notice") for line in NOTICE[k % 3]])
        if "shop" in plant and ja and k % 5 in (1, 3):
            doc.blocks.append([(line, "shop") for line in SHOP[k % 2]])
        if "footer" in plant and k < 60 and k % 10 in (0, 4, 8):
            doc.blocks.append([(FOOTER[k % 2], "footer")])
        docs.append(doc)
    if "footer" in plant:
        docs += [Doc(f"short-{n}", [[(line, None)], [(FOOTER[n], "footer")]])
                 for n, line in enumerate(SHORT)]
    return docs


def _write(folder, docs: list[Doc], files: tuple[int, ...] = tuple(range(FILES))) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for n in files:
        with open(folder / f"f-{n}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps({"id": d.id, "text": d.text()}, ensure_ascii=False) + "\n"
                         for d in docs[n::FILES])


def _planted(doc: Doc) -> set[str]:
    return {p for b in doc.blocks for _, p in b if p} | {_span_tag(s) for s in doc.spans.values()}


def _expected(docs: list[Doc], unit: str, keep_first: bool) -> dict[str, str]:
    """Each document's text after the run: planted units gone but from their first holder
    (smallest (file, row): documents are dealt round-robin into the files)."""
    order = sorted(range(len(docs)), key=lambda k: (k % FILES, k // FILES))
    first: dict[str, int] = {}
    for k in order:
        for planted in _planted(docs[k]):
            first.setdefault(planted, k)
    return {d.id: d.text(unit, frozenset(p for p in _planted(d)
                                         if not (keep_first and first[p] == k)))
            for k, d in enumerate(docs)}


def _changed_outside(before: str, after: str) -> int:
    """Characters changed once every planted unit is taken out of both texts (and whitespace
    runs collapsed): 0 where only planted units went."""
    planted = [*FOOTER, *(line for n in NOTICE for line in n), *(line for s in SHOP for line in s),
               SPAN_EN, SPAN_JA]
    for unit in sorted(planted, key=len, reverse=True):
        before, after = before.replace(unit, " "), after.replace(unit, " ")
    before, after = " ".join(before.split()), " ".join(after.split())
    if before == after:
        return 0
    blocks = difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()
    return sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in blocks if tag != "equal")


def _run(tmp_path, docs, **options):
    _write(tmp_path / "in", docs)
    run = tmp_path / "run"
    Pipeline([ReadJsonl(path=str(tmp_path / "in" / "*.jsonl")), LineDedup(**options),
              WriteParquet()]).run(output=run, executor="local", progress=False)
    return run


def _check(run, docs, unit, keep_first, too_short=()) -> dict:
    """Kept texts as expected, too-short pages removed, counts and columns agree."""
    stats = assert_accounting(run)
    expected = _expected(docs, unit, keep_first)
    before = {d.id: d.text() for d in docs}
    kept = pq.read_table(run / "write_parquet").to_pylist()
    removed = pq.read_table(run / "rejected" / "line_dedup").to_pylist()
    assert sorted(r["id"] for r in removed) == sorted(too_short)
    assert {r["reason"] for r in removed} <= {"line_dedup_too_short"}
    assert sum(_changed_outside(before[r["id"]], r["text"]) for r in kept) == 0
    for row in kept:
        assert row["text"] == expected[row["id"]], row["id"]
        assert row["dup_chars_removed"] == len(before[row["id"]]) - len(row["text"])
    assert {r["id"] for r in kept} | set(too_short) == set(before)
    facts = next(s for s in stats["stages"] if s["name"] == "line_dedup")["line_dedup"]
    changed = [r for r in kept if r["dup_units_removed"]]
    assert facts["documents_changed"] == len(changed) + len(too_short)
    assert facts["chars_removed"] == sum(r["dup_chars_removed"] for r in kept + removed)
    assert facts["documents_too_short"] == len(too_short)
    assert sum(facts["removed_fraction"].values()) == facts["documents_changed"]
    page = render_html(stats)  # the report states the totals and the histogram
    assert f"units removed: {facts['units_removed']:,}" in page
    assert f"chars removed: {facts['chars_removed']:,}" in page
    for share, n in facts["removed_fraction"].items():
        assert n == 0 or f"{n:,} documents lost {share} of their characters" in page
    return facts


@pytest.mark.parametrize("keep_first", [True, False])
def test_planted_lines_go_from_all_but_the_first_holder(tmp_path, keep_first):
    """Footer, notice and shop lines (case, width and space variants of each) go from every
    document but their first holder's, or from all; lines holding a planted span are unique
    and stay; two site pages left with a short line are removed."""
    docs = _corpus({"footer", "notice", "shop", "span"})
    facts = _check(_run(tmp_path, docs, keep_first=keep_first), docs, "line", keep_first,
                   too_short=["short-0", "short-1"])
    lines = sum(1 for d in docs for b in d.blocks for _, p in b if p)
    first_copies = 1 + 2 + 3  # footer, notice, shop lines in their first holder
    assert facts["units_removed"] == lines - first_copies * keep_first
    assert facts["duplicated_units"] == 6


def test_min_chars_zero_keeps_what_is_left(tmp_path):
    """With min_chars 0 the short pages keep their line, without their footer (keep_first
    off: no page keeps it); a short document without duplicates is never touched."""
    docs = _corpus({"footer"})
    docs.append(Doc("tiny", [[("Unique.", None)]]))
    _check(_run(tmp_path, docs, keep_first=False, min_chars=0), docs, "line", False)


def test_planted_paragraphs_go_whole(tmp_path):
    """As paragraphs, the notice (three variants of one block) and the shop block go with the
    blank line before them; the footer paragraph too."""
    docs = _corpus({"footer", "notice", "shop"})
    facts = _check(_run(tmp_path, docs, unit="paragraph", buckets=3), docs, "paragraph", True,
                   too_short=["short-0", "short-1"])
    assert facts["duplicated_units"] == 3  # footer, notice, shop (its variants are one)


def test_planted_sentence_spans(tmp_path):
    """Three-sentence spans inside English and Japanese lines go (the Japanese one split at
    。 without spaces), leaving the rest of each line; no unique sentence goes."""
    docs = _corpus({"span"})
    facts = _check(_run(tmp_path, docs, unit="sentence_span"), docs, "sentence_span", True)
    assert facts["units_removed"] == 3 * (sum(1 for d in docs if d.spans) - 2)


def test_added_files_reuse_the_old_parts_hashes(tmp_path):
    """Four files, then a fifth that sorts between them: the hash phase reuses the four parts'
    work, first holders follow the new order, and the run publishes a from-scratch run's
    bytes."""
    docs = _corpus({"footer", "notice", "shop"})
    _write(tmp_path / "in", docs, (0, 2, 3, 4))

    def pipeline(output):
        return Pipeline([ReadJsonl(path=str(tmp_path / "in" / "*.jsonl")), LineDedup(),
                         WriteParquet()], output=str(output))

    run = tmp_path / "run"
    pipeline(run).run(executor="local", progress=False)
    _write(tmp_path / "in", docs, (1,))
    stats = pipeline(run).run(executor="local", progress=False).stats
    phases = stats["reuse"]["segment-01"]["phases"]
    assert (phases["hash"]["tasks"], phases["hash"]["reused"]) == (5, 4)
    assert phases["count"]["reused"] == 0
    _check(run, docs, "line", True, too_short=["short-0", "short-1"])
    pipeline(tmp_path / "scratch").run(executor="local", progress=False)
    assert published_differences(run, tmp_path / "scratch") == []
