"""Records of task files as their publishers ship them: JSON Lines, JSON documents, CSV/TSV
(with a header, or headerless with given columns), Parquet, XML and plain text, optionally
compressed (``.gz``, ``.bz2``, ``.xz``, ``.zst``). Every record carries where it was found, so
that errors name the file and line.

Bounded (docs/limits.md): a file is read whole, so it may hold ``MAX_TASK_FILE_BYTES`` once
decompressed, and decompression stops where it expands more than ``MAX_EXPANSION_RATIO`` times;
nesting too deep for the parsers fails the file. Each is a :class:`TaskFileError` naming it."""

from __future__ import annotations

import csv
import io
import json
import os
import xml.parsers.expat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from curator.io import streams
from curator.io.parquet import decoded_bytes
from curator.io.streams import DamagedInput, OverLimit, read_bounded

FORMATS = ("jsonl", "json", "csv", "tsv", "parquet", "xml", "text")
_EXTENSIONS = {"jsonl": "jsonl", "ndjson": "jsonl", "json": "json", "csv": "csv", "tsv": "tsv",
               "parquet": "parquet", "xml": "xml", "txt": "text"}
_COMPRESSIONS = ("gz", "bz2", "xz", "zst")
#: Most bytes a task file may hold decompressed (the largest benchmark files are ~100 MB).
MAX_TASK_FILE_BYTES = 1 << 30


class TaskFileError(ValueError):
    """A task file that cannot be read as its spec says; the message is one line."""


class MissingField(TaskFileError):
    """A record lacks a field its layout reads."""


@dataclass(frozen=True)
class Record:
    """One record of a task file: ``where`` is ``line N``, ``row N`` or a JSON path."""

    where: str
    value: dict[str, Any]


def file_format(name: str) -> str:
    """The format named by a file's extension (compression suffixes skipped)."""
    parts = name.lower().rsplit("/", 1)[-1].split(".")
    while len(parts) > 1 and parts[-1] in _COMPRESSIONS:
        parts.pop()
    ext = parts[-1] if len(parts) > 1 else ""
    if ext not in _EXTENSIONS:
        raise TaskFileError(f"{name}: cannot tell the format from the name; expected one of "
                            f"{', '.join('.' + e for e in _EXTENSIONS)} (optionally compressed)")
    return _EXTENSIONS[ext]


def _text(path: Path, display: str) -> str:
    try:
        data = read_bounded(str(path), MAX_TASK_FILE_BYTES)
    except OverLimit as err:
        raise TaskFileError(f"{display}: refused, over a limit of docs/limits.md "
                            f"(MAX_TASK_FILE_BYTES={MAX_TASK_FILE_BYTES}): {err}") from None
    except (DamagedInput, OSError, EOFError) as err:
        raise TaskFileError(f"{display}: cannot be read ({err})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise TaskFileError(f"{display}: not UTF-8 text ({err.reason} at byte {err.start})") \
            from None


def _too_deep(display: str, where: str) -> TaskFileError:
    return TaskFileError(f"{display}: {where}: nested too deeply to read")


def _json_lines(text: str, display: str) -> Iterator[Record]:
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as err:
            raise TaskFileError(f"{display}: line {number}: not valid JSON ({err.msg} at column "
                                f"{err.colno})") from None
        except RecursionError:
            raise _too_deep(display, f"line {number}") from None
        if not isinstance(value, dict):
            raise TaskFileError(f"{display}: line {number}: expected a JSON object, found "
                                f"{type(value).__name__}")
        yield Record(f"line {number}", value)


def _walk(value: Any, keys: list[str], where: str, display: str) -> Iterator[tuple[str, Any]]:
    """The values at a dotted path, lists traversed, each with its JSON path."""
    if isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, keys, f"{where}[{i}]", display)
        return
    if not keys:
        yield where, value
        return
    if not isinstance(value, dict) or keys[0] not in value:
        raise MissingField(f"{display}: {where or 'top level'}: missing field {keys[0]!r}")
    yield from _walk(value[keys[0]], keys[1:], f"{where}.{keys[0]}".lstrip("."), display)


def _json_document(text: str, display: str, records: str | None) -> Iterator[Record]:
    try:
        document = json.loads(text)
    except RecursionError:
        raise _too_deep(display, "the document") from None
    except json.JSONDecodeError as err:
        if err.msg == "Extra data":  # one object per line under a .json name (JGLUE)
            yield from _json_lines(text, display)
            return
        raise TaskFileError(f"{display}: line {err.lineno}: not valid JSON ({err.msg} at column "
                            f"{err.colno})") from None
    if records is None and not isinstance(document, list):
        raise TaskFileError(f"{display}: expected a list of records at the top level")
    try:
        found = list(_walk(document, records.split(".") if records else [], "", display))
    except RecursionError:
        raise _too_deep(display, records or "the document") from None
    for where, value in found:
        if not isinstance(value, dict):
            raise TaskFileError(f"{display}: {where}: expected a JSON object, found "
                                f"{type(value).__name__}")
        yield Record(where, value)


def csv_rows(path: Path, display: str, delimiter: str) -> Iterator[tuple[int, list[str]]]:
    """Rows of a CSV/TSV file with the line each starts on."""
    reader = csv.reader(io.StringIO(_text(path, display), newline=""), delimiter=delimiter)
    line = 1
    try:
        for row in reader:
            if row:
                yield line, row
            line = reader.line_num + 1
    except csv.Error as err:
        raise TaskFileError(f"{display}: line {line}: not valid CSV ({err})") from None


def _table_rows(path: Path, display: str, delimiter: str,
                columns: tuple[str, ...] | None) -> Iterator[Record]:
    rows = csv_rows(path, display, delimiter)
    if columns is None:
        first = next(rows, None)
        if first is None:
            return
        columns = tuple(first[1])
    for line, row in rows:
        if len(row) != len(columns):
            raise TaskFileError(f"{display}: line {line}: expected {len(columns)} columns "
                                f"({', '.join(columns)}), found {len(row)}")
        yield Record(f"line {line}", dict(zip(columns, row, strict=True)))


def _parquet_rows(path: Path, display: str) -> Iterator[Record]:
    try:
        parquet = pq.ParquetFile(str(path))
        meta, row, decoded = parquet.metadata, 0, 0
        limit = min(MAX_TASK_FILE_BYTES, streams.RATIO_GRACE_BYTES
                    + int(streams.MAX_EXPANSION_RATIO * os.path.getsize(path)))
        if sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups)) > limit:
            raise TaskFileError(f"{display}: refused, its rows hold more than {limit} bytes "
                                "(MAX_TASK_FILE_BYTES, MAX_EXPANSION_RATIO: docs/limits.md)")
        for batch in parquet.iter_batches(batch_size=256):
            decoded += decoded_bytes(batch)  # dictionary strings counted before decoding
            if decoded > limit:
                raise TaskFileError(f"{display}: refused at row {row}, its rows decode to more "
                                    f"than {limit} bytes (MAX_TASK_FILE_BYTES, "
                                    "MAX_EXPANSION_RATIO: docs/limits.md)")
            for value in batch.to_pylist():
                yield Record(f"row {row}", value)
                row += 1
    except (pa.ArrowException, OSError) as err:
        raise TaskFileError(f"{display}: not a readable Parquet file ({err})") from None


def _xml_records(text: str, display: str) -> Iterator[Record]:
    """Each child element of the root as a record: attributes and child elements by tag
    (text of leaves; repeated tags as lists)."""
    parser = xml.parsers.expat.ParserCreate()
    stack: list[tuple[str, dict[str, Any], list[str], int]] = []
    records: list[Record] = []

    def start(tag: str, attrs: dict[str, str]) -> None:
        stack.append((tag, dict(attrs), [], parser.CurrentLineNumber))

    def end(tag: str) -> None:
        _, value, chars, line = stack.pop()
        text = "".join(chars).strip()
        if value and text:
            value.setdefault("text", text)
        content: Any = value or text
        if len(stack) == 1:
            records.append(Record(f"line {line}", value or {"text": text}))
        elif stack:
            parent = stack[-1][1]
            if tag in parent:
                previous = parent[tag]
                parent[tag] = [*previous, content] if isinstance(previous, list) \
                    else [previous, content]
            else:
                parent[tag] = content

    def chars(data: str) -> None:
        if stack:
            stack[-1][2].append(data)

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = chars
    try:
        parser.Parse(text, True)
    except xml.parsers.expat.ExpatError as err:
        raise TaskFileError(f"{display}: line {err.lineno}: not valid XML "
                            f"({xml.parsers.expat.ErrorString(err.code)})") from None
    yield from records


def _text_lines(text: str) -> Iterator[Record]:
    for number, line in enumerate(text.split("\n"), 1):
        if line.strip():
            yield Record(f"line {number}", {"text": line})


def read_records(path: Path, display: str, fmt: str, records: str | None = None,
                 columns: tuple[str, ...] | None = None) -> Iterator[Record]:
    """The records of one task file in format ``fmt``; ``records`` is the dotted path to the
    records inside a JSON document, ``columns`` the names of a headerless CSV/TSV's columns."""
    if fmt == "parquet":
        yield from _parquet_rows(path, display)
    elif fmt in ("csv", "tsv"):
        yield from _table_rows(path, display, "," if fmt == "csv" else "\t", columns)
    elif fmt == "jsonl":
        yield from _json_lines(_text(path, display), display)
    elif fmt == "json":
        yield from _json_document(_text(path, display), display, records)
    elif fmt == "xml":
        yield from _xml_records(_text(path, display), display)
    else:
        yield from _text_lines(_text(path, display))


def field_values(value: dict[str, Any], path: str, where: str, display: str) -> list[str]:
    """The texts at a dotted ``path`` of a record (lists traversed, numbers as text, nulls
    skipped); a missing key raises :class:`TaskFileError` naming it."""
    out = []
    try:
        found = list(_walk(value, path.split("."), "", display))
    except MissingField:
        raise MissingField(f"{display}: {where}: missing field {path!r}") from None
    except RecursionError:
        raise _too_deep(display, f"{where}: field {path!r}") from None
    for _, item in found:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, int | float) and not isinstance(item, bool):
            out.append(str(item))
        elif item is not None:
            raise TaskFileError(f"{display}: {where}: field {path!r} holds "
                                f"{type(item).__name__}, expected text")
    return out
