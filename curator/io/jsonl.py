"""JSONL reader and writer: plain, .gz, .zst, .bz2 and .xz, through fsspec.

The reader parses blocks of whole lines with Arrow's multi-threaded JSON parser. A block that
Arrow rejects (bad JSON, invalid UTF-8, mixed types), or that holds a line without a string
text, is re-read line by line so that only the bad lines fail, each with its file, line, byte
offset and reason. Both paths give the same values: strings Arrow would read as timestamps stay
strings, and ids are read as the line-by-line path reads them.

Bounded (docs/limits.md): a line longer than ``max_line_bytes`` fails unread, one nested deeper
than ``MAX_JSON_DEPTH`` fails (Arrow's parser never sees it: it crashes on deep nesting), and
decompression stops where the file expands more than ``max_expansion_ratio`` times. A 0-byte
file fails as a whole. Each failure names its file and position; the other lines and files go on.
"""

from __future__ import annotations

import gzip
import mmap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.json as pj

from curator.batch import Failure, Shard, SourceBatch
from curator.io.files import file_failure, is_empty_file
from curator.io.records import ColumnMap, table_from_rows
from curator.io.schema import column_order
from curator.io.streams import MAX_EXPANSION_RATIO, DamagedInput, iter_decompressed

ARROW_BLOCK = 8 << 20
EXCERPT = 1 << 16
#: Deepest nesting of arrays and objects a line may have (Arrow's parser crashes the process on
#: a few thousand levels).
MAX_JSON_DEPTH = 100
#: Most object keys a line may have, nested ones counted (each is a column to every stage and
#: writer: 10,000 cost ~1 s end to end).
MAX_JSON_FIELDS = 10_000
_SLICE = 256 << 10
_DEPTH_STEP = np.zeros(256, np.int8)
_DEPTH_STEP[list(b"[{")] = 1
_DEPTH_STEP[list(b"]}")] = -1


def _valid_utf8(block: pa.Buffer) -> bool:
    offsets = pa.array([0, block.size], pa.int64()).buffers()[1]
    binary = pa.Array.from_buffers(pa.large_binary(), 1, [None, offsets, block])
    try:
        binary.cast(pa.large_string())
    except pa.ArrowInvalid:
        return False
    return True


def _marks(block: bytes | memoryview) -> tuple[np.ndarray, np.ndarray]:
    """Positions of the newlines and of the opening brackets of ``block``, found a slice at a
    time in small buffers that stay in cache (~3 times faster than passes over the block)."""
    data = np.frombuffer(block, np.uint8)
    step = min(_SLICE, max(1, len(data)))
    scratch, found = np.empty(step, np.uint8), np.empty(step, bool)
    ends, opens = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
    for start in range(0, len(data), step):
        part = data[start:start + step]
        n = len(part)
        np.equal(part, 10, out=found[:n])
        ends.append(np.flatnonzero(found[:n]) + start)
        np.bitwise_or(part, 0x20, out=scratch[:n])  # "[" is "{" less 0x20
        np.equal(scratch[:n], ord("{"), out=found[:n])
        opens.append(np.flatnonzero(found[:n]) + start)
    return np.concatenate(ends), np.concatenate(opens)


def _within_bounds(block: bytes | memoryview,
                   marks: tuple[np.ndarray, np.ndarray] | None = None) -> bool:
    """Whether every line of ``block`` is nested at most ``MAX_JSON_DEPTH`` deep and has at most
    ``MAX_JSON_FIELDS`` keys, brackets and colons in strings counted too (so a line that passes
    surely does; one that fails is looked at parsed). ``marks``: its :func:`_marks`."""
    data = np.frombuffer(block, np.uint8)
    ends, opens = _marks(block) if marks is None else marks
    bounds = np.concatenate(([0], ends + 1, [len(data)]))
    lengths = np.diff(bounds)
    for line in np.flatnonzero(lengths > 5 * MAX_JSON_FIELDS):  # a key takes 5 bytes or more
        if np.count_nonzero(data[bounds[line]:bounds[line + 1]] == ord(":")) > MAX_JSON_FIELDS:
            return False
    if len(opens) <= MAX_JSON_DEPTH:
        return True
    for line in np.flatnonzero(np.diff(np.searchsorted(opens, bounds)) > MAX_JSON_DEPTH):
        steps = _DEPTH_STEP[data[bounds[line]:bounds[line + 1]]]  # lines with many brackets
        if np.cumsum(steps, dtype=np.int64).max() > MAX_JSON_DEPTH:
            return False
    return True


def _json_shape(value: object) -> tuple[int, int]:
    """The nesting depth (0 for a scalar) and the number of object keys, nested ones counted,
    of a parsed JSON value; without recursion."""
    deepest, keys, stack = 0, 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            keys += len(item)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
        else:
            continue
        deepest = max(deepest, depth + 1)
    return deepest, keys


def _leaf_fields(type_: pa.DataType) -> int:
    """Fields of a type, struct fields (in lists too) counted."""
    if pa.types.is_struct(type_):
        return sum(1 + _leaf_fields(type_.field(i).type) for i in range(type_.num_fields))
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        return _leaf_fields(type_.value_type)
    return 0


def _nonblank_line_numbers(block: memoryview, first_line: int) -> np.ndarray:
    """Line numbers of the lines of ``block`` that hold something other than whitespace."""
    data = np.frombuffer(block, dtype=np.uint8)
    ends = np.flatnonzero(data == 10)
    if data[-1] != 10:
        ends = np.append(ends, len(data))
    starts = np.concatenate(([0], ends[:-1] + 1))
    solid = np.concatenate(([0], np.cumsum(~np.isin(data, (9, 10, 13, 32)))))
    has_content = solid[ends] - solid[starts] > 0
    return first_line + np.flatnonzero(has_content)


class _BlockParser:
    """Turns a block of whole JSONL lines into a normalised table plus failures."""

    def __init__(self, stage: str, shard: Shard, columns: ColumnMap, max_line_bytes: int) -> None:
        self.stage, self.shard, self.columns = stage, shard, columns
        self.max_line_bytes = max_line_bytes
        # Arrow rejects lines longer than its block: those go line by line, where the limit is
        # checked, so the limit holds on both paths.
        self.read_options = pj.ReadOptions(block_size=min(ARROW_BLOCK, max_line_bytes))
        self.parse_options = pj.ParseOptions(
            explicit_schema=pa.schema([(columns.text_field, pa.string())]),
            unexpected_field_behavior="infer",
        )

    def parse(self, block: memoryview, first_line: int, offset: int,
              marks: tuple[np.ndarray, np.ndarray]) -> SourceBatch:
        """Parse ``block`` (whole lines; ``marks``: its :func:`_marks`)."""
        newlines = len(marks[0])
        buffer = pa.py_buffer(block)
        table = None
        if _valid_utf8(buffer) and _within_bounds(block, marks):
            table = self._arrow(buffer)
        if table is not None and \
                sum(1 + _leaf_fields(t) for t in table.schema.types) > MAX_JSON_FIELDS:
            table = None  # wide lines: counted line by line
        if table is not None:
            n_lines = newlines + (0 if block[-1] == 10 else 1)
            if table.num_rows == n_lines:
                lines = np.arange(first_line, first_line + n_lines)
            else:
                lines = _nonblank_line_numbers(block, first_line)
            if len(lines) == table.num_rows:
                batch = self.columns.normalise(table, lines, self.stage, self.shard)
                batch.failed = self._worded(batch.failed, block, first_line, offset)
                return batch
        return self._line_by_line(block, first_line, offset)

    def _worded(self, failures: list[Failure], block: memoryview, first_line: int,
                offset: int) -> list[Failure]:
        """The lines Arrow's path failed (no text, or null) as the line-by-line path words
        them, with their offsets."""
        if not failures:
            return failures
        data = np.frombuffer(block, np.uint8)
        starts = np.concatenate(([0], np.flatnonzero(data == 10) + 1, [len(data) + 1]))
        worded = []
        for failure in failures:
            i = failure.line - first_line
            line = bytes(block[starts[i]:starts[i + 1] - 1])
            _, error, reason = self._record(line)
            worded.append(self.failure(error or failure.error, failure.line,
                                       offset + int(starts[i]), line, reason or failure.reason))
        return worded

    def _arrow(self, block: pa.Buffer) -> pa.Table | None:
        """Arrow's parse of ``block``; None where Arrow rejects it, or where its types would
        make values differ from the line-by-line parse's: a reparse reads timestamps as the
        strings they are and ids as strings, failing (None) if any id is not a string."""
        table = self._read(block, self.parse_options)
        if table is None:
            return None
        explicit = _strings_where_inferred(table.schema, self.columns.id_field)
        if explicit is None:
            return table
        return self._read(block, pj.ParseOptions(explicit_schema=explicit,
                                                 unexpected_field_behavior="infer"))

    def _read(self, block: pa.Buffer, options: pj.ParseOptions) -> pa.Table | None:
        try:
            return pj.read_json(pa.BufferReader(block), self.read_options, options)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None

    def _line_by_line(self, block: memoryview, first_line: int, offset: int) -> SourceBatch:
        rows, lines, failed = [], [], []
        position = offset
        for number, line in enumerate(bytes(block).split(b"\n"), start=first_line):
            start, position = position, position + len(line) + 1
            if not line.strip():
                continue
            if len(line) > self.max_line_bytes:
                failed.append(self.failure(f"line longer than max_line_bytes="
                                           f"{self.max_line_bytes}; skipped", number, start, line,
                                           "line_too_long"))
                continue
            record, error, reason = self._record(line)
            if error is None:
                rows.append(record)
                lines.append(number)
            else:
                failed.append(self.failure(error, number, start, line, reason))
        table, notes = table_from_rows(rows, self.columns)
        positions = np.asarray(lines, dtype=np.int64)
        batch = self.columns.normalise(table, positions, self.stage, self.shard)
        batch.failed[:0] = failed
        batch.notes.update(notes)
        return batch

    def _record(self, line: bytes) -> tuple[dict, None, None] | tuple[None, str, str]:
        """One line as a record with a string text, or (None, error, reason)."""
        try:
            record = orjson.loads(line)  # strict: rejects invalid UTF-8
        except orjson.JSONDecodeError as err:
            return None, *_describe_json_error(line, err)
        if not isinstance(record, dict):
            return None, f"expected a JSON object, found {_json_type(record)}", "not_an_object"
        if not _within_bounds(line):
            depth, keys = _json_shape(record)
            if depth > MAX_JSON_DEPTH:
                return None, f"nested deeper than MAX_JSON_DEPTH={MAX_JSON_DEPTH}", "too_deep"
            if keys > MAX_JSON_FIELDS:
                return None, f"{keys} keys, more than MAX_JSON_FIELDS={MAX_JSON_FIELDS}", \
                    "too_many_fields"
        name = self.columns.text_field
        if name not in record:
            return None, f"no field {name!r} (fields: {', '.join(list(record)[:20])})", "no_text"
        text = record[name]
        if text is None:
            return None, f"field {name!r} is null", "null_text"
        if not isinstance(text, str):
            return None, f"field {name!r} is {_json_type(text)}, expected a string", \
                "bad_text_type"
        return record, None, None

    def failure(self, error: str, line: int, offset: int, raw: bytes | memoryview,
                reason: str) -> Failure:
        excerpt = bytes(raw[:EXCERPT]).decode("utf-8", "backslashreplace")
        return Failure(stage=self.stage, error=error, file=self.shard.label, line=line,
                       offset=offset, excerpt=excerpt, reason=reason)


def _json_type(value: object) -> str:
    """The JSON name of a parsed value's type."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return {dict: "an object", list: "an array", str: "a string"}.get(type(value), "null")


def _strings_where_inferred(schema: pa.Schema, id_field: str) -> pa.Schema | None:
    """``schema`` with every timestamp Arrow inferred from a string, and an id column that is
    not all strings or all ints, read as strings; None when there is none."""
    fields = [f.with_type(pa.string()) if f.name == id_field and not _plain_id(f.type)
              else f.with_type(_no_timestamps(f.type)) for f in schema]
    explicit = pa.schema(fields)
    return None if explicit.equals(schema) else explicit


def _plain_id(type_: pa.DataType) -> bool:
    """Ids of this type read as the line-by-line parse reads them."""
    return pa.types.is_string(type_) or pa.types.is_int64(type_) or pa.types.is_null(type_)


def _no_timestamps(type_: pa.DataType) -> pa.DataType:
    if pa.types.is_timestamp(type_):
        return pa.string()
    if pa.types.is_struct(type_):
        return pa.struct([type_.field(i).with_type(_no_timestamps(type_.field(i).type))
                          for i in range(type_.num_fields)])
    if pa.types.is_list(type_):
        return pa.list_(_no_timestamps(type_.value_type))
    return type_


def _describe_json_error(line: bytes, err: orjson.JSONDecodeError) -> tuple[str, str]:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as bad:
        return f"invalid UTF-8 at byte {bad.start} of the line", "bad_utf8"
    if "depth limit" in str(err) or "recursion" in str(err):
        return f"nested deeper than MAX_JSON_DEPTH={MAX_JSON_DEPTH}", "too_deep"
    return f"invalid JSON: {err}", "bad_json"


def read_jsonl_batches(shard: Shard, batch_bytes: int, stage: str, columns: ColumnMap,
                       max_line_bytes: int, max_expansion_ratio: float = MAX_EXPANSION_RATIO,
                       ) -> Iterator[SourceBatch]:
    """Stream a JSONL file (plain, .gz, .zst, .bz2, .xz; through fsspec) in blocks of about
    ``batch_bytes`` of whole lines; bounded as the module docstring says."""
    if is_empty_file(shard):
        yield file_failure(shard, stage, "empty file (0 bytes)", "empty_file")
        return
    parser = _BlockParser(stage, shard, columns, max_line_bytes)
    splitter = _LineSplitter(batch_bytes, max_line_bytes)
    try:
        for chunk in iter_decompressed(shard.path, read_size=batch_bytes,
                                       max_ratio=max_expansion_ratio):
            yield from splitter.feed(chunk, parser)
    except DamagedInput as damage:
        yield from splitter.finish(parser, damage)
    else:
        yield from splitter.finish(parser, None)


def _newline_after(data: memoryview, start: int) -> int:
    """Position of the first newline at or after ``start``, or -1."""
    arr = np.frombuffer(data, dtype=np.uint8)
    step = 1 << 16
    while start < len(arr):
        hits = np.flatnonzero(arr[start:start + step] == 10)
        if hits.size:
            return start + int(hits[0])
        start, step = start + step, min(step * 4, 1 << 24)
    return -1


def _newline_before(data: memoryview, end: int, start: int = 0) -> int:
    """Position of the last newline in ``data[start:end]``, or -1."""
    arr = np.frombuffer(data, dtype=np.uint8)
    step = 1 << 16
    while end > start:
        low = max(start, end - step)
        hits = np.flatnonzero(arr[low:end] == 10)
        if hits.size:
            return low + int(hits[-1])
        end, step = low, min(step * 4, 1 << 24)
    return -1


class _LineSplitter:
    """Cuts a byte stream into blocks of whole lines of about ``batch_bytes``, without copying
    them out of the stream's buffers (a memory-mapped local file is never copied)."""

    def __init__(self, batch_bytes: int, max_line_bytes: int) -> None:
        self.batch_bytes, self.max_line_bytes = batch_bytes, max_line_bytes
        self.pending: list[memoryview] = []
        self.size, self.line, self.offset = 0, 1, 0
        self.skipping = False  # inside a line longer than max_line_bytes

    def feed(self, chunk: bytes | memoryview, parser: _BlockParser) -> Iterator[SourceBatch]:
        view = memoryview(chunk)
        if self.skipping:
            end = _newline_after(view, 0)
            if end < 0:
                self.offset += len(view)
                return
            self.skipping = False
            self.line, self.offset, view = self.line + 1, self.offset + end + 1, view[end + 1:]
        self.pending.append(view)
        self.size += len(view)
        if self.size < self.batch_bytes:
            return
        data = self._joined()
        start = 0
        while len(data) - start >= self.batch_bytes:
            cut = _newline_before(data, start + self.batch_bytes, start) + 1
            if cut == 0:
                cut = _newline_after(data, start + self.batch_bytes) + 1
                if cut == 0:
                    break
            yield self._block(data[start:cut], parser)
            start = cut
        rest = data[start:]
        if len(rest) > self.max_line_bytes and _newline_after(rest, 0) < 0:
            error = f"line longer than max_line_bytes={self.max_line_bytes}; skipped"
            yield SourceBatch(pa.table({}), [parser.failure(error, self.line, self.offset, rest,
                                                            "line_too_long")])
            self.offset += len(rest)
            self.pending, self.size, self.skipping = [], 0, True
            return
        self.pending, self.size = ([rest] if len(rest) else []), len(rest)

    def _joined(self) -> memoryview:
        if len(self.pending) == 1:
            return self.pending[0]
        return memoryview(b"".join(self.pending))

    def finish(self, parser: _BlockParser, damage: DamagedInput | None) -> Iterator[SourceBatch]:
        if self.skipping:  # inside a line too long, failed already: the lines after it lost
            if damage is not None:
                error = f"{damage}; the lines after line {self.line} are lost"
                yield SourceBatch(pa.table({}), [parser.failure(error, self.line + 1,
                                                                self.offset, b"", damage.reason)])
            return
        data = self._joined() if self.pending else memoryview(b"")
        if damage is None:
            if len(data):
                yield self._block(data, parser)
            return
        cut = _newline_before(data, len(data)) + 1
        if cut:
            yield self._block(data[:cut], parser)
        error = f"{damage}; the record here and any after it are lost"
        yield SourceBatch(pa.table({}), [parser.failure(error, self.line, self.offset, data[cut:],
                                                        damage.reason)])

    def _block(self, block: memoryview, parser: _BlockParser) -> SourceBatch:
        """Parse whole lines and advance the line and offset."""
        marks = _marks(block)
        newlines = len(marks[0])
        batch = parser.parse(block, self.line, self.offset, marks)
        if isinstance(block.obj, mmap.mmap):
            # Parsed: drop the pages from this process (they stay in the page cache), so
            # resident memory does not grow with the file.
            start = self.offset - self.offset % mmap.PAGESIZE
            block.obj.madvise(mmap.MADV_DONTNEED, start, self.offset + len(block) - start)
        self.line += newlines
        self.offset += len(block)
        return batch


class JsonlPartWriter:
    """One shard's JSON Lines file (plain, gzip or zstd), keys in the dataset's column order."""

    def __init__(self, path: Path, compression: str) -> None:
        raw = open(path, "wb")  # noqa: SIM115 (closed in close())
        if compression == "gzip":
            self._out = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0)
        elif compression == "zstd":
            import zstandard

            self._out = zstandard.ZstdCompressor().stream_writer(raw)
        else:
            self._out = raw
        self._raw = raw

    def write(self, table: pa.Table, payload: object = None) -> list[Failure]:
        rows = table.select(column_order(table.column_names)).to_pylist()
        self._out.write(b"".join(orjson.dumps(row) + b"\n" for row in rows))
        return []

    def close(self) -> None:
        self._out.close()
        if not self._raw.closed:
            self._raw.close()
