"""The unit that travels between stages: an Arrow table with ``id`` and ``text`` columns."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

ID = "id"
TEXT = "text"
REASON = "reason"


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


def concat(tables: list[pa.Table]) -> pa.Table:
    """Concatenate tables whose schemas may differ a little (missing columns, null vs typed)."""
    if len(tables) == 1:
        return tables[0]
    return pa.concat_tables(tables, promote_options="permissive")


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Cast ``table`` to ``schema``: missing columns become nulls, column order follows ``schema``.

    Raises ``pa.ArrowInvalid``/``pa.ArrowTypeError`` when a column cannot be cast or ``table`` has
    a column the schema lacks.
    """
    extra = set(table.column_names) - set(schema.names)
    if extra:
        raise pa.ArrowInvalid(f"unexpected columns {sorted(extra)} (schema has {schema.names})")
    columns = [
        table.column(f.name).cast(f.type) if f.name in table.column_names
        else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


@dataclass(frozen=True)
class Shard:
    """One unit of input work, defined by the input listing (not by the cluster)."""

    index: int
    path: str
    size: int | None = None
    label: str = ""  # name used in ids and error positions (path relative to the input root)

    @property
    def part(self) -> str:
        return f"part-{self.index:05d}"


@dataclass
class SourceBatch:
    """Rows read from a shard plus the records that could not be read."""

    table: pa.Table
    failed: list[Failure] = field(default_factory=list)
