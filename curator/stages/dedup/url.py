"""URL dedup: one document per normalised URL (``url_key``), on exact dedup's phases.

Phases (each restartable, none collects the dataset in one process):
  1. ``hash``   per part:   each document's normalised URL hashed (XXH3-128) with its score (the
                            date in seconds, or the text's length) → ``hash/<part>.arrow``, as
                            exact dedup's; documents without a URL left out (counted: ``no_url``)
  2. ``group``  per bucket: exact dedup's: per URL the highest score, then the smallest id, survives
  3. ``remove`` per part:   the runtime's removal phase (reason ``duplicate_url``, ``duplicate_of``)
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import Field

from curator.batch import ID, TEXT
from curator.commit import Commit
from curator.io.parquet import read_part
from curator.stages.base import DatasetResult, DatasetStage
from curator.stages.context import DatasetContext, PhaseResult
from curator.stages.dedup.buckets import default_buckets
from curator.stages.dedup.cluster_sizes import sum_size_counts
from curator.stages.dedup.exact import (
    Duplicates,
    GroupResult,
    GroupTask,
    group_bucket,
    hash_dir,
    text_hashes,
)
from curator.stages.dedup.url_key import DEFAULT_TRACKING, UrlRules, normalise_url

REASON_URL = "duplicate_url"


def date_seconds(dates: pa.ChunkedArray) -> np.ndarray:
    """Each date as seconds since the epoch: ISO 8601 strings (without a zone: UTC), Arrow
    timestamps or dates, numbers (seconds); ``-inf`` where missing or unreadable (it loses)."""
    kind = dates.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return np.array([_iso_seconds(d) for d in dates.to_pylist()], dtype=np.float64)
    if pa.types.is_timestamp(kind) or pa.types.is_date(kind):
        micros = dates.cast(pa.timestamp("us"), safe=False).cast(pa.int64())
        dates = pc.divide(micros.cast(pa.float64()), 1e6)
    seconds = dates.cast(pa.float64()).fill_null(-math.inf).to_numpy()
    return np.where(np.isnan(seconds), -math.inf, seconds)


def _iso_seconds(text: str | None) -> float:
    """An ISO 8601 date or time in seconds (``Z`` read as UTC on Python 3.10 too); -inf if none."""
    text = (text or "").strip()
    try:
        when = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
    except ValueError:
        return -math.inf
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()


@dataclass(frozen=True)
class _HashTask:
    part: str  # its name: the hashes of a part are kept under it (reused while it is unchanged)
    path: str
    work: str
    rules: UrlRules
    url_field: str
    date_field: str | None  # the score: this date, or the text's length where None


@dataclass(frozen=True)
class _HashResult(PhaseResult):
    rows: int
    no_url: int


def _hash_part(task: _HashTask) -> _HashResult:
    scored = task.date_field or TEXT
    table = read_part(task.path, list(dict.fromkeys([ID, task.url_field, scored])))
    keys = [normalise_url(u, task.rules) for u in table.column(task.url_field).to_pylist()]
    rows = np.array([i for i, key in enumerate(keys) if key is not None], dtype=np.int64)
    h1, h2 = text_hashes(pa.array([keys[i] for i in rows], pa.string()), "xxh3_128")
    if task.date_field:
        score = date_seconds(table.column(scored))
    else:
        score = pc.utf8_length(table.column(scored)).cast(pa.float64()).fill_null(0).to_numpy()
    pending = Commit()
    hash_dir(task.work).write(task.part, pa.table({
        "h1": h1, "h2": h2, ID: table.column(ID).take(rows), "row": rows,
        "score": score[rows]}), pending)
    pending.publish()
    return _HashResult(table.num_rows, table.num_rows - len(rows))


class UrlDedup(DatasetStage):
    """Keep one document per normalised URL (scheme, host case, default port, fragment and
    tracking parameters ignored; curator/stages/dedup/url_key.py): the latest or the longest,
    ties to the smallest id. Removed documents name their survivor; documents without a URL
    are kept."""

    type = "url_dedup"

    url_field: str = Field("url", description="Column holding the URL.")
    keep: Literal["latest", "longest"] = Field(
        "latest", description="Which copy survives. latest: the latest date_field (a missing or "
        "unreadable date loses); longest: the longest text (characters). Ties: smallest id.")
    date_field: str = Field("date", description="Column of dates for keep: latest (ISO 8601 "
                            "strings, UTC where no zone is given; timestamps; seconds).")
    same_scheme: bool = Field(True, description="http and https are one scheme.")
    fold_www: bool = Field(False, description="Drop a leading 'www.' of the host.")
    tracking_params: list[str] = Field(
        default_factory=lambda: list(DEFAULT_TRACKING),
        description="Query parameters removed before comparing (globs, case-insensitive).")
    buckets: int | None = Field(None, gt=0, description="Shuffle buckets; default: 16 to one per "
                                "256 MB of parts, at most one per part.")

    def run_dataset(self, parts: list[Path], ctx: DatasetContext) -> DatasetResult:
        started = time.perf_counter()
        date_field = self.date_field if self.keep == "latest" else None
        if parts:
            columns = pq.read_schema(parts[0]).names  # the parts share one schema
            for name in (self.url_field, date_field):
                if name and name not in columns:
                    raise ValueError(f"{ctx.stage_name}: {name!r} is not a column of the "
                                     f"dataset (columns: {', '.join(columns)})")
        work = str(ctx.work_dir)
        buckets = self.buckets or default_buckets(parts)
        names = [p.stem for p in parts]
        rules = UrlRules(self.same_scheme, self.fold_www, tuple(self.tracking_params))
        hashed = ctx.run_phase("hash", _hash_part, [
            _HashTask(name, str(p), work, rules, self.url_field, date_field)
            for name, p in zip(names, parts, strict=True)], names, _HashResult, reads=parts)
        groups = ctx.run_phase("group", group_bucket, [
            GroupTask(b, buckets, work, tuple(names), use_score=True)
            for b in range(buckets)], [f"bucket-{b:05d}" for b in range(buckets)], GroupResult)
        outputs, count = ctx.remove(parts, Duplicates(work, REASON_URL))
        count.seconds = time.perf_counter() - started
        count.facts["dedup"] = {"keep": self.keep, "no_url": sum(h.no_url for h in hashed),
                                "cluster_sizes": sum_size_counts(g.sizes for g in groups)}
        return DatasetResult(outputs, count)
