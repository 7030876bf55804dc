"""The document browser's data layer: what each stage of a run removed or kept, read from the
run folder alone (``run.json``, manifests, Parquet files; plugin code is never imported).

Where a stage's documents are: removed ones in ``rejected/<stage>/``; those kept after a stage
that ends its segment in the parts the segment hands on (``_work/segment-NN/part-*``, a dataset
stage's ``out/``) or, for the last segment, in its writer's folder; those kept after a stage in the
middle of a segment are the segment's kept ones and the ones later stages of the segment removed.
Every file read lies inside the run folder (a link leading out is skipped, with a warning)."""

from __future__ import annotations

import datetime
import difflib
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from curator.batch import ID, REASON, SOURCE, TEXT
from curator.commit import DamagedRecord, read_json
from curator.pipeline import resolve_names
from curator.serve.runs import run_progress
from curator.store.doc_index import (
    URL,
    Location,
    index_built,
    inside,
    lookup,
    writer_folders,
)
from curator.store.run_dir import WORK, RunDir

MAX_LIMIT = 500
TEXT_CHARS = 2_000
#: Each text a diff compares is cut to this many characters.
DIFF_CHARS = 200_000
#: Changed blocks of lines up to this many characters (both sides) are diffed by character.
CHAR_DIFF = 2_000
LANG = "lang"
PARAMS = frozenset({"stage", "removed", "reason", "lang", "source", "id", "url", "q", "score",
                    "limit", "offset"})
#: Sent by a browser that authenticates in the address (``?token=T``); not a filter.
IGNORED = frozenset({"token"})


class UnknownStage(LookupError):
    """A stage the run's pipeline does not have."""


class UnknownScore(LookupError):
    """A score that is neither a filter's nor a column of the documents."""


# ---------------------------------------------------------------------------- the query
@dataclass
class DocumentQuery:
    """Which documents: removed by ``stage`` (every stage's when None) or kept after it (the
    run's final documents when None), with equality filters, a case-insensitive substring of
    the text (``q``) and score ranges (``scores``: name → (min, max), either bound None)."""

    stage: str | None = None
    removed: bool = False
    reason: str | None = None
    lang: str | None = None
    source: str | None = None
    id: str | None = None
    url: str | None = None
    q: str | None = None
    scores: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    limit: int = 50
    offset: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.limit <= MAX_LIMIT:
            raise ValueError(f"limit must be between 1 and {MAX_LIMIT}, not {self.limit}")
        if self.offset < 0:
            raise ValueError(f"offset must be 0 or more, not {self.offset}")
        if self.reason is not None and not self.removed:
            raise ValueError("reason filters removed documents: add removed=true")

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> DocumentQuery:
        """A query from a URL's parameters (``score`` may repeat: ``NAME:MIN:MAX``, either
        bound empty); ``ValueError`` with a one-line message for anything malformed."""
        values: dict[str, Any] = {}
        scores: dict[str, tuple[float | None, float | None]] = {}
        for key, value in params.items():
            if key in IGNORED:
                continue
            if key not in PARAMS:
                raise ValueError(f"unknown parameter {key!r} (known: {', '.join(sorted(PARAMS))})")
            if key == "score":
                name, bounds = _score(value)
                if name in scores:
                    raise ValueError(f"score {name!r} given twice")
                scores[name] = bounds
            elif key in values:
                raise ValueError(f"parameter {key!r} given twice")
            elif value != "":
                values[key] = value
        return cls(stage=values.get("stage"), removed=_flag(values.get("removed", "false")),
                   reason=values.get("reason"), lang=values.get("lang"),
                   source=values.get("source"), id=values.get("id"), url=values.get("url"),
                   q=values.get("q"), scores=scores,
                   limit=_integer("limit", values.get("limit", "50")),
                   offset=_integer("offset", values.get("offset", "0")))


def _flag(value: str) -> bool:
    if value.lower() in ("true", "1", "yes"):
        return True
    if value.lower() in ("false", "0", "no"):
        return False
    raise ValueError(f"removed must be true or false, not {value!r}")


def _integer(name: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, not {value!r}") from None


def _score(value: str) -> tuple[str, tuple[float | None, float | None]]:
    parts = value.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        raise ValueError(f"score must be NAME:MIN:MAX (either bound empty), not {value!r}")
    name, low, high = parts
    if not low and not high:
        raise ValueError(f"score {name!r} needs a minimum, a maximum or both")
    return name, (_bound(name, low), _bound(name, high))


def _bound(name: str, value: str) -> float | None:
    if not value:
        return None
    try:
        bound = float(value)
    except ValueError:
        raise ValueError(f"score {name!r}: {value!r} is not a number") from None
    if not math.isfinite(bound):
        raise ValueError(f"score {name!r}: {value!r} is not a finite number")
    return bound


# ---------------------------------------------------------------------------- the run's layout
@dataclass(frozen=True)
class StageInfo:
    """A stage of the run's pipeline and the segment it runs in (None: not known yet)."""

    name: str
    type: str
    segment: int | None
    kind: str  # "shard", "dataset" or "unknown"


@dataclass
class Layout:
    """What the browser needs of a run: its stages, their segments, its writers' folders."""

    run_dir: RunDir
    config: dict[str, Any]
    stages: list[StageInfo]
    specs: dict[str, dict[str, Any]]  # each stage's configuration, by name
    writers: dict[int, list[Path]]
    warnings: list[str] = field(default_factory=list)

    @property
    def root(self) -> Path:
        return self.run_dir.root

    def stage(self, name: str) -> StageInfo:
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise UnknownStage(f"no stage {name!r} in this run")

    def members(self, segment: int) -> list[StageInfo]:
        return [s for s in self.stages if s.segment == segment]

    def last_segment(self) -> int | None:
        """The last segment's index (None while some stage's segment is not known)."""
        known = [s.segment for s in self.stages]
        return None if None in known or not known else max(s for s in known if s is not None)

    def order(self, name: str) -> int:
        """A stage's place in the pipeline (stages no longer in it come last)."""
        return next((i for i, s in enumerate(self.stages) if s.name == name), len(self.stages))

    def files(self, folder: Path, pattern: str = "*.parquet") -> list[Path]:
        """A folder's files inside the run; those leading out are named in ``warnings``."""
        found = []
        for path in sorted(folder.glob(pattern)):
            if inside(self.root, path):
                found.append(path)
                continue
            warning = f"{self.relative(path)}: outside the run folder, skipped"
            if warning not in self.warnings:
                self.warnings.append(warning)
        return found

    def open(self, path: Path) -> pq.ParquetFile | None:
        """A Parquet file, or None (named in ``warnings``) when it cannot be read."""
        try:
            return pq.ParquetFile(path)
        except (OSError, pa.ArrowException) as err:
            self.warnings.append(f"{self.relative(path)}: not readable ({err})")
            return None

    def rows(self, paths: list[Path]) -> int:
        """The rows of Parquet files, from their footers."""
        return sum(p.metadata.num_rows for p in map(self.open, paths) if p is not None)

    def relative(self, path: Path) -> str:
        return str(path.relative_to(self.root)) if path.is_relative_to(self.root) else str(path)


def layout(run: Path) -> Layout:
    """The run's stages (names as the pipeline resolves them) and their segments: from the
    manifests each segment wrote, else from the recorded pipeline's plan where it can be built
    without importing plugin code."""
    run_dir = RunDir(run)
    config = run_dir.recorded_config()
    specs = config.get("stages", [])
    names = resolve_names([(s.get("name"), s["type"]) for s in specs])
    segments = run_dir.stage_segments()
    if any(name not in segments for name in names):
        segments = {**_planned_segments(run_dir, config), **segments}
    stages = [StageInfo(name, spec["type"], *segments.get(name, (None, "unknown")))
              for name, spec in zip(names, specs, strict=True)]
    return Layout(run_dir, config, stages, dict(zip(names, specs, strict=True)),
                  writer_folders(run_dir))


def _planned_segments(run_dir: RunDir, config: dict[str, Any]) -> dict[str, tuple[int, str]]:
    """Stage → (segment, kind) from the recorded pipeline's plan; none when building it would
    import plugin code (``imports``) or fails."""
    if config.get("imports"):
        return {}
    from curator.runtime.driver.recorded import recorded_pipeline

    try:
        plan = recorded_pipeline(run_dir).plan()
    except Exception:  # a pipeline this version cannot build: the manifests alone
        return {}
    return {name: (segment.index, segment.kind) for segment in plan.segments
            for name, _ in segment.stages}


# ---------------------------------------------------------------------------- where documents are
@dataclass(frozen=True)
class _Source:
    """A Parquet file of documents; ``removed_by``: the stage that removed them (None: kept)."""

    path: Path
    removed_by: str | None = None


def _rejected(lay: Layout, stage: str) -> list[Path]:
    return [p for folder in lay.run_dir.rejected_folders(stage) for p in lay.files(folder)]


def _removed_sources(lay: Layout, stage: str | None) -> list[_Source]:
    folders = [stage] if stage else sorted(
        (f.name for f in lay.run_dir.rejected_folders()), key=lay.order)
    return [_Source(p, name) for name in folders for p in _rejected(lay, name)]


def _kept_sources(lay: Layout, name: str) -> tuple[list[_Source], str | None]:
    """The files holding the documents kept after stage ``name``, or why they cannot be had."""
    stage = lay.stage(name)
    if stage.segment is None:
        return [], f"{name}: its segment is not known yet"
    members = [s.name for s in lay.members(stage.segment)]
    at = members.index(name)
    base, end, why = _segment_kept(lay, stage.segment, members)
    if why is not None:
        return [], why
    if at > end:  # after the writer: only if nothing after it removed documents
        removing = [t for t in members[end + 1:at + 1] if lay.rows(_rejected(lay, t))]
        if removing:
            return [], (f"documents after {members[end]} are not kept as Parquet "
                        f"({', '.join(removing)} removed some)")
        return base, None
    later = members[at + 1:end + 1]
    if lay.config.get("rejected", "ids") != "documents" and any(
            lay.rows(_rejected(lay, t)) for t in later):
        lay.warnings.append(f"documents {', '.join(later)} removed later are listed with their "
                            "ids and reasons; their text is kept for a 1 % sample only "
                            "(rejected: ids)")
    return base + [_Source(p) for t in later for p in _rejected(lay, t)], None


def _segment_kept(lay: Layout, segment: int, members: list[str]
                  ) -> tuple[list[_Source], int, str | None]:
    """The files of what ``segment`` kept, the position of the stage after which they hold it
    (its last stage; the writer's in the last segment), or why there are none."""
    work = lay.run_dir.work_dir(segment)
    if lay.stage(members[0]).kind == "dataset":
        folder, end = lay.run_dir.outputs_dir(work), 0
    elif segment != lay.last_segment():
        folder, end = work, len(members) - 1
    else:
        written = _writer_positions(lay, segment, members)
        if not written:
            return [], 0, "the last segment has no Parquet writer: its documents are not kept"
        end, folder = written[-1]
    if not folder.is_dir():
        return [], end, f"{lay.relative(folder)} is not there (trimmed, or not written yet)"
    pattern = "part-*.parquet" if folder == work else "*.parquet"
    return [_Source(p) for p in lay.files(folder, pattern)], end, None


def _writer_positions(lay: Layout, segment: int, members: list[str]) -> list[tuple[int, Path]]:
    """(position in the segment, folder) of each stage of ``segment`` whose Parquet folder the
    manifests name: ``<run>/<stage name>``, or the ``path`` its configuration gives."""
    folders = {f.resolve() for f in lay.writers.get(segment, [])}
    found = []
    for at, name in enumerate(members):
        path = lay.specs[name].get("path")
        for folder in (lay.root / name, Path(path) if isinstance(path, str) else None):
            if folder is not None and folder.resolve() in folders:
                found.append((at, folder))
                break
    return found


def _sources(lay: Layout, q: DocumentQuery) -> tuple[list[_Source], str | None]:
    if q.stage is not None:
        lay.stage(q.stage)
    if q.removed:
        return _removed_sources(lay, q.stage), None
    if not lay.stages:
        return [], "the run's pipeline has no stages"
    return _kept_sources(lay, q.stage or lay.stages[-1].name)


# ---------------------------------------------------------------------------- scores
def score_files(lay: Layout) -> dict[str, dict[str, Path]]:
    """Each filter's scores files (one per shard), by shard name, in pipeline order."""
    folders = sorted(lay.run_dir.scores_folders(), key=lambda f: lay.order(f.name))
    return {folder.name: {f.stem: f for f in lay.files(folder)} for folder in folders}


def score_columns(files: dict[str, dict[str, Path]]) -> dict[str, list[str]]:
    """Each filter's numeric score columns (from one of its scores files)."""
    found = {}
    for stage, by_part in files.items():
        if by_part:
            schema = pq.read_schema(next(iter(by_part.values())))
            found[stage] = [f.name for f in schema if f.name != ID and (
                pa.types.is_integer(f.type) or pa.types.is_floating(f.type))]
    return found


def part_files(by_part: dict[str, Path], part: str) -> list[Path]:
    """A filter's scores files for the shard of a file named ``part`` (a later segment's parts
    add ``-NNNN`` to the shard's name)."""
    pieces = part.split("-")
    return [by_part[name] for name in ("-".join(pieces[:n]) for n in range(len(pieces), 0, -1))
            if name in by_part]


class _Scores:
    """Score values joined by id: a filter's scores of the shard a document file came from."""

    def __init__(self, lay: Layout) -> None:
        self.files = score_files(lay)
        self.columns = score_columns(self.files)
        self.held: dict[tuple[str, str], pa.Table | None] = {}

    def stage_of(self, name: str) -> str | None:
        return next((stage for stage, cols in self.columns.items() if name in cols), None)

    def values(self, stage: str, name: str, part: str, ids: pa.Array) -> pa.Array:
        table = self._part(stage, part)
        if table is None:
            return pa.nulls(len(ids), pa.float64())
        found = pc.index_in(ids, value_set=table.column(ID).combine_chunks())
        return pc.take(table.column(name), found)

    def _part(self, stage: str, part: str) -> pa.Table | None:
        """A filter's scores of one shard (those of one shard are held at a time)."""
        if (stage, part) not in self.held:
            self.held = {k: v for k, v in self.held.items() if k[1] == part}
            tables = [pq.read_table(f, columns=[ID, *self.columns[stage]])
                      for f in part_files(self.files[stage], part)]
            self.held[stage, part] = pa.concat_tables(tables, promote_options="permissive") \
                if tables else None
        return self.held[stage, part]


# ---------------------------------------------------------------------------- the catalog
def stage_catalog(run: Path) -> list[dict[str, Any]]:
    """Per stage in pipeline order: name, type, segment, kind, how many it removed and why
    (``stats.json``; else counted in ``rejected/`` from Parquet footers, reasons unknown), whether
    the documents kept after it can be browsed (``kept_available``, ``kept_why``), whether it
    rewrote texts, and its score columns."""
    lay = layout(run)
    try:
        counted = {s["name"]: s for s in read_json(RunDir(run).stats_file).get("stages", [])}
    except (FileNotFoundError, DamagedRecord):
        counted = {}
    scores = score_columns(score_files(lay))
    rewritten = lay.run_dir.rewrites_folders()
    catalog = []
    for stage in lay.stages:
        entry = counted.get(stage.name)
        _, why = _kept_sources(lay, stage.name)
        catalog.append({
            "name": stage.name, "type": stage.type, "segment": stage.segment,
            "kind": stage.kind,
            "removed": entry["removed"] if entry else lay.rows(_rejected(lay, stage.name)),
            "reasons": entry.get("removed_by_reason") if entry else None,
            "kept_available": why is None, "kept_why": why,
            "rewrites": any(f.name == stage.name and lay.files(f) for f in rewritten),
            "score_columns": scores.get(stage.name, [])})
    return catalog


# ---------------------------------------------------------------------------- querying
def query_documents(run: Path, q: DocumentQuery) -> dict[str, Any]:
    """The documents ``q`` asks for, in file order, a row group at a time (the filter columns
    first, the text only where needed); stops at the ``offset + limit + 1``-th match (then
    ``matched`` is None). An id or URL is looked up in the run's index, not scanned.
    ``UnknownStage`` for a stage the run does not have, ``UnknownScore`` for a score no filter
    of it wrote."""
    lay = layout(run)
    sources, why = _sources(lay, q)
    answer: dict[str, Any] = {"documents": [], "matched": 0, "has_more": False,
                              "indexed": False, "available": why is None, "why": why}
    answer["warnings"] = lay.warnings
    if why is not None:
        answer["matched"] = None
        return answer
    scores = _Scores(lay)
    _check_scores(q, scores, sources)
    groups: Iterator[tuple[_Source, pq.ParquetFile, int, np.ndarray | None]]
    if q.id is not None or q.url is not None:
        located = lookup(lay.run_dir, q.id or q.url or "", "id" if q.id is not None else "url",
                         settled(lay.run_dir))
        answer["indexed"] = bool(located) and all(loc.via == "index" for loc in located)
        groups = _located_groups(lay, sources, located)
    else:
        groups = _all_groups(lay, sources)
    wanted, matched, done = q.offset + q.limit, 0, True
    for source, parquet, group, rows in groups:
        hits = _matches(parquet, group, rows, q, source, scores)
        window = hits[max(0, q.offset - matched):max(0, wanted - matched)]
        if len(window):
            answer["documents"] += _documents(lay, parquet, group, window, q, source, scores)
        matched += len(hits)
        if matched > wanted:
            done = False
            break
    answer.update(matched=matched if done else None, has_more=matched > wanted)
    return answer


def _check_scores(q: DocumentQuery, scores: _Scores, sources: list[_Source]) -> None:
    """``UnknownScore`` for a score that is neither a filter's nor a column of the documents."""
    if not q.scores:
        return
    names = set(pq.read_schema(sources[0].path).names) if sources else set()
    for name in q.scores:
        if scores.stage_of(name) is None and name not in names:
            known = sorted({c for cols in scores.columns.values() for c in cols})
            raise UnknownScore(f"no score {name!r} in this run (known: "
                               f"{', '.join(known) or 'none'})")


def _all_groups(lay: Layout, sources: list[_Source]
                ) -> Iterator[tuple[_Source, pq.ParquetFile, int, np.ndarray | None]]:
    for source in sources:
        parquet = lay.open(source.path)
        if parquet is None:
            continue
        for group in range(parquet.num_row_groups):
            yield source, parquet, group, None


def _located_groups(lay: Layout, sources: list[_Source], located: list[Location]
                    ) -> Iterator[tuple[_Source, pq.ParquetFile, int, np.ndarray | None]]:
    """The row groups (and rows) the index points at, in the query's files only."""
    for source in sources:
        hits = [loc for loc in located if loc.path == lay.relative(source.path)]
        if not hits:
            continue
        parquet = lay.open(source.path)
        if parquet is None:
            continue
        for group in sorted({loc.row_group for loc in hits}):
            yield source, parquet, group, np.array(
                sorted(loc.row for loc in hits if loc.row_group == group), np.int64)


def _matches(parquet: pq.ParquetFile, group: int, rows: np.ndarray | None, q: DocumentQuery,
             source: _Source, scores: _Scores) -> np.ndarray:
    """The rows of a row group that ``q`` matches (of ``rows`` alone when given): its filter
    columns read first, its text only if ``q.q`` asks and some row still matches."""
    names = parquet.schema_arrow.names
    equal = {c: v for c, v in ((ID, q.id), (URL, q.url), (REASON, q.reason), (LANG, q.lang),
                               (SOURCE, q.source)) if v is not None}
    if any(c not in names for c in equal):
        return np.array([], np.int64)
    table = parquet.read_row_group(group, columns=list(dict.fromkeys(
        [ID, *equal, *(n for n in q.scores if n in names)])))
    if rows is not None:
        table = table.take(pa.array(rows))
    conditions = [pc.equal(table.column(c), v) for c, v in equal.items()]
    for name, (low, high) in q.scores.items():
        values = _score_values(table, name, source, scores)
        conditions += [pc.greater_equal(values, low)] if low is not None else []
        conditions += [pc.less_equal(values, high)] if high is not None else []
    mask = _mask(conditions, table.num_rows)
    positions = np.flatnonzero(mask) if rows is None else rows[mask]
    if q.q and len(positions) and TEXT in names:
        text = parquet.read_row_group(group, columns=[TEXT]).column(TEXT).take(pa.array(positions))
        found = pc.fill_null(pc.match_substring(text, q.q, ignore_case=True), False)
        positions = positions[found.to_numpy(zero_copy_only=False)]
    elif q.q:
        positions = positions[:0]
    return positions


def _mask(conditions: list[pa.Array], n: int) -> np.ndarray:
    if not conditions:
        return np.ones(n, bool)
    both = reduce(pc.and_kleene, conditions)
    return np.asarray(pc.fill_null(both, False).to_numpy(zero_copy_only=False), bool)


def _score_values(table: pa.Table, name: str, source: _Source, scores: _Scores) -> pa.Array:
    if name in table.column_names:
        return table.column(name)
    stage = scores.stage_of(name)
    if stage is None:
        return pa.nulls(table.num_rows, pa.float64())
    return scores.values(stage, name, source.path.stem, table.column(ID).combine_chunks())


def _documents(lay: Layout, parquet: pq.ParquetFile, group: int, rows: np.ndarray,
               q: DocumentQuery, source: _Source, scores: _Scores) -> list[dict[str, Any]]:
    """The rows at ``rows`` of a row group as the browser shows them (text cut short)."""
    table = parquet.read_row_group(group).take(pa.array(rows))
    extra = {name: _score_values(table, name, source, scores).to_pylist()
             for name in q.scores if name not in table.column_names}
    known = {c for cols in scores.columns.values() for c in cols}
    found = []
    for i, row in enumerate(table.to_pylist()):
        doc = _shown(row, source, known)
        doc["scores"].update({name: values[i] for name, values in extra.items()})
        doc["file"] = lay.relative(source.path)
        found.append(doc)
    return found


def _shown(row: dict[str, Any], source: _Source, score_names: set[str],
           cut: int | None = TEXT_CHARS) -> dict[str, Any]:
    """A row as one document: its text (cut to ``cut`` characters), named columns, scores
    (columns that are some filter's scores) and other scalar columns."""
    text = row.pop(TEXT, None)
    reason = row.pop(REASON, None)
    doc = {"id": row.pop(ID, None), "stage": source.removed_by,
           "reason": reason if source.removed_by else None,
           "text": text[:cut] if text is not None and cut else text,
           "text_truncated": bool(text is not None and cut and len(text) > cut),
           "lang": row.pop(LANG, None), "source": row.pop(SOURCE, None), "url": row.pop(URL, None),
           "scores": {k: row.pop(k) for k in list(row) if k in score_names}}
    doc["columns"] = {k: _scalar(v) for k, v in row.items() if _is_scalar(v)}
    return doc


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool, datetime.date))


def _scalar(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime.date) else value


def settled(run_dir: RunDir) -> bool:
    """Whether the run's index covers its files as they are: its last run finished, and built
    the index, after it started (a run since would have rewritten ``progress.json``)."""
    progress = run_progress(run_dir.root) or {}
    try:
        started = float(progress["started"])
    except (KeyError, TypeError, ValueError):
        return False
    built = index_built(run_dir)
    return progress.get("state") == "finished" and built is not None and built >= started


# ---------------------------------------------------------------------------- one document
def get_document(run: Path, doc_id: str) -> dict[str, Any] | None:
    """One document, found through the run's index: its full text and columns, where it ended
    (kept in the output, removed by a stage and why, or only seen in a segment's parts), every
    filter's scores of it, and per rewriting stage its text before and after, with a diff."""
    lay = layout(run)
    found = [(loc, row) for loc in lookup(lay.run_dir, doc_id, "id", settled(lay.run_dir))
             if (row := _row(lay, loc, doc_id)) is not None]
    if not found:
        return None
    kinds = {loc.path: _kind_of(lay, loc.path) for loc, _ in found}
    removed = sorted((loc for loc, _ in found if kinds[loc.path][0] == "removed"),
                     key=lambda loc: lay.order(kinds[loc.path][1]))
    kept = [loc for loc, _ in found if kinds[loc.path][0] == "kept"]
    seen = sorted((loc for loc, _ in found if kinds[loc.path][0] == "seen"),
                  key=lambda loc: kinds[loc.path][1])
    end = (removed or kept or seen or [found[0][0]])[0]
    rows = {loc.path: row for loc, row in found}
    status, stage = kinds[end.path]
    source = _Source(lay.root / end.path, stage if status == "removed" else None)
    doc = _shown(dict(rows[end.path]), source, set(), cut=None)
    doc.pop("scores")
    doc.update(end={"status": status, "stage": source.removed_by, "reason": doc.pop("reason"),
                    "file": end.path},
               scores=_all_scores(lay, doc_id, {Path(loc.path).stem for loc, _ in found}),
               history=_history(lay, found, kinds, doc["text"]),
               files=[loc.path for loc, _ in found], via=sorted({loc.via for loc, _ in found}),
               warnings=lay.warnings)
    doc.pop("stage")
    return doc


def _row(lay: Layout, loc: Location, doc_id: str) -> dict[str, Any] | None:
    """The row a location points at, if it is inside the run and is document ``doc_id``."""
    path = lay.root / loc.path
    if not inside(lay.root, path):
        lay.warnings.append(f"{loc.path}: outside the run folder, skipped")
        return None
    parquet = lay.open(path)
    if parquet is None or loc.row_group >= parquet.num_row_groups:
        return None
    table = parquet.read_row_group(loc.row_group)
    if loc.row >= table.num_rows:
        return None
    row = table.slice(loc.row, 1).to_pylist()[0]
    return row if row.get(ID) == doc_id else None


def _kind_of(lay: Layout, path: str) -> tuple[str, Any]:
    """What a file holds: ("removed", stage), ("rewrite", stage), ("seen", segment order) for a
    segment's parts, or ("kept", None) for a writer's output."""
    parts = Path(path).parts
    file = lay.root / path
    if file.parent in lay.run_dir.rejected_folders():
        return "removed", parts[1]
    if file.parent in lay.run_dir.rewrites_folders():
        return "rewrite", parts[1]
    if parts[0] == WORK:
        return "seen", (-int(parts[1].removeprefix("segment-")), -len(parts))
    return "kept", None


def _all_scores(lay: Layout, doc_id: str, parts: set[str]) -> dict[str, dict[str, Any]]:
    """Every filter's scores of the document, from the scores files of its shard."""
    found: dict[str, dict[str, Any]] = {}
    for stage, by_part in score_files(lay).items():
        files = {f for part in parts for f in part_files(by_part, part)}
        for path in sorted(files):
            parquet = pq.ParquetFile(path)
            for group in range(parquet.num_row_groups):
                ids = parquet.read_row_group(group, columns=[ID]).column(ID)
                hits = np.flatnonzero(pc.fill_null(pc.equal(ids, doc_id), False).to_numpy(
                    zero_copy_only=False))
                if len(hits):
                    row = parquet.read_row_group(group).slice(int(hits[0]), 1).to_pylist()[0]
                    found[stage] = {k: _scalar(v) for k, v in row.items()
                                    if k != ID and _is_scalar(v)}
    return found


def _history(lay: Layout, found: list[tuple[Location, dict[str, Any]]],
             kinds: dict[str, tuple[str, Any]], final: str | None) -> list[dict[str, Any]]:
    """Per rewriting stage (pipeline order): the text before it, the text the next stage saw
    (the next rewrite's before, or the document's final text), and their diff."""
    before = sorted(((kinds[loc.path][1], row.get(TEXT)) for loc, row in found
                     if kinds[loc.path][0] == "rewrite"), key=lambda item: lay.order(item[0]))
    history = []
    for i, (stage, text) in enumerate(before):
        after = before[i + 1][1] if i + 1 < len(before) else final
        history.append({"stage": stage, "before": text, "after": after,
                        "diff": diff(text, after) if text is not None and after is not None
                        else None})
    return history


def diff(before: str, after: str) -> list[list[str]]:
    """``[[op, text], ...]`` (op "=", "-" or "+") turning ``before`` into ``after`` (each cut
    to ``DIFF_CHARS``): lines matched first by their text without line ending (difflib, no junk
    heuristic), then changed blocks by character where they are short (``CHAR_DIFF``
    characters) or change as many lines as they have."""
    a, b = (t[:DIFF_CHARS].splitlines(keepends=True) for t in (before, after))
    keys_a, keys_b = ([line.rstrip("\r\n") for line in lines] for lines in (a, b))
    out: list[list[str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, keys_a, keys_b,
                                                      autojunk=False).get_opcodes():
        if op in ("equal", "replace") and i2 - i1 == j2 - j1:
            for old, new in zip(a[i1:i2], b[j1:j2], strict=True):
                out += _line_diff(old, new)
        else:
            out += _char_diff("".join(a[i1:i2]), "".join(b[j1:j2]))
    return _merged(out)


def _line_diff(old: str, new: str) -> list[list[str]]:
    """One line's edits: its ending alone where the text is the same."""
    text = old.rstrip("\r\n")
    if old == new or text != new.rstrip("\r\n"):
        return _char_diff(old, new)
    return [[o, t] for o, t in (("=", text), ("-", old[len(text):]), ("+", new[len(text):])) if t]


def _char_diff(old: str, new: str) -> list[list[str]]:
    """Character edits from ``old`` to ``new``; the two whole when longer than ``CHAR_DIFF``."""
    if old == new:
        return [["=", old]] if old else []
    if len(old) + len(new) > CHAR_DIFF:
        return [[o, t] for o, t in (("-", old), ("+", new)) if t]
    out: list[list[str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new,
                                                      autojunk=False).get_opcodes():
        if op == "equal":
            out.append(["=", old[i1:i2]])
        else:
            out += [[o, t] for o, t in (("-", old[i1:i2]), ("+", new[j1:j2])) if t]
    return out


def _merged(ops: list[list[str]]) -> list[list[str]]:
    """Adjacent entries of one kind joined."""
    out: list[list[str]] = []
    for op, text in ops:
        if out and out[-1][0] == op:
            out[-1][1] += text
        else:
            out.append([op, text])
    return out
