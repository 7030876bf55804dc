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
                             ``rewrites/<part>.arrow`` (row, text, units, chars, too_short)
  4. ``remove``  per part:   the shared removal: rewritten text and ``dup_units_removed``,
                             ``dup_chars_removed`` on every row; documents left shorter than
                             ``min_chars`` go (reason ``line_dedup_too_short``)

Units are cut, normalised, hashed and rebuilt by numba kernels over the Arrow buffers
(``curator.kernels.line_units``, equal to ``line_units``' Python definition, which keys the few
units the kernel flags).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.feather as feather
import pyarrow.parquet as pq
import xxhash
from pydantic import Field

from curator.batch import TEXT
from curator.commit import Commit
from curator.io.parquet import read_part
from curator.io.shuffle import ShuffleDir
from curator.kernels.doc_hash import SECRET64, xxh3_128_kernel
from curator.kernels.line_units import (
    LINE,
    PARAGRAPH,
    SENTENCE,
    japanese_by_script,
    key_tables,
    piece_bound,
    rebuild_kernel,
    unit_keys_kernel,
)
from curator.kernels.shingles import StringBuffers, string_buffers
from curator.stages.base import DatasetResult, DatasetStage
from curator.stages.context import DatasetContext, Decisions, PhaseResult
from curator.stages.dedup import line_units
from curator.stages.dedup.buckets import default_buckets
from curator.stages.dedup.line_units import Unit

REASON_SHORT = "line_dedup_too_short"
#: Unit occurrences per shuffle bucket by default: 8 MB of hash rows, so that a count task's
#: memory stays flat as the corpus grows (the bucket count grows instead).
UNITS_PER_BUCKET = 1 << 18
#: Rows per row group of a bucket's decisions, sorted by part: a rewrite task reads the row
#: groups of its own part only (their statistics), so its memory does not grow with the corpus.
DECISION_ROWS = 8192
#: Upper bounds of the removed-character fraction of a changed document (stats.json).
FRACTION_BINS = (0.1, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class Units:
    """How documents are cut into units."""

    unit: Unit
    span: int
    lang_field: str | None  # the language column, where the dataset has it

    @property
    def code(self) -> int:
        return {"line": LINE, "paragraph": PARAGRAPH, "sentence_span": SENTENCE}[self.unit]

    def read(self, path: str) -> tuple[pa.ChunkedArray, StringBuffers, np.ndarray]:
        """A part's texts, their buffers, and which documents split sentences as Japanese
        (``line_units.is_japanese``: the language column where it has a value, else the
        script; all False unless the unit is a sentence span)."""
        table = read_part(path, [TEXT, *([self.lang_field] if self.lang_field else [])])
        text = table.column(TEXT)
        buf = string_buffers(text)
        japanese = np.zeros(len(text), bool)
        if self.unit != "sentence_span":
            return text, buf, japanese
        langs = (table.column(self.lang_field).to_pylist() if self.lang_field
                 else [None] * len(text))
        for row, lang in enumerate(langs):
            japanese[row] = bool(lang) and line_units.is_japanese("", lang)
        rows = np.flatnonzero([not lang for lang in langs])
        japanese[rows] = japanese_by_script(buf.data, buf.starts, buf.ends, rows,
                                            line_units.CJK_SHARE)
        return text, buf, japanese


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
    text, buf, japanese = task.units.read(task.path)
    rows, indexes, h1, h2 = unit_hashes(buf, task.units, japanese)
    pending = Commit()
    _hashes(task.work).write(task.part, pa.table({
        "h1": h1, "h2": h2, "row": rows, "unit": indexes}), pending)
    pending.publish()
    return _HashResult(len(text), len(rows))


def unit_hashes(buf: StringBuffers, units: Units, japanese: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(row, unit index, hash high, low) of every non-empty unit. A line's or paragraph's hash
    is the XXH3-128 of its key; a sentence span's the XXH3-128 of its sentences' key digests
    (big-endian, in order), so that each sentence is hashed once, not once per span holding
    it. Keys are written and hashed by the numba kernels; a unit the kernel flags (a
    character that may compose with its neighbours) is keyed in Python by ``line_units``."""
    longest = int((buf.ends - buf.starts).max(initial=0))
    rows, indexes, first, flagged, unit_starts, unit_ends, keys, starts, ends = (
        unit_keys_kernel(buf.data, buf.starts, buf.ends, units.code, units.span, japanese,
                         *key_tables(), longest,
                         piece_bound(buf.data, len(buf.starts), units.code)))
    width = units.span if units.unit == "sentence_span" else 1
    high, low = np.empty(len(starts), np.uint64), np.empty(len(starts), np.uint64)
    xxh3_128_kernel(keys, starts, ends, SECRET64, high, low)
    digests = np.stack([high, low], axis=1).astype(">u8").view(np.uint8).reshape(-1, 16)
    for m in np.flatnonzero(flagged):  # the unit's keys in Python, then their digests
        raw = bytes(buf.data[unit_starts[m]:unit_ends[m]]).decode()
        spans = line_units.pieces(raw, units.unit, bool(japanese[rows[m]]))
        own = [line_units.normalise(raw[a:b]) for a, b in spans][:width]
        if units.unit != "sentence_span":
            own = [line_units.normalise(raw)]
        for k, key in enumerate(own):
            digests[first[m] + k] = np.frombuffer(xxhash.xxh3_128_digest(key.encode()),
                                                  np.uint8)
    if width == 1:
        pairs = digests.view(">u8").reshape(-1, 2)[first].astype(np.uint64)
        h1, h2 = pairs[:, 0].copy(), pairs[:, 1].copy()
    else:
        windows = digests[first[:, None] + np.arange(width)].reshape(-1)
        bounds = np.arange(len(first) + 1, dtype=np.int64) * 16 * width
        h1, h2 = np.empty(len(first), np.uint64), np.empty(len(first), np.uint64)
        xxh3_128_kernel(windows, bounds[:-1], bounds[1:], SECRET64, h1, h2)
    empty = np.array([], np.int64)
    if width == 1 and flagged.any():  # only whitespace once normalised: never a duplicate
        gone = digests.view(">u8").reshape(-1, 2)[first[flagged]]
        nothing = np.frombuffer(xxhash.xxh3_128_digest(b""), ">u8")
        empty = np.flatnonzero(flagged)[(gone == nothing).all(axis=1)]
    if len(empty):
        keep = np.ones(len(rows), bool)
        keep[empty] = False
        rows, indexes, h1, h2 = rows[keep], indexes[keep], h1[keep], h2[keep]
    return rows, indexes, h1, h2


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
                   pending.temporary_for(final), row_group_size=DECISION_ROWS)
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
    buckets: int


@dataclass(frozen=True)
class _RewriteResult(PhaseResult):
    documents: int  # documents that lost units
    too_short: int
    units: int
    chars: int
    fractions: list[int]  # changed documents per FRACTION_BINS bin of removed characters


def _rewritten(work: str, part: str) -> Path:
    """A part's rewritten documents (Arrow IPC, uncompressed: a transient file read once)."""
    return Path(work) / "rewrites" / f"{part}.arrow"


def _rewrite_part(task: _RewriteTask) -> _RewriteResult:
    folder = Path(task.work) / "decisions"
    decisions = ds.dataset([str(folder / f"bucket-{b:05d}.parquet")  # this run's buckets only
                            for b in range(task.buckets)], format="parquet").to_table(
        filter=ds.field("part") == task.part, columns=["row", "unit"]).sort_by(
        [("row", "ascending"), ("unit", "ascending")])
    rows, starts = np.unique(decisions.column("row").to_numpy(), return_index=True)
    units = decisions.column("unit").to_numpy().astype(np.int64)
    text, buf, japanese = task.units.read(task.path)
    lengths = pc.utf8_length(text.take(pa.array(rows, pa.int64()))).to_numpy(
        zero_copy_only=False).astype(np.int64)
    data, offsets, removed_units, chars, stripped = rebuild_kernel(
        buf.data, buf.starts, buf.ends, task.units.code, task.units.span, japanese[rows],
        rows.astype(np.int64), lengths, np.append(starts, len(units)).astype(np.int64), units,
        int((buf.ends - buf.starts).max(initial=0)))
    new = pa.LargeStringArray.from_buffers(len(rows), pa.py_buffer(offsets), pa.py_buffer(data))
    too_short = stripped < task.min_chars
    bins = np.searchsorted(FRACTION_BINS, chars / np.maximum(lengths, 1), side="left")
    pending = Commit()
    feather.write_feather(pa.table({"row": pa.array(rows, pa.int64()), TEXT: new,
                                    "units": pa.array(removed_units, pa.int32()),
                                    "chars": pa.array(chars, pa.int64()),
                                    "too_short": pa.array(too_short, pa.bool_())}),
                          pending.temporary_for(_rewritten(task.work, task.name)),
                          compression="uncompressed")
    pending.publish()
    return _RewriteResult(len(rows), int(too_short.sum()), int(removed_units.sum()),
                          int(chars.sum()),
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
        done = feather.read_table(_rewritten(self.work, self.parts[part]), memory_map=True)
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
    buckets: int | None = Field(None, gt=0, description="Shuffle buckets; default: one per "
                                f"{UNITS_PER_BUCKET:,} units hashed (a count task's rows), at "
                                "least the other dedup stages' count (16 to one per 256 MB of "
                                "parts, at most one per part).")

    def warm_up(self) -> None:
        """The kernels compiled or loaded and the character table built before the first
        tasks."""
        units = Units(self.unit, self.span_sentences, None)
        buf = string_buffers(pa.array(["Warm up. The KERNELS\r\n\n\u00c5ngstr\u00f6m. Now.",
                                       ""], pa.large_string()))
        japanese = np.zeros(2, bool)
        unit_hashes(buf, units, japanese)
        rebuild_kernel(buf.data, buf.starts, buf.ends, units.code, units.span, japanese,
                       np.array([0], np.int64), np.array([40], np.int64),
                       np.array([0, 1], np.int64), np.array([0], np.int64), 40)
        japanese_by_script(buf.data, buf.starts, buf.ends, np.array([0]), line_units.CJK_SHARE)

    def run_dataset(self, parts: list[Path], ctx: DatasetContext) -> DatasetResult:
        started = time.perf_counter()
        work = str(ctx.work_dir)
        has_lang = bool(parts) and self.lang_field in pq.read_schema(parts[0]).names
        units = Units(self.unit, self.span_sentences, self.lang_field if has_lang else None)
        names = [p.stem for p in parts]
        hashed = ctx.run_phase("hash", _hash_part, [
            _HashTask(name, str(p), work, units) for name, p in zip(names, parts, strict=True)],
            names, _HashResult, reads=parts)
        buckets = self.buckets or max(default_buckets(parts),
                                      -(-sum(h.units for h in hashed) // UNITS_PER_BUCKET))
        counted = ctx.run_phase("count", _count_bucket, [
            _CountTask(b, buckets, work, tuple(names), self.min_documents, self.keep_first)
            for b in range(buckets)], [f"bucket-{b:05d}" for b in range(buckets)], _CountResult)
        rewritten = ctx.run_phase("rewrite", _rewrite_part, [
            _RewriteTask(i, name, str(p), work, units, self.min_chars, buckets)
            for i, (name, p) in enumerate(zip(names, parts, strict=True))], names,
            _RewriteResult)
        outputs, count = ctx.remove(parts, Rewrites(work, tuple(names),
                                                    ctx.rejected == "documents"))
        count.seconds = time.perf_counter() - started
        edges = ["0", *map(str, FRACTION_BINS)]
        count.facts["line_dedup"] = {
            "unit": self.unit, "buckets": buckets, "units": sum(h.units for h in hashed),
            "distinct_units": sum(c.distinct for c in counted),
            "duplicated_units": sum(c.duplicated for c in counted),
            "units_removed": sum(r.units for r in rewritten),
            "chars_removed": sum(r.chars for r in rewritten),
            "documents_changed": sum(r.documents for r in rewritten),
            "documents_too_short": sum(r.too_short for r in rewritten),
            "removed_fraction": {f"({lo}, {hi}]": sum(r.fractions[k] for r in rewritten)
                                 for k, (lo, hi) in enumerate(itertools.pairwise(edges))}}
        return DatasetResult(outputs, count)
