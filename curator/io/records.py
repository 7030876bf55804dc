"""Turning raw records into the batch schema: ``id`` and ``text`` first, metadata after."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from curator.batch import ID, TEXT, Failure, Shard, SourceBatch


def _string_ids(label: str, positions: np.ndarray) -> pa.Array:
    numbers = pa.array(positions, pa.int64()).cast(pa.string())
    return pc.binary_join_element_wise(label, numbers, ":")


@dataclass(frozen=True)
class ColumnMap:
    """Which input fields hold the text and the id."""

    text_field: str = TEXT
    id_field: str = ID

    def normalise(self, table: pa.Table, positions: np.ndarray, stage: str,
                  shard: Shard) -> SourceBatch:
        """Rename to ``id``/``text``, give missing ids ``label:position``, fail rows without text.

        ``positions`` holds each row's line (JSONL) or row number (Parquet) in its file.
        """
        n = table.num_rows
        if n == 0:
            return SourceBatch(pa.table({}), [])
        if self.text_field not in table.column_names:
            error = f"no field {self.text_field!r} (fields: {', '.join(table.column_names)})"
            return SourceBatch(pa.table({}), self._failures(error, shard, stage, positions))
        text = table.column(self.text_field)
        if not (pa.types.is_string(text.type) or pa.types.is_large_string(text.type)):
            error = f"field {self.text_field!r} is {text.type}, expected a string"
            return SourceBatch(pa.table({}), self._failures(error, shard, stage, positions))
        if self.id_field in table.column_names:
            ids = table.column(self.id_field)
            ids = ids.cast(pa.string()) if not pa.types.is_string(ids.type) else ids
            if ids.null_count:
                ids = pc.coalesce(ids, _string_ids(shard.label, positions))
        else:
            ids = _string_ids(shard.label, positions)
        rest = [(name, _no_null_type(table.column(name))) for name in table.column_names
                if name not in (self.text_field, self.id_field, ID, TEXT)]
        out = pa.table({ID: ids, TEXT: text.cast(pa.string()), **dict(rest)})
        missing = pc.is_null(out.column(TEXT))
        if not pc.any(missing).as_py():
            return SourceBatch(out, [])
        missing_np = missing.to_numpy(zero_copy_only=False)
        failures = self._failures(f"field {self.text_field!r} is null", shard, stage,
                                  positions[missing_np])
        return SourceBatch(out.filter(pc.invert(missing)), failures)

    @staticmethod
    def _failures(error: str, shard: Shard, stage: str, positions: np.ndarray) -> list[Failure]:
        return [Failure(stage=stage, error=error, file=shard.label, line=int(p)) for p in positions]


def _no_null_type(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Columns that were null in every row become strings, so later batches can fill them."""
    return column.cast(pa.string()) if pa.types.is_null(column.type) else column


def table_from_rows(rows: list[dict], text_field: str) -> pa.Table:
    """Build a table from parsed JSON objects, tolerating fields whose type varies by row.

    A text value that is not a string becomes null (and the row then fails); another field whose
    values cannot share one Arrow type is kept as JSON strings.
    """
    if not rows:
        return pa.table({})
    names = list(dict.fromkeys(key for row in rows for key in row))
    columns = {}
    for name in names:
        values = [row.get(name) for row in rows]
        if name == text_field:
            columns[name] = pa.array([v if isinstance(v, str) else None for v in values],
                                     pa.string())
            continue
        try:
            columns[name] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            columns[name] = pa.array(
                [None if v is None else orjson.dumps(v).decode() for v in values], pa.string())
    return pa.table(columns)
