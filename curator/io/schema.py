"""One schema for rows of many batches or files: ``id``, ``text``, then the other columns by name.

The schema of a set of tables is a function of their columns alone, never of the order in which
they come: types are merged permissively (null < int < float, wider ints, struct fields joined),
struct fields are sorted by name, and types that cannot merge become strings. A value turned into
a string is spelled as JSON (strings as they are; a float with an integral value like the int),
so that it reads the same whatever type it passed through on the way.
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Iterable
from typing import Any

import orjson
import pyarrow as pa

from curator.batch import ID, TEXT

_MAX_EXACT_FLOAT = 2**53


def column_order(names: Iterable[str]) -> list[str]:
    """``id`` and ``text`` first (when present), then the other names sorted."""
    names = set(names)
    return [n for n in (ID, TEXT) if n in names] + sorted(names - {ID, TEXT})


def canonical_type(type_: pa.DataType) -> pa.DataType:
    """``type_`` with the fields of every struct in it sorted by name."""
    if pa.types.is_struct(type_):
        fields = sorted((type_.field(i) for i in range(type_.num_fields)), key=lambda f: f.name)
        return pa.struct([f.with_type(canonical_type(f.type)) for f in fields])
    if pa.types.is_list(type_):
        return pa.list_(canonical_type(type_.value_type))
    if pa.types.is_large_list(type_):
        return pa.large_list(canonical_type(type_.value_type))
    return type_


def merge_types(types: Iterable[pa.DataType]) -> pa.DataType:
    """The type that holds values of every type in ``types`` (merged all at once, so the result
    depends on the set alone); string when they do not merge."""
    distinct = sorted(set(types), key=str)
    try:
        merged = pa.unify_schemas([pa.schema([("f", t)]) for t in distinct],
                                  promote_options="permissive").field("f").type
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        return pa.string()
    return canonical_type(merged)


def unified_schema(schemas: Iterable[pa.Schema]) -> pa.Schema:
    """The schema of the union of tables with ``schemas``, in ``column_order``."""
    types: dict[str, set[pa.DataType]] = {}
    for schema in schemas:
        for field in schema:
            types.setdefault(field.name, set()).add(field.type)
    return pa.schema([pa.field(name, merge_types(types[name])) for name in column_order(types)])


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` cast to ``schema`` (a ``unified_schema`` of it and others): columns it lacks
    become nulls, column order follows ``schema``."""
    index = {name: i for i, name in enumerate(table.column_names)}  # once: wide tables
    columns = [cast_column(table.column(index[f.name]), f.type) if f.name in index
               else pa.nulls(table.num_rows, f.type) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def cast_column(column: pa.ChunkedArray, type_: pa.DataType) -> pa.ChunkedArray:
    """``column`` as ``type_``; a column that does not merge into a string is spelled as JSON."""
    if column.type.equals(type_):
        return column
    textual = (pa.types.is_string, pa.types.is_large_string)
    if any(is_(type_) for is_ in textual) and not any(is_(column.type) for is_ in textual) \
            and not pa.types.is_integer(column.type) and not pa.types.is_null(column.type):
        return pa.chunked_array([pa.array([json_spelling(v) for v in column.to_pylist()],
                                          type_)], type_)
    return column.cast(type_, safe=not pa.types.is_floating(type_))


def json_spelling(value: Any) -> str | None:
    """``value`` as a string: strings unchanged, null stays null, anything else as JSON (object
    keys sorted)."""
    if value is None or isinstance(value, str):
        return value
    return orjson.dumps(_plain(value), default=str, option=orjson.OPT_SORT_KEYS).decode()


def _plain(value: Any) -> Any:
    """``value`` with integral floats as ints and dates as ISO strings (JSON-ready)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < _MAX_EXACT_FLOAT:
        return int(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    if isinstance(value, decimal.Decimal):
        return str(value)
    return value
