"""Turning raw records into the batch schema: ``id`` and ``text`` first, the other fields after,
sorted by name (so a batch's column order never depends on how its rows were parsed)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curator.batch import ID, TEXT, Failure, Shard, SourceBatch
from curator.io.schema import column_order, json_spelling

#: notes counted on the reader's stage: ids that were numbers or booleans, turned into strings
#: with Python's ``str``; ids that were objects or arrays, replaced by the position id.
ID_CONVERTED = "id_converted"
ID_REPLACED = "id_replaced"


def _string_ids(label: str, positions: np.ndarray) -> pa.Array:
    numbers = pa.array(positions, pa.int64()).cast(pa.string())
    return pc.binary_join_element_wise(label, numbers, ":")


def id_strings(values: list[Any]) -> tuple[list[str | None], Counter]:
    """Each raw id as a string: strings as they are, numbers and booleans with ``str`` (5 → "5",
    5.5 → "5.5", True → "True"), bytes decoded; null, objects and arrays as null (the row then
    gets its position id)."""
    out: list[str | None] = []
    notes: Counter = Counter()
    for value in values:
        if value is None or isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict | list | tuple):
            out.append(None)
            notes[ID_REPLACED] += 1
        else:
            out.append(value.decode("utf-8", "backslashreplace") if isinstance(value, bytes)
                       else str(value))
            notes[ID_CONVERTED] += 1
    return out, notes


def _id_column(column: pa.ChunkedArray) -> tuple[pa.ChunkedArray, Counter]:
    """An id column of any type as strings (``id_strings``), with its notes."""
    kind = column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind):
        return column.cast(pa.string()), Counter()
    if pa.types.is_integer(kind):  # Arrow's spelling of an int is str()'s
        converted = len(column) - column.null_count
        return column.cast(pa.string()), Counter({ID_CONVERTED: converted} if converted else {})
    ids, notes = id_strings(column.to_pylist())
    return pa.chunked_array([pa.array(ids, pa.string())], pa.string()), notes


@dataclass(frozen=True)
class ColumnMap:
    """Which input fields hold the text and the id."""

    text_field: str = TEXT
    id_field: str = ID

    def normalise(self, table: pa.Table, positions: np.ndarray, stage: str,
                  shard: Shard, check_utf8: bool = False) -> SourceBatch:
        """Rename to ``id``/``text`` (ids as strings, ``label:position`` where missing), order
        the other columns by name, fail rows without text (and, with ``check_utf8``, rows whose
        text is not valid UTF-8: Arrow does not check Parquet strings as it reads them).

        ``positions`` holds each row's line (JSONL) or row number (Parquet) in its file.
        """
        if self.text_field not in table.column_names:
            error = f"no field {self.text_field!r} (fields: {', '.join(table.column_names)})"
            return SourceBatch(pa.table({}), self._failures(error, shard, stage, positions,
                                                            "no_text"))
        text = table.column(self.text_field)
        if pa.types.is_dictionary(text.type) and pa.types.is_string(text.type.value_type):
            text = text.cast(pa.string())  # a categorical column (pandas)
        if not (pa.types.is_string(text.type) or pa.types.is_large_string(text.type)):
            error = f"field {self.text_field!r} is {text.type}, expected a string"
            return SourceBatch(pa.table({}), self._failures(error, shard, stage, positions,
                                                            "bad_text_type"))
        notes: Counter = Counter()
        if self.id_field in table.column_names:
            ids, notes = _id_column(table.column(self.id_field))
            if ids.null_count:
                ids = pc.coalesce(ids, _string_ids(shard.label, positions))
        else:
            ids = _string_ids(shard.label, positions)
        rest = [name for name in column_order(table.column_names)
                if name not in (self.text_field, self.id_field, ID, TEXT)]
        out = pa.table({ID: ids, TEXT: text.cast(pa.string()),
                        **{name: table.column(name) for name in rest}})
        missing = pc.is_null(out.column(TEXT)).to_numpy(zero_copy_only=False)
        invalid = _invalid_utf8(out.column(TEXT)) if check_utf8 else None
        if not missing.any() and invalid is None:
            return SourceBatch(out, [], notes)
        failures = self._failures(f"field {self.text_field!r} is null", shard, stage,
                                  positions[missing], "null_text")
        bad = missing
        if invalid is not None:
            failures += self._failures(f"field {self.text_field!r} is not valid UTF-8", shard,
                                       stage, positions[invalid], "bad_utf8")
            bad = missing | invalid
        return SourceBatch(out.filter(pa.array(~bad)), failures, notes)

    @staticmethod
    def _failures(error: str, shard: Shard, stage: str, positions: np.ndarray,
                  reason: str) -> list[Failure]:
        return [Failure(stage=stage, error=error, file=shard.label, line=int(p), reason=reason)
                for p in positions]


def _invalid_utf8(text: pa.ChunkedArray) -> np.ndarray | None:
    """Which rows of ``text`` are not valid UTF-8 (a mask); None when all are."""
    try:
        text.validate(full=True)
        return None
    except pa.ArrowInvalid:
        pass
    values = text.cast(pa.large_binary()).to_pylist()  # rare: a damaged or hostile file
    return np.array([v is not None and not _decodes(v) for v in values], dtype=bool)


def _decodes(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def table_from_rows(rows: list[dict], columns: ColumnMap) -> tuple[pa.Table, Counter]:
    """Build a table from parsed JSON objects, tolerating fields whose type varies by row; with
    the notes of its ids.

    A text value that is not a string becomes null (and the row then fails); ids become strings
    as ``id_strings`` says; another field whose values cannot share one Arrow type becomes
    strings (``json_spelling``).
    """
    if not rows:
        return pa.table({}), Counter()
    names = list(dict.fromkeys(key for row in rows for key in row))
    built = {}
    notes: Counter = Counter()
    for name in names:
        values = [row.get(name) for row in rows]
        if name == columns.text_field:
            built[name] = pa.array([v if isinstance(v, str) else None for v in values],
                                   pa.string())
        elif name == columns.id_field:
            ids, notes = id_strings(values)
            built[name] = pa.array(ids, pa.string())
        else:
            try:
                built[name] = pa.array(values)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                built[name] = pa.array([json_spelling(v) for v in values], pa.string())
    return pa.table(built), notes
