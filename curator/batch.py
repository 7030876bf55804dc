"""The unit that travels between stages: an Arrow table with ``id`` and ``text`` columns."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

ID = "id"
TEXT = "text"
SOURCE = "source"
REASON = "reason"


class InputUnavailable(Exception):
    """A shard's input cannot be had in this run (a download that failed for good): the shard
    is left not done, the run goes on with the others and ends failed naming it, and the next
    run tries it again."""

    def __init__(self, url: str, error: str, reason: str = "download_failed") -> None:
        super().__init__(f"{url}: {error}")
        self.url, self.error, self.reason = url, error, reason

    def __reduce__(self):  # picklable across processes: the fields, not the message
        return type(self), (self.url, self.error, self.reason)


@dataclass
class Failure:
    """A record that could not be processed, with where it came from and why."""

    stage: str
    error: str
    file: str | None = None
    line: int | None = None
    offset: int | None = None
    id: str | None = None
    excerpt: str | None = None
    reason: str | None = None  # a one-word cause where there is one: timeout, worker_died, ...

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def position(self) -> str:
        """``file:line`` (or ``file@offset``) for messages."""
        where = self.file or "<unknown>"
        if self.line is not None:
            return f"{where}:{self.line}"
        if self.offset is not None:
            return f"{where}@{self.offset}"
        return where


@dataclass
class BatchResult:
    """What a stage made of one batch: kept rows, removed rows (with a ``reason``), failures."""

    kept: pa.Table
    removed: pa.Table | None = None
    failed: list[Failure] = field(default_factory=list)
    payload: Any = None  # what a sink's ``process`` computed for the kept rows (tokens)
    rule_failures: dict[str, int] = field(default_factory=dict)  # a filter's rules, each counted
    scores: dict[str, pa.Array] = field(default_factory=dict)  # a filter's scores, every row
    signals: dict[str, pa.Array] = field(default_factory=dict)  # every score its rules read
    notes: dict[str, int] = field(default_factory=dict)  # changes counted (stats.json: notes)

    @property
    def n_removed(self) -> int:
        return 0 if self.removed is None else self.removed.num_rows


def split_by_reason(table: pa.Table, reasons: pa.Array) -> BatchResult:
    """Keep rows whose reason is null; the others go to ``removed`` with a ``reason`` column."""
    is_removed = pc.is_valid(reasons)
    kept = table.filter(pc.invert(is_removed))
    removed = table.filter(is_removed).append_column(REASON, reasons.filter(is_removed))
    return BatchResult(kept=kept, removed=removed)


def id_fractions(ids: pa.ChunkedArray | pa.Array | list[str], seed: int) -> np.ndarray:
    """A number in [0, 1) per id, fixed by the id and the seed alone (sampling, splits)."""
    values = ids if isinstance(ids, list) else ids.to_pylist()
    return np.fromiter((xxhash.xxh3_64_intdigest(i.encode(), seed) for i in values),
                       dtype=np.uint64, count=len(values)) / np.float64(2**64)


@dataclass(frozen=True)
class Shard:
    """One unit of input work, defined by the input listing (not by the cluster)."""

    index: int
    path: str
    size: int | None = None
    label: str = ""  # name used in ids and error positions (path relative to the input root)
    source: str = ""  # the source stage that listed it
    name: str = ""  # its part name, from its identity (never its position in a listing)
    digest: str = ""  # content checksum of a run's own intermediate file (its reuse key)

    @property
    def part(self) -> str:
        """The shard's name in the run directory: ``name``, else from its position."""
        return self.name or f"part-{self.index:05d}"


@dataclass
class SourceBatch:
    """Rows read from a shard, the records that could not be read, the records the source
    skips on purpose (``removed``, with a ``reason`` column: a redirect page), and notes
    (``id_converted``)."""

    table: pa.Table
    failed: list[Failure] = field(default_factory=list)
    notes: Counter = field(default_factory=Counter)  # what the reader changed, counted
    removed: pa.Table | None = None


def concat(tables: list[pa.Table]) -> pa.Table:
    """Concatenate tables whose schemas may differ a little (missing columns, null vs typed)."""
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables,
                                                               promote_options="permissive")


def join_results(results: list[BatchResult], empty: pa.Table,
                 join_payloads: Callable[[list[Any]], Any] | None = None) -> BatchResult:
    """One result from the results of consecutive pieces of a batch, in row order (``empty``:
    the batch's zero-row slice, for when no piece kept anything)."""
    kept = [r.kept for r in results if r.kept.num_rows]
    removed = [r.removed for r in results if r.removed is not None and r.removed.num_rows]
    rules: dict[str, int] = {}
    for r in results:
        for reason, n in r.rule_failures.items():
            rules[reason] = rules.get(reason, 0) + n
    names = {k for r in results for k in r.scores}
    scores = {k: pa.concat_arrays([r.scores[k] for r in results if k in r.scores])
              for k in sorted(names)}
    payloads = [r.payload for r in results if r.payload is not None]
    notes: Counter = Counter()
    for r in results:
        notes.update(r.notes)
    return BatchResult(kept=concat(kept) if kept else empty,
                       removed=concat(removed) if removed else None,
                       failed=[f for r in results for f in r.failed],
                       payload=join_payloads(payloads) if join_payloads and payloads else None,
                       rule_failures=rules, scores=scores, notes=dict(notes))
