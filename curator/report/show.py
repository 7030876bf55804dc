"""``curate show``: sample documents of a run, removed (by stage and reason) or kept, with their
text excerpt and the columns stages gave them (scores, language, survivor ids)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from curator.batch import ID, REASON, TEXT
from curator.store.run_dir import RunDir

EXCERPT_CHARS = 400


@dataclass
class Shown:
    """The documents picked, and how many matched before ``n`` cut them."""

    rows: list[dict[str, Any]]
    matched: int
    without_text: int  # matched removed documents whose text was not kept (``rejected: ids``)


def removed(run_dir: RunDir, stage: str | None, reason: str | None, lang: str | None,
            n: int) -> Shown:
    """Removed documents (those whose text was kept), by id order."""
    tables = []
    for folder in run_dir.rejected_folders(stage):
        for path in sorted(folder.glob("*.parquet")):
            table = pq.read_table(path)
            tables.append(table.append_column("stage", pa.array([folder.name] * len(table))))
    table = _concat(tables)
    if table is None:
        return Shown([], 0, 0)
    if reason is not None:
        table = table.filter(pc.equal(table.column(REASON), reason))
    table = _lang(table, lang)
    with_text = table.filter(pc.is_valid(table.column(TEXT))) if TEXT in table.column_names \
        else table.slice(0, 0)
    return Shown(_first(with_text, n), table.num_rows, table.num_rows - with_text.num_rows)


def kept(folder: Path, lang: str | None, n: int) -> Shown:
    """Documents of a writer's Parquet output (what the run kept), by id order."""
    table = _concat([pq.read_table(p) for p in sorted(folder.glob("*.parquet"))])
    if table is None:
        return Shown([], 0, 0)
    table = _lang(table, lang)
    return Shown(_first(table, n), table.num_rows, 0)


def first_documents(folder: Path, n: int, with_text: bool = False) -> list[dict[str, Any]]:
    """The first ``n`` documents of ``folder``'s Parquet files in file order (with a non-null
    text only, with ``with_text``), read one row group at a time: a report's examples cost the
    same whatever the size of the run."""
    rows: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.parquet")):
        parquet = pq.ParquetFile(path)
        for group in range(parquet.num_row_groups):
            table = parquet.read_row_group(group)
            if with_text:
                if TEXT not in table.column_names:
                    break
                table = table.filter(pc.is_valid(table.column(TEXT)))
            rows += table.slice(0, n - len(rows)).to_pylist()
            if len(rows) >= n:
                return rows
    return rows


def describe(row: dict[str, Any]) -> list[str]:
    """A document as two lines: its columns, then its text excerpt."""
    fields = [f"{k}={_short(v)}" for k, v in row.items() if k not in (TEXT,) and v is not None]
    text = re.sub(r"\s+", " ", row.get(TEXT) or "").strip()
    excerpt = text[:EXCERPT_CHARS] + ("…" if len(text) > EXCERPT_CHARS else "")
    return [" · ".join(fields), f"    {excerpt}"]


def _concat(tables: list[pa.Table]) -> pa.Table | None:
    tables = [t for t in tables if t.num_rows]
    return pa.concat_tables(tables, promote_options="permissive") if tables else None


def _lang(table: pa.Table, lang: str | None) -> pa.Table:
    if lang is None:
        return table
    if "lang" not in table.column_names:
        return table.slice(0, 0)
    return table.filter(pc.equal(table.column("lang"), lang))


def _first(table: pa.Table, n: int) -> list[dict[str, Any]]:
    return table.sort_by(ID).slice(0, n).to_pylist()


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "…"
