"""Quality buckets: each score column's percentiles over the dataset turned into an integer
bucket per document, the ensemble bucket (their maximum), a quality level, and optionally only
the top fraction kept (Nemotron-CC's bucketing, DCLM's top 10 %).

Phases (each restartable):
  1. ``scores``    per part: each document's scores, weight (UTF-8 bytes of its text, or 1) and
                             group (the ``by`` column) → ``scores/<part>.arrow`` (reused for
                             unchanged parts when inputs are added)
  2. ``cutpoints`` one task: per column and group, the weighted percentiles of every part's
                             scores, exact (sorted; integer weights, so no rounding and no
                             dependence on the order of parts) → ``cutpoints.json``; skipped
                             when ``cutpoints_from`` names a file
  3. ``remove``    per part: the runtime's removal phase: bucket columns on every row, documents
                             under the top fraction removed (reason ``quality_top_fraction``)

The rule, as NeMo Curator's Nemotron-CC recipe computes it (inverted CDF): the cut point at
percentile p is the smallest score s whose cumulative weight share (scores sorted, equal scores
together) reaches p %; a document's bucket is the number of cut points at or below its score, so
a score equal to a cut point goes up, and equal scores always share a bucket. Phase 2 holds the
dataset's scores and weights in one process: 8 bytes per document and score column, 8 for its
weight, and its group.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.feather as feather
import pyarrow.parquet as pq
from pydantic import Field, field_validator, model_validator

from curator.batch import TEXT
from curator.commit import Commit
from curator.io.parquet import read_part
from curator.stages.base import DatasetResult, DatasetStage
from curator.stages.context import DatasetContext, Decisions, PhaseResult

REASON_TOP = "quality_top_fraction"
ENSEMBLE = "quality_bucket"
LEVEL = "quality"
ALL = ""  # the group of every document when there is no ``by`` column
#: Quality levels by default: the lowest ensemble bucket of each, five levels of four buckets.
DEFAULT_LEVELS = {"low": 0, "medium_low": 4, "medium": 8, "medium_high": 12, "high": 16}


def cut_points(scores: np.ndarray, weights: np.ndarray, percentiles: np.ndarray) -> list[float]:
    """The weighted inverted-CDF percentiles of ``scores`` (NaN left out; integer
    ``weights``): for each p, the smallest score whose cumulative weight reaches p % of the
    total. Empty input: no cut points."""
    keep = ~np.isnan(scores)
    scores, weights = scores[keep], weights[keep]
    if not len(scores):
        return []
    order = np.argsort(scores, kind="stable")
    ordered = scores[order]
    cumulative = np.cumsum(weights[order].astype(np.int64))
    total = int(cumulative[-1])
    if total == 0:
        return []
    # cumulative / total >= p / 100, in exact integer arithmetic (p in hundredths of a percent)
    targets = np.rint(np.asarray(percentiles, np.float64) * 100).astype(np.int64) * total
    found = np.searchsorted(cumulative * 10_000, targets, side="left")
    return [float(ordered[min(i, len(ordered) - 1)]) for i in found]


def bucket_of(scores: np.ndarray, points: list[float]) -> np.ndarray:
    """Each score's bucket: how many cut points are at or below it (-1 for NaN)."""
    buckets = np.searchsorted(np.asarray(points, np.float64), scores, side="right")
    return np.where(np.isnan(scores), -1, buckets).astype(np.int16)


@dataclass(frozen=True)
class Spec:
    """What the phases need of the stage's configuration."""

    columns: tuple[str, ...]
    by: str | None
    weight: Literal["bytes", "documents"]


def _scores(table: pa.Table, column: str) -> np.ndarray:
    """A score column as float64, NaN where missing."""
    values = table.column(column).cast(pa.float64()).fill_null(float("nan"))
    return values.to_numpy(zero_copy_only=False).astype(np.float64)


def _groups(table: pa.Table, by: str | None) -> list[str]:
    if by is None:
        return [ALL] * table.num_rows
    return [ALL if v is None else str(v) for v in table.column(by).to_pylist()]


@dataclass(frozen=True)
class _ScoreTask:
    part: str
    path: str
    work: str
    spec: Spec


@dataclass(frozen=True)
class _ScoreResult(PhaseResult):
    documents: int
    missing: list[int]  # per column: documents without a score
    unscored: int  # documents without any score


def _score_part(task: _ScoreTask) -> _ScoreResult:
    spec = task.spec
    wanted = [*spec.columns, *([spec.by] if spec.by else []),
              *([TEXT] if spec.weight == "bytes" else [])]
    table = read_part(task.path, wanted)
    if spec.weight == "bytes":
        weights = pc.binary_length(table.column(TEXT).cast(pa.large_binary())).fill_null(0)
    else:
        weights = pa.array(np.ones(table.num_rows, np.int64))
    out = {f"s{k}": _scores(table, c) for k, c in enumerate(spec.columns)}
    out["weight"] = np.asarray(weights.to_numpy(zero_copy_only=False), np.int64)
    out["group"] = pa.array(_groups(table, spec.by), pa.string())
    pending = Commit()
    final = Path(task.work) / "scores" / f"{task.part}.arrow"
    feather.write_feather(pa.table(out), pending.temporary_for(final), compression="uncompressed")
    pending.publish()
    missing = np.column_stack([np.isnan(out[f"s{k}"]) for k in range(len(spec.columns))])
    return _ScoreResult(table.num_rows, missing.sum(axis=0).astype(int).tolist(),
                        int(missing.all(axis=1).sum()))


@dataclass(frozen=True)
class _CutTask:
    work: str
    parts: tuple[str, ...]
    spec: Spec
    buckets: int
    top_fraction: float | None


@dataclass(frozen=True)
class _CutResult(PhaseResult):
    cutpoints: dict[str, dict[str, list[float]]]  # column -> group -> cut points
    top: dict[str, dict[str, list[float]]]  # column -> group -> [the top fraction's threshold]


def _cut(task: _CutTask) -> _CutResult:
    """Every column's cut points per group (and the top fraction's threshold)."""
    tables = [feather.read_table(Path(task.work) / "scores" / f"{p}.arrow") for p in task.parts]
    table = pa.concat_tables(tables) if tables else pa.table({})
    percentiles = np.arange(1, task.buckets) * (100 / task.buckets)
    cutpoints: dict[str, dict[str, list[float]]] = {c: {} for c in task.spec.columns}
    top: dict[str, dict[str, list[float]]] = {c: {} for c in task.spec.columns}
    if not table.num_rows:
        return _CutResult(cutpoints, top)
    groups = table.column("group")
    weights = table.column("weight").to_numpy()
    for name in sorted(pc.unique(groups).to_pylist()):
        rows = pc.equal(groups, name).to_numpy(zero_copy_only=False)
        for k, column in enumerate(task.spec.columns):
            scores = table.column(f"s{k}").to_numpy()[rows]
            cutpoints[column][name] = cut_points(scores, weights[rows], percentiles)
            if task.top_fraction is not None:
                top[column][name] = cut_points(scores, weights[rows],
                                               np.array([100 * (1 - task.top_fraction)]))
    return _CutResult(cutpoints, top)


@dataclass(frozen=True)
class Assign:
    """One part's buckets: ``<column>_bucket`` per score column, the ensemble bucket (the
    maximum), the quality level; documents none of whose scores reaches its column's top
    threshold removed (when a top fraction is set)."""

    spec: Spec
    cutpoints: dict[str, dict[str, list[float]]]
    top: dict[str, dict[str, list[float]]]
    levels: tuple[tuple[str, int], ...]  # (name, lowest ensemble bucket), ascending

    def __call__(self, part: int, table: pa.Table) -> Decisions:
        groups = np.array(_groups(table, self.spec.by), dtype=object)
        n = table.num_rows
        columns: dict[str, pa.Array] = {}
        ensemble = np.full(n, -1, np.int16)
        kept = np.zeros(n, bool)
        scored = np.zeros(n, bool)
        for column in self.spec.columns:
            scores = _scores(table, column)
            scored |= ~np.isnan(scores)
            buckets = np.full(n, -1, np.int16)
            for name in set(groups.tolist()):
                rows = groups == name
                points = self._points(self.cutpoints, column, name)
                buckets[rows] = bucket_of(scores[rows], points)
                if self.top.get(column):
                    threshold = self._points(self.top, column, name)
                    kept[rows] |= ~np.isnan(scores[rows]) & (scores[rows] >= threshold[0]
                                                             if threshold else False)
            columns[f"{column}_bucket"] = pa.array(buckets, pa.int16(), mask=buckets < 0)
            ensemble = np.maximum(ensemble, buckets)
        columns[ENSEMBLE] = pa.array(ensemble, pa.int16(), mask=ensemble < 0)
        names = np.array([name for name, _ in self.levels], dtype=object)
        lowest = np.array([low for _, low in self.levels])
        level = names[np.clip(np.searchsorted(lowest, ensemble, side="right") - 1, 0, None)]
        columns[LEVEL] = pa.array(level.tolist(), pa.string(), mask=ensemble < 0)
        removed = ~kept & scored if any(self.top.values()) else np.zeros(n, bool)
        return Decisions(removed, REASON_TOP, columns=columns)

    @staticmethod
    def _points(table: dict[str, dict[str, list[float]]], column: str, group: str) -> list[float]:
        try:
            return table[column][group]
        except KeyError:
            raise ValueError(f"quality_buckets: no cut points for column {column!r}"
                             + (f", group {group!r}" if group else "")) from None


class QualityBuckets(DatasetStage):
    """Turn score columns into Nemotron-CC's buckets: per column (and per ``by`` group),
    weighted percentiles over the whole dataset; bucket 0 to ``buckets`` - 1 per document
    (``<column>_bucket``), the ensemble bucket ``quality_bucket`` (the maximum over columns) and
    a ``quality`` level. With ``top_fraction``, only documents in that top share of at least
    one column's score are kept (DCLM's 10 %). A document without a score in a column has no
    bucket for it; without any (a language no classifier scored), no ensemble bucket nor
    level, and no top fraction judges it: it is kept (counted as ``unscored``)."""

    type = "quality_buckets"

    columns: list[str] = Field(min_length=1, description="Score columns (a classifier's or "
                               "fastText's score, higher is better).")
    by: str | None = Field(None, description="A column (lang) whose values get their own "
                           "percentiles; null values form one group.")
    weight: Literal["bytes", "documents"] = Field(
        "bytes", description="What a percentile counts: the documents' UTF-8 bytes (as NeMo "
        "Curator's token-weighted percentiles) or the documents.")
    buckets: int = Field(20, ge=2, le=1000, description="Buckets per column (Nemotron-CC: 20, "
                         "cut at every 5 %).")
    levels: dict[str, int] = Field(
        default_factory=lambda: dict(DEFAULT_LEVELS),
        description="Quality levels: name → the lowest ensemble bucket in it.")
    top_fraction: float | None = Field(None, gt=0, lt=1, description="Keep only documents in "
                                       "this top share (by weight) of some column's scores.")
    cutpoints_from: str | None = Field(None, description="A JSON file with frozen cut points: "
                                       "an earlier run's stats.json (its quality_buckets "
                                       "stage) or a file holding {cutpoints, top}.")

    @field_validator("levels")
    @classmethod
    def _levels_start_at_zero(cls, levels: dict[str, int]) -> dict[str, int]:
        if not levels or min(levels.values()) != 0 or len(set(levels.values())) != len(levels):
            raise ValueError("levels: distinct lowest buckets, one of them 0")
        return levels

    @model_validator(mode="after")
    def _levels_within_buckets(self) -> QualityBuckets:
        if max(self.levels.values()) >= self.buckets:
            raise ValueError(f"levels: a lowest bucket past the last ({self.buckets - 1})")
        return self

    def check(self) -> None:
        super().check()
        if self.cutpoints_from:
            self.frozen()

    def frozen(self) -> tuple[dict[str, dict[str, list[float]]], dict[str, dict[str, list[float]]]]:
        """The cut points (and top thresholds) of ``cutpoints_from``; ``ValueError`` if it has
        none for a column."""
        path = Path(self.cutpoints_from or "")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"cutpoints_from: cannot read {path}: {exc}") from None
        found = _find_cutpoints(data)
        if found is None:
            raise ValueError(f"cutpoints_from: {path} holds no quality_buckets cut points")
        cutpoints, top = found
        for column in self.columns:
            if column not in cutpoints:
                raise ValueError(f"cutpoints_from: {path} has no cut points for {column!r}")
            if self.top_fraction is not None and not top.get(column):
                raise ValueError(f"cutpoints_from: {path} has no top-fraction threshold for "
                                 f"{column!r}")
        return cutpoints, top

    def run_dataset(self, parts: list[Path], ctx: DatasetContext) -> DatasetResult:
        started = time.perf_counter()
        if parts:
            names = pq.read_schema(parts[0]).names
            for column in [*self.columns, *([self.by] if self.by else [])]:
                if column not in names:
                    raise ValueError(f"{ctx.stage_name}: {column!r} is not a column of the "
                                     f"dataset (columns: {', '.join(names)})")
        spec = Spec(tuple(self.columns), self.by, self.weight)
        work = str(ctx.work_dir)
        stems = [p.stem for p in parts]
        scored = ctx.run_phase("scores", _score_part, [
            _ScoreTask(stem, str(p), work, spec) for stem, p in zip(stems, parts, strict=True)],
            stems, _ScoreResult, reads=parts)
        if self.cutpoints_from:
            cutpoints, top = self.frozen()
            top = top if self.top_fraction is not None else {}
        else:
            cut = ctx.run_phase("cutpoints", _cut, [
                _CutTask(work, tuple(stems), spec, self.buckets, self.top_fraction)],
                ["cutpoints"], _CutResult)[0]
            cutpoints, top = cut.cutpoints, (cut.top if self.top_fraction is not None else {})
        levels = tuple(sorted(self.levels.items(), key=lambda item: item[1]))
        outputs, count = ctx.remove(parts, Assign(spec, cutpoints, top, levels))
        count.seconds = time.perf_counter() - started
        count.facts["quality_buckets"] = {
            "columns": list(self.columns), "by": self.by, "weight": self.weight,
            "buckets": self.buckets, "levels": dict(levels),
            "frozen_from": self.cutpoints_from,
            "missing": {c: sum(s.missing[k] for s in scored)
                        for k, c in enumerate(self.columns)},
            "unscored": sum(s.unscored for s in scored),
            "cutpoints": cutpoints, "top": top, "top_fraction": self.top_fraction}
        return DatasetResult(outputs, count)


def _find_cutpoints(data: Any) -> tuple[dict, dict] | None:
    """``{cutpoints, top}`` of a cut-point file or of a run's stats.json (its first
    quality_buckets stage)."""
    if isinstance(data, dict) and isinstance(data.get("cutpoints"), dict):
        return data["cutpoints"], data.get("top") or {}
    if isinstance(data, dict) and isinstance(data.get("stages"), list):
        for stage in data["stages"]:
            facts = stage.get("quality_buckets") if isinstance(stage, dict) else None
            if isinstance(facts, dict) and isinstance(facts.get("cutpoints"), dict):
                return facts["cutpoints"], facts.get("top") or {}
    return None
