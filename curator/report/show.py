"""``curate show``: sample documents of a run, removed (by stage and reason) or kept, with their
text excerpt and the columns stages gave them (scores, language, survivor ids)."""

from __future__ import annotations

import re
from collections.abc import Iterator
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
    """Removed documents (those whose text was kept), by id order; read a row group at a time,
    keeping the ``n`` smallest ids seen, so a large run costs no more memory than a small one."""
    best: pa.Table | None = None
    matched = with_text = 0
    for folder in run_dir.rejected_folders(stage):
        for table in _row_groups(folder):
            table = table.append_column("stage", pa.array([folder.name] * len(table)))
            if reason is not None:
                table = table.filter(pc.equal(table.column(REASON), reason))
            table = _lang(table, lang)
            matched += table.num_rows
            table = table.filter(pc.is_valid(table.column(TEXT))) if TEXT in table.column_names \
                else table.slice(0, 0)
            with_text += table.num_rows
            best = _smallest(best, table, n)
    return Shown(best.to_pylist() if best is not None else [], matched, matched - with_text)


def kept(folder: Path, lang: str | None, n: int) -> Shown:
    """Documents of a writer's Parquet output (what the run kept), by id order; read a row group
    at a time, as ``removed``."""
    best: pa.Table | None = None
    matched = 0
    for table in _row_groups(folder):
        table = _lang(table, lang)
        matched += table.num_rows
        best = _smallest(best, table, n)
    return Shown(best.to_pylist() if best is not None else [], matched, 0)


def _row_groups(folder: Path) -> Iterator[pa.Table]:
    for path in sorted(folder.glob("*.parquet")):
        parquet = pq.ParquetFile(path)
        for group in range(parquet.num_row_groups):
            yield parquet.read_row_group(group)


def _smallest(best: pa.Table | None, table: pa.Table, n: int) -> pa.Table | None:
    """The ``n`` rows of smallest id among ``best`` and ``table``."""
    if not table.num_rows:
        return best
    merged = table if best is None else pa.concat_tables([best, table],
                                                         promote_options="permissive")
    return merged.sort_by(ID).slice(0, n)


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


def _lang(table: pa.Table, lang: str | None) -> pa.Table:
    if lang is None:
        return table
    if "lang" not in table.column_names:
        return table.slice(0, 0)
    return table.filter(pc.equal(table.column("lang"), lang))


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "…"
