"""The stage's restartable phases; each task commits its files before its marker is written.

  1. ``index``     one task:  task files → ``index/*.npy`` + ``index/items.parquet``
  2. ``match``     per part:  key occurrences → ``matches/part-N.arrow`` (row, entry, start,
                              end) and documents per entry → ``counts/part-N.arrow``
  3. ``frequency`` one task:  entries found in more than ``max_docs`` documents →
                              ``frequent.npy`` (ignored from here on)
  4. ``cut``       per part:  each contaminated document's cut → ``cuts/part-N.parquet``;
                              returns the part's report
  5. ``remove``    per part:  the runtime's removal phase applies the cuts (``Cuts``)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.feather as feather
import pyarrow.parquet as pq

from curator.batch import ID, TEXT
from curator.commit import Commit
from curator.stages.context import Decisions, PhaseResult
from curator.stages.decontaminate.cut import CutRules, plan_cut
from curator.stages.decontaminate.index import (
    NgramSizes,
    build_index,
    find_matches,
    load_index,
    text_units,
)
from curator.stages.decontaminate.ngrams import AUTO, CHAR, WORD
from curator.stages.decontaminate.tasks import Item, Task, task_items

REASON = "contaminated"
SPAN = pa.struct([("task", pa.string()), ("item", pa.string()), ("start", pa.int64()),
                  ("end", pa.int64())])
_MATCHES = pa.schema([("row", pa.int64()), ("entry", pa.int32()), ("start", pa.int64()),
                      ("end", pa.int64())])
_CUTS = pa.schema([("row", pa.int64()), ("dropped", pa.string()), ("text", pa.large_string()),
                   ("spans", pa.list_(SPAN))])


def _commit(writes: list[tuple[Path, Any]]) -> None:
    """Write each (final path, NumPy array or Arrow table) under a temporary name, then
    rename them all into place."""
    pending = Commit()
    for final, data in writes:
        temporary = pending.temporary_for(final)
        if isinstance(data, np.ndarray):
            with open(temporary, "wb") as f:
                np.save(f, data)
        elif final.suffix == ".parquet":
            pq.write_table(data, temporary)
        else:
            feather.write_feather(data, temporary, compression="uncompressed")
    pending.publish()


# ------------------------------------------------------------------------------------ 1
@dataclass(frozen=True)
class TaskFile:
    task: int  # position in IndexJob.tasks
    display: str  # as the user named it
    local: str  # its local copy


@dataclass(frozen=True)
class IndexJob:
    work: str
    tasks: tuple[Task, ...]
    files: tuple[TaskFile, ...]
    sizes: NgramSizes


@dataclass
class _Texts:
    """Every text of every item, with its item and whether it may be used whole."""

    texts: list[str] = field(default_factory=list)
    item: list[int] = field(default_factory=list)
    whole: list[bool] = field(default_factory=list)
    item_task: list[str] = field(default_factory=list)
    item_id: list[str] = field(default_factory=list)

    def add(self, task: str, item: Item) -> None:
        self.texts += item.texts + item.answers
        self.item += [len(self.item_id)] * (len(item.texts) + len(item.answers))
        self.whole += [True] * len(item.texts) + [False] * len(item.answers)
        self.item_task.append(task)
        self.item_id.append(item.id)


@dataclass(frozen=True)
class IndexResult(PhaseResult):
    entries: int
    ngrams: int
    whole_texts: int
    bytes: int
    seconds: float
    tasks: dict[str, dict[str, Any]]  # per task (``_task_figures``)


def build(job: IndexJob) -> IndexResult:
    """Read every task file, choose each task's whole-text minimum per mode, hash its texts,
    save the index and the item table."""
    started = time.perf_counter()
    files = {t.name: 0 for t in job.tasks}
    read = _Texts()
    for file in job.files:
        task = job.tasks[file.task]
        files[task.name] += 1
        for item in task_items(task, Path(file.local), file.display):
            read.add(task.name, item)
    item = np.array(read.item, np.int64)
    whole = np.array(read.whole, bool)
    text = pa.array(read.texts, pa.large_string())
    rows, modes, lengths = text_units(text, job.sizes)  # rows: the task text of each keyed one
    item_task = np.array(read.item_task, dtype=object)
    task_of_row = item_task[item[rows]] if len(rows) else np.empty(0, object)
    minima, least = task_minima(list(files), task_of_row, whole[rows], modes, lengths,
                                job.sizes)
    index, _ = build_index(text.take(pa.array(rows)), item[rows], least, modes, job.sizes)
    has_key = (lengths >= job.sizes.n()[modes]) | ((least > 0) & (lengths >= least))
    keyed = np.zeros(len(text), bool)
    np.logical_or.at(keyed, rows, has_key)
    folder = Path(job.work) / "index"
    items = pa.table({"task": pa.array(read.item_task, pa.string()),
                      "item": pa.array(read.item_id, pa.string())})
    _commit([*((folder / f"{name}.npy", array) for name, array in index.arrays().items()),
             (folder / "items.parquet", items)])
    return IndexResult(index.entries, len(index.long_keys), len(index.short_full), index.nbytes,
                       round(time.perf_counter() - started, 3),
                       _task_figures(files, item_task, item, whole, keyed, index.entry_item,
                                     minima))


_MODE_NAMES = {WORD: "words", CHAR: "chars"}


def task_minima(tasks: list[str], task_of_text: np.ndarray, whole: np.ndarray,
                modes: np.ndarray, lengths: np.ndarray, sizes: NgramSizes
                ) -> tuple[dict[str, dict[str, int]], np.ndarray]:
    """Each task's whole-text minimum per mode its texts use (from the lengths of its texts
    that may be used whole), and per text the fewest units at which it is used whole (0 for
    answers: never whole)."""
    least = np.zeros(len(lengths), np.int64)
    minima: dict[str, dict[str, int]] = {}
    for name in tasks:
        of_task = (task_of_text == name) & whole
        minima[name] = {}
        for mode in (WORD, CHAR):
            rows = of_task & (modes == mode)
            if rows.any():
                minimum = sizes.task_minimum(lengths[rows], mode)
                least[rows] = minimum
                minima[name][_MODE_NAMES[mode]] = minimum
    return minima, least


def _task_figures(files: dict[str, int], item_task: np.ndarray, text_item: np.ndarray,
                  whole: np.ndarray, keyed: np.ndarray, entry_item: np.ndarray,
                  minima: dict[str, dict[str, int]]) -> dict[str, dict[str, Any]]:
    """Per task: files; items, those checked (some text or answer gives a key) and those too
    short to check; texts used whole when short (prompts, joined items), those checked and
    those too short; answers (n-grams only) and those checked; index entries; the whole-text
    minimum per mode."""
    indexed = np.zeros(len(item_task), bool)
    indexed[text_item[keyed]] = True
    out = {}
    for name, count in files.items():
        of_task = item_task == name
        text_of_task = of_task[text_item] if len(text_item) else np.zeros(0, bool)
        texts, answers = text_of_task & whole, text_of_task & ~whole
        items = int(of_task.sum())
        checked = int((of_task & indexed).sum())
        out[name] = {"files": count, "items": items, "items_checked": checked,
                     "items_too_short": items - checked,
                     "texts": int(texts.sum()), "texts_checked": int((texts & keyed).sum()),
                     "texts_too_short": int((texts & ~keyed).sum()),
                     "answers": int(answers.sum()),
                     "answers_checked": int((answers & keyed).sum()),
                     "ngrams": int(of_task[entry_item].sum()),
                     "min_whole": minima.get(name, {})}
    return out


# ------------------------------------------------------------------------------------ 2
@dataclass(frozen=True)
class MatchJob:
    part: str  # its name: its matches are kept under it (reused while it is unchanged)
    path: str
    work: str
    sizes: NgramSizes
    lang_field: str
    char_languages: tuple[str, ...]
    batch_bytes: int


def document_modes(batch: pa.RecordBatch, lang_field: str,
                   char_languages: tuple[str, ...]) -> np.ndarray:
    """Per document: characters when its language is one of ``char_languages`` (the code
    before any ``-``/``_``, case ignored), words for another language, by script when unknown."""
    if lang_field not in batch.schema.names:
        return np.full(batch.num_rows, AUTO, np.int8)
    lang = pc.utf8_lower(batch.column(lang_field).cast(pa.string()))
    code = pc.replace_substring_regex(lang, r"[-_].*", "")
    modes = np.full(batch.num_rows, AUTO, np.int8)
    known = pc.fill_null(pc.not_equal(code, ""), False).to_numpy(zero_copy_only=False)
    char = pc.fill_null(pc.is_in(code, pa.array(char_languages)), False) \
        .to_numpy(zero_copy_only=False)
    modes[known] = WORD
    modes[char] = CHAR
    return modes


def _batches(path: str, columns: list[str], batch_bytes: int) -> Iterator[pa.RecordBatch]:
    parquet = pq.ParquetFile(path)
    meta = parquet.metadata
    size = sum(meta.row_group(g).total_byte_size for g in range(meta.num_row_groups))
    rows = max(1, batch_bytes * meta.num_rows // max(size, 1))
    yield from parquet.iter_batches(batch_size=rows, columns=columns)


@dataclass(frozen=True)
class MatchResult(PhaseResult):
    documents: int
    char_mode_documents: int
    occurrences: int


def match(job: MatchJob) -> MatchResult:
    """Every key occurrence in one part, and in how many of its documents each entry occurs."""
    loaded = load_index(str(Path(job.work) / "index"))
    names = pq.read_schema(job.path).names
    columns = [TEXT, *([job.lang_field] if job.lang_field in names else [])]
    found = [np.empty((0, 4), np.int64)]
    offset = char_docs = 0
    for batch in _batches(job.path, columns, job.batch_bytes):
        modes = document_modes(batch, job.lang_field, job.char_languages)
        hits, modes = find_matches(batch.column(TEXT), modes, job.sizes, loaded)
        hits[:, 0] += offset
        found.append(hits)
        offset += batch.num_rows
        char_docs += int((modes == CHAR).sum())
    hits = np.concatenate(found)
    pairs = np.unique(hits[:, :2], axis=0) if len(hits) else np.empty((0, 2), np.int64)
    entries, docs = np.unique(pairs[:, 1], return_counts=True)
    work = Path(job.work)
    key = f"{job.part}.arrow"
    _commit([(work / "matches" / key, pa.table(
                 [hits[:, 0], hits[:, 1].astype(np.int32), hits[:, 2], hits[:, 3]],
                 schema=_MATCHES)),
             (work / "counts" / key, pa.table({"entry": entries.astype(np.int32),
                                               "docs": docs.astype(np.int64)}))])
    return MatchResult(offset, char_docs, len(hits))


# ------------------------------------------------------------------------------------ 3
@dataclass(frozen=True)
class FrequencyJob:
    work: str
    parts: tuple[str, ...]
    entries: int
    max_docs: int


@dataclass(frozen=True)
class FrequencyResult(PhaseResult):
    ngrams_found: int
    ngrams_ignored_frequent: int
    most_documents: int


def frequency(job: FrequencyJob) -> FrequencyResult:
    """Entries found in more than ``max_docs`` documents of the dataset."""
    work = Path(job.work)
    total = np.zeros(job.entries, np.int64)
    for part in job.parts:
        counts = feather.read_table(work / "counts" / f"{part}.arrow")
        np.add.at(total, counts.column("entry").to_numpy(), counts.column("docs").to_numpy())
    frequent = np.flatnonzero(total > job.max_docs).astype(np.int32)
    _commit([(work / "frequent.npy", frequent)])
    return FrequencyResult(int((total > 0).sum()), len(frequent),
                           int(total.max()) if len(total) else 0)


# ------------------------------------------------------------------------------------ 4
@dataclass(frozen=True)
class CutJob:
    part: str
    path: str
    work: str
    rules: CutRules
    examples: int


def _spans(starts: np.ndarray, ends: np.ndarray, items: np.ndarray) -> list[tuple[int, int,
                                                                                  int]]:
    """Matched n-grams (sorted by start, then item) merged where they overlap or touch, each
    span named by the item of its first n-gram."""
    spans: list[list[int]] = []
    for start, end, item in zip(starts.tolist(), ends.tolist(), items.tolist(), strict=True):
        if spans and start <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([start, end, item])
    return [(s, e, i) for s, e, i in spans]


def _empty_report() -> dict:
    return {"documents_cut": 0, "documents_removed": 0, "removed_split_too_often": 0,
            "spans": 0, "chars_removed": 0, "tasks": {}}


@dataclass(frozen=True)
class CutResult(PhaseResult):
    """One part's report: its documents cut and removed, and per task its documents, spans and
    first examples."""

    documents_cut: int
    documents_removed: int
    removed_split_too_often: int
    spans: int
    chars_removed: int
    tasks: dict[str, dict[str, Any]]


def cut(job: CutJob) -> CutResult:
    """Cut every contaminated document of one part; report per task."""
    work = Path(job.work)
    matches = feather.read_table(work / "matches" / f"{job.part}.arrow")
    entries = matches.column("entry").to_numpy()
    keep = np.flatnonzero(~np.isin(entries, np.load(work / "frequent.npy")))
    report = _empty_report()
    records: list[dict[str, Any]] = []
    if len(keep):
        loaded = load_index(str(work / "index"))
        items = pq.read_table(work / "index" / "items.parquet")
        task_of, id_of = items.column("task").to_pylist(), items.column("item").to_pylist()
        rows = matches.column("row").to_numpy()[keep]
        starts = matches.column("start").to_numpy()[keep]
        ends = matches.column("end").to_numpy()[keep]
        item = np.asarray(loaded.index.entry_item)[entries[keep]]
        order = np.lexsort((ends, item, starts, rows))
        rows, starts, ends, item = rows[order], starts[order], ends[order], item[order]
        doc_rows, first = np.unique(rows, return_index=True)
        bounds = np.append(first, len(rows))
        docs = pq.read_table(job.path, columns=[ID, TEXT]).take(pa.array(doc_rows))
        for k, (row, doc_id, text) in enumerate(zip(doc_rows.tolist(),
                                                    docs.column(ID).to_pylist(),
                                                    docs.column(TEXT).to_pylist(), strict=True)):
            lo, hi = bounds[k], bounds[k + 1]
            spans = _spans(starts[lo:hi], ends[lo:hi], item[lo:hi])
            plan = plan_cut([(s, e) for s, e, _ in spans], len(text), job.rules)
            kept = plan.text(text, job.rules.separator) if plan.dropped is None else None
            records.append({"row": row, "dropped": plan.dropped, "text": kept, "spans": [
                {"task": task_of[i], "item": id_of[i], "start": s, "end": e}
                for s, e, i in spans]})
            _count(report, doc_id, text, spans, plan.dropped, kept, task_of, id_of,
                   job.examples)
    _commit([(work / "cuts" / f"{job.part}.parquet",
              pa.Table.from_pylist(records, schema=_CUTS))])
    return CutResult(**report)


def _count(report: dict, doc_id: str, text: str, spans: list[tuple[int, int, int]],
           dropped: str | None, kept: str | None, task_of: list[str], id_of: list[str],
           examples: int) -> None:
    report["documents_removed" if dropped else "documents_cut"] += 1
    report["removed_split_too_often"] += dropped == "split_too_often"
    report["spans"] += len(spans)
    report["chars_removed"] += len(text) - len(kept or "")
    seen = set()
    for start, end, item in spans:
        entry = report["tasks"].setdefault(task_of[item], {"documents": 0, "spans": 0,
                                                           "examples": []})
        entry["spans"] += 1
        if task_of[item] not in seen:
            seen.add(task_of[item])
            entry["documents"] += 1
            if len(entry["examples"]) < examples:
                entry["examples"].append({"id": doc_id, "item": id_of[item],
                                          "text": text[start:end][:300]})


# ------------------------------------------------------------------------------------ 5
@dataclass(frozen=True)
class Cuts:
    """Decisions of one part: cut documents get their new text, dropped ones go (reason
    ``contaminated``, ``removed_because``); every document gets ``contamination`` (its
    matched spans, null when clean). ``keep_removed_text``: False when only ids are kept."""

    work: str
    keep_removed_text: bool
    parts: tuple[str, ...]  # the parts' names, in the run's order

    def __call__(self, part: int, table: pa.Table) -> Decisions:
        cuts = pq.read_table(Path(self.work) / "cuts" / f"{self.parts[part]}.parquet")
        n = table.num_rows
        rows = cuts.column("row").to_numpy()
        dropped = cuts.column("dropped").is_valid().to_numpy(zero_copy_only=False)
        removed = np.zeros(n, bool)
        removed[rows[dropped]] = True
        rewritten = np.zeros(n, bool)
        rewritten[rows[~dropped]] = True
        text = table.column(TEXT).combine_chunks()
        new_text = cuts.column("text").filter(pa.array(~dropped)).cast(text.type)
        text = pc.replace_with_mask(text, pa.array(rewritten), new_text.combine_chunks())
        if not self.keep_removed_text and removed.any():
            text = pc.if_else(pa.array(removed), pa.scalar(None, text.type), text)
        where = np.full(n, -1, np.int64)
        where[rows] = np.arange(len(rows))
        spans = cuts.column("spans").combine_chunks().take(
            pa.array(where, mask=where < 0))
        because = cuts.column("dropped").filter(pa.array(dropped))
        return Decisions(removed, REASON, columns={TEXT: text, "contamination": spans},
                         removed_columns={"removed_because": because})
