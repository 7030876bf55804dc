"""Line dedup: lines, paragraphs or sentence spans shared by many documents (navigation,
footers, notices, shop boilerplate) removed from all but the first document holding them.

Phases (each restartable, none collects the dataset in one process):
  1. ``hash``    per part:   each non-empty unit's normalised key hashed (XXH3-128) with its
                             (row, unit) → ``hash/<part>.arrow`` sorted by ``h1`` (a
                             ``ShuffleDir``; reused for unchanged parts when inputs are added)
  2. ``count``   per bucket: per unit hash the distinct documents holding it; of a unit in at
                             least ``min_documents`` documents, every occurrence outside the
                             first holder (smallest (part, row)) is dropped, or every one with
                             ``keep_first: false`` → ``decisions/bucket-B.parquet`` (part, row,
                             unit)
  3. ``rewrite`` per part:   the documents that lose units rebuilt without them →
                             ``rewrites/<part>.parquet`` (row, text, units, chars, too_short)
  4. ``remove``  per part:   the shared removal: rewritten text and ``dup_units_removed``,
                             ``dup_chars_removed`` on every row; documents left shorter than
                             ``min_chars`` go (reason ``line_dedup_too_short``)

Splitting and hashing are Python loops per document (``line_units``); no numba kernel yet.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pydantic import Field

from curator.batch import TEXT
from curator.commit import Commit
from curator.io.parquet import read_part
from curator.io.shuffle import ShuffleDir
from curator.stages.base import DatasetResult, DatasetStage
from curator.stages.context import DatasetContext, Decisions, PhaseResult
from curator.stages.dedup import line_units
from curator.stages.dedup.buckets import default_buckets
from curator.stages.dedup.exact import text_hashes
from curator.stages.dedup.line_units import Unit

REASON_SHORT = "line_dedup_too_short"
#: Upper bounds of the removed-character fraction of a changed document (stats.json).
FRACTION_BINS = (0.1, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class Units:
    """How documents are cut into units."""

    unit: Unit
    span: int
    lang_field: str | None  # the language column, where the dataset has it

    def split(self, text: str, lang: str | None) -> tuple[list[line_units.Span], list[str]]:
        """The pieces of ``text`` and its units' keys."""
        japanese = self.unit == "sentence_span" and line_units.is_japanese(text, lang)
        spans = line_units.pieces(text, self.unit, japanese)
        return spans, line_units.unit_keys(text, spans, self.unit, self.span)

    def read(self, path: str) -> tuple[list[str], list[str | None]]:
        """A part's texts and languages (None where unknown)."""
        table = read_part(path, [TEXT, *([self.lang_field] if self.lang_field else [])])
        texts = [t or "" for t in table.column(TEXT).to_pylist()]
        langs = (table.column(self.lang_field).to_pylist() if self.lang_field
                 else [None] * len(texts))
        return texts, langs


def _hashes(work: str) -> ShuffleDir:
    return ShuffleDir(Path(work) / "hash", "h1")


@dataclass(frozen=True)
class _HashTask:
    part: str
    path: str
    work: str
    units: Units


@dataclass(frozen=True)
class _HashResult(PhaseResult):
    rows: int
    units: int  # non-empty units hashed


def _hash_part(task: _HashTask) -> _HashResult:
    texts, langs = task.units.read(task.path)
    keys: list[str] = []
    rows: list[int] = []
    indexes: list[int] = []
    for row, (text, lang) in enumerate(zip(texts, langs, strict=True)):
        for index, key in enumerate(task.units.split(text, lang)[1]):
            if key:
                keys.append(key)
                rows.append(row)
                indexes.append(index)
    h1, h2 = text_hashes(pa.array(keys, pa.string()), "xxh3_128")
    pending = Commit()
    _hashes(task.work).write(task.part, pa.table({
        "h1": h1, "h2": h2, "row": np.array(rows, np.int64),
        "unit": np.array(indexes, np.int32)}), pending)
    pending.publish()
    return _HashResult(len(texts), len(keys))


@dataclass(frozen=True)
class _CountTask:
    bucket: int
    buckets: int
    work: str
    parts: tuple[str, ...]  # in the run's order: a part's number is its place here
    min_documents: int
    keep_first: bool


@dataclass(frozen=True)
class _CountResult(PhaseResult):
    distinct: int  # distinct unit hashes
    duplicated: int  # of them, those in at least min_documents documents
    dropped: int  # unit occurrences to drop


def _count_bucket(task: _CountTask) -> _CountResult:
    hashes = _hashes(task.work)
    tables = [hashes.read(name, task.bucket, task.buckets) for name in task.parts]
    table = pa.concat_tables([t.append_column("part", pa.array(np.full(len(t), p, np.int32)))
                              for p, t in enumerate(tables)])
    table = table.sort_by([("h1", "ascending"), ("h2", "ascending"), ("part", "ascending"),
                           ("row", "ascending"), ("unit", "ascending")])
    h1, h2 = table.column("h1").to_numpy(), table.column("h2").to_numpy()
    part, row = table.column("part").to_numpy(), table.column("row").to_numpy()
    n = len(h1)
    new_key = np.ones(n, dtype=bool)
    new_key[1:] = (h1[1:] != h1[:-1]) | (h2[1:] != h2[:-1])
    new_doc = new_key.copy()
    new_doc[1:] |= (part[1:] != part[:-1]) | (row[1:] != row[:-1])
    group = np.cumsum(new_key) - 1
    documents = np.bincount(group, weights=new_doc, minlength=int(new_key.sum()))
    duplicated = documents[group] >= task.min_documents
    if task.keep_first:
        first = np.flatnonzero(new_key)[group]  # the group's first occurrence: its first holder
        duplicated &= (part != part[first]) | (row != row[first])
    drop = np.flatnonzero(duplicated)
    pending = Commit()
    final = Path(task.work) / "decisions" / f"bucket-{task.bucket:05d}.parquet"
    pq.write_table(table.select(["part", "row", "unit"]).take(pa.array(drop))
                   .sort_by([("part", "ascending"), ("row", "ascending")]),
                   pending.temporary_for(final))
    pending.publish()
    return _CountResult(len(documents), int((documents >= task.min_documents).sum()), len(drop))


@dataclass(frozen=True)
class _RewriteTask:
    part: int
    name: str
    path: str
    work: str
    units: Units
    min_chars: int


@dataclass(frozen=True)
class _RewriteResult(PhaseResult):
    documents: int  # documents that lost units
    too_short: int
    units: int
    chars: int
    fractions: list[int]  # changed documents per FRACTION_BINS bin of removed characters


def _rewrite_part(task: _RewriteTask) -> _RewriteResult:
    decisions = ds.dataset(str(Path(task.work) / "decisions"), format="parquet").to_table(
        filter=ds.field("part") == task.part, columns=["row", "unit"])
    drops: dict[int, list[int]] = {}
    for row, unit in zip(decisions.column("row").to_pylist(),
                         decisions.column("unit").to_pylist(), strict=True):
        drops.setdefault(row, []).append(unit)
    texts, langs = task.units.read(task.path)
    out: dict[str, list[Any]] = {"row": [], TEXT: [], "units": [], "chars": [], "too_short": []}
    for row in sorted(drops):
        text = texts[row]
        spans, _ = task.units.split(text, langs[row])
        gone = line_units.dropped_pieces(drops[row], task.units.unit, task.units.span)
        new = line_units.rebuild(text, spans, gone)
        for name, value in (("row", row), (TEXT, new), ("units", len(gone)),
                            ("chars", len(text) - len(new)),
                            ("too_short", len(new.strip()) < task.min_chars)):
            out[name].append(value)
    fractions = np.array(out["chars"], np.float64) / np.maximum(
        [len(texts[r]) for r in out["row"]], 1)
    bins = np.searchsorted(FRACTION_BINS, fractions, side="left")
    pending = Commit()
    pq.write_table(pa.table({"row": pa.array(out["row"], pa.int64()),
                             TEXT: pa.array(out[TEXT], pa.string()),
                             "units": pa.array(out["units"], pa.int32()),
                             "chars": pa.array(out["chars"], pa.int64()),
                             "too_short": pa.array(out["too_short"], pa.bool_())}),
                   pending.temporary_for(Path(task.work) / "rewrites" / f"{task.name}.parquet"))
    pending.publish()
    return _RewriteResult(len(out["row"]), sum(out["too_short"]), sum(out["units"]),
                          sum(out["chars"]),
                          np.bincount(bins, minlength=len(FRACTION_BINS)).tolist())


@dataclass(frozen=True)
class Rewrites:
    """Decisions of one part: rewritten documents get their new text, those left too short go
    (their original text kept, or null when only ids are kept); every row gets
    ``dup_units_removed`` and ``dup_chars_removed``."""

    work: str
    parts: tuple[str, ...]
    keep_removed_text: bool

    def __call__(self, part: int, table: pa.Table) -> Decisions:
        done = pq.read_table(Path(self.work) / "rewrites" / f"{self.parts[part]}.parquet")
        n = table.num_rows
        rows = done.column("row").to_numpy()
        short = done.column("too_short").to_numpy(zero_copy_only=False)
        removed = np.zeros(n, bool)
        removed[rows[short]] = True
        rewritten = np.zeros(n, bool)
        rewritten[rows[~short]] = True
        units = np.zeros(n, np.int32)
        units[rows] = done.column("units").to_numpy()
        chars = np.zeros(n, np.int64)
        chars[rows] = done.column("chars").to_numpy()
        text = table.column(TEXT).combine_chunks()
        new_text = done.column(TEXT).filter(pa.array(~short)).cast(text.type).combine_chunks()
        text = pc.replace_with_mask(text, pa.array(rewritten), new_text)
        if not self.keep_removed_text and removed.any():
            text = pc.if_else(pa.array(removed), pa.scalar(None, text.type), text)
        return Decisions(removed, REASON_SHORT, columns={
            TEXT: text, "dup_units_removed": pa.array(units),
            "dup_chars_removed": pa.array(chars)})


class LineDedup(DatasetStage):
    """Remove lines, paragraphs or sentence spans found in at least ``min_documents`` documents
    from every document but the first holding them (in input order), or from all of them.
    Units are compared NFKC-normalised, case-folded, whitespace collapsed; empty units never
    count. A unit counts once per document: repeats inside one document alone are kept, and a
    duplicated unit goes with all its repeats from the documents that lose it (the first
    holder keeps them all). Documents left shorter than ``min_chars`` are removed."""

    type = "line_dedup"

    unit: Unit = Field("line", description="line: lines; paragraph: blocks between blank "
                       "lines; sentence_span: span_sentences consecutive sentences (split as "
                       "curator/stages/dedup/line_units.py says: Japanese by its punctuation, "
                       "without spaces; others at .!? before whitespace; at line breaks).")
    span_sentences: int = Field(3, gt=0, description="Sentences per span (C4's 3).")
    min_documents: int = Field(2, ge=2, description="A unit in at least this many documents "
                               "is a duplicate.")
    keep_first: bool = Field(True, description="The first document holding a duplicate unit "
                             "(smallest part, then row) keeps it; false: no document does.")
    min_chars: int = Field(50, ge=0, description="A document this stage shortened to fewer "
                           "characters (whitespace trimmed) is removed: a title or a line of "
                           "leftovers; length rules proper belong to the filters.")
    lang_field: str = Field("lang", description="Column with each document's language (splits "
                            "sentences as Japanese for ja); without it, kana and CJK ideographs "
                            "over 30% of the characters decide.")
    buckets: int | None = Field(None, gt=0, description="Shuffle buckets; default: 16 to one per "
                                "256 MB of parts, at most one per part.")

    def run_dataset(self, parts: list[Path], ctx: DatasetContext) -> DatasetResult:
        started = time.perf_counter()
        work = str(ctx.work_dir)
        has_lang = bool(parts) and self.lang_field in pq.read_schema(parts[0]).names
        units = Units(self.unit, self.span_sentences, self.lang_field if has_lang else None)
        buckets = self.buckets or default_buckets(parts)
        names = [p.stem for p in parts]
        hashed = ctx.run_phase("hash", _hash_part, [
            _HashTask(name, str(p), work, units) for name, p in zip(names, parts, strict=True)],
            names, _HashResult, reads=parts)
        counted = ctx.run_phase("count", _count_bucket, [
            _CountTask(b, buckets, work, tuple(names), self.min_documents, self.keep_first)
            for b in range(buckets)], [f"bucket-{b:05d}" for b in range(buckets)], _CountResult)
        rewritten = ctx.run_phase("rewrite", _rewrite_part, [
            _RewriteTask(i, name, str(p), work, units, self.min_chars)
            for i, (name, p) in enumerate(zip(names, parts, strict=True))], names,
            _RewriteResult)
        outputs, count = ctx.remove(parts, Rewrites(work, tuple(names),
                                                    ctx.rejected == "documents"))
        count.seconds = time.perf_counter() - started
        edges = ["0", *map(str, FRACTION_BINS)]
        count.facts["line_dedup"] = {
            "unit": self.unit, "units": sum(h.units for h in hashed),
            "distinct_units": sum(c.distinct for c in counted),
            "duplicated_units": sum(c.duplicated for c in counted),
            "units_removed": sum(r.units for r in rewritten),
            "chars_removed": sum(r.chars for r in rewritten),
            "documents_changed": sum(r.documents for r in rewritten),
            "documents_too_short": sum(r.too_short for r in rewritten),
            "removed_fraction": {f"({lo}, {hi}]": sum(r.fractions[k] for r in rewritten)
                                 for k, (lo, hi) in enumerate(itertools.pairwise(edges))}}
        return DatasetResult(outputs, count)
