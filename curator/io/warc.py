"""WARC reading: HTML ``response`` records as documents.

FastWARC parses the file (local or any fsspec URL; gzip detected), HTTP headers included. Where
FastWARC cannot parse a file at all (ARC files, odd framings) warcio reads it instead. A
response's payload is taken as read when it is whole and neither transfer- nor content-encoded
(the common case: one read, no copy of the block); any other response is read again from its
offset the long way: its block read whole and checked against its ``Content-Length``, then its
HTTP message parsed and decoded. A short block (a clipped file, a truncated gzip member) fails
with reason ``truncated_gzip`` / ``truncated_record``; an undecodable HTTP message
(bad chunks, bad gzip) with ``bad_record``. A record whose header
cannot be parsed (a wrong ``Content-Length`` upstream shifts the next header) fails with reason
``bad_record`` (``corrupt_gzip`` where the gzip data is damaged), at the offset of the last good
record; reading resumes at the next record start (``WARC/1.`` or a gzip member) after it.

Documents: ``response`` records with a 2xx status and an HTML Content-Type (text/html,
application/xhtml+xml). Other records are skipped and counted in notes (``skipped_<why>``).
Columns: ``id`` (WARC-Record-ID), ``text`` (the decoded HTML, see :mod:`curator.io.charset`),
``date``, ``url``, ``warc_file``, ``warc_record_id``. Per-document bad input fails with a
reason: ``empty`` (no payload), ``binary_content`` (NUL bytes or mostly undecodable).
Notes: ``replaced_bytes`` (undecodable bytes replaced), ``charset_unknown`` (a label naming no
charset; detection used), ``charset_detected``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pyarrow as pa
from fastwarc.warc import ArchiveIterator, WarcRecordType

from curator.batch import Failure, Shard, SourceBatch
from curator.io.charset import decode_html
from curator.io.files import open_binary

HTML_TYPES = ("text/html", "application/xhtml+xml")
EXCERPT = 2048
RESYNC_WINDOW = 1 << 20
#: A payload with more NUL bytes than this fraction, or more replaced bytes, is not text.
BINARY_FRACTION = 0.01
NUL_SNIFF = 1 << 16  # NULs are looked for in a page's first 64 KB: binary bodies show them at once
REPLACED_FRACTION = 0.2
COLUMNS = ("id", "text", "date", "url", "warc_file", "warc_record_id")
TEXT_SLACK = 4 << 20  # room past batch_bytes for the page that ends a batch


class _Unparsable(Exception):
    """FastWARC could not read a record header at ``offset``."""

    def __init__(self, offset: int, error: str) -> None:
        super().__init__(error)
        self.offset = offset


class _TextColumn:
    """UTF-8 pages copied, as they arrive, into one buffer of Arrow's pool: the page is still in
    the cache from its UTF-8 check (copying all pages at the end reads them again from memory),
    and the pool reuses the memory of batches freed before."""

    def __init__(self, capacity: int) -> None:
        self.data = pa.allocate_buffer(capacity)
        self.view = memoryview(self.data).cast("B")
        self.ends: list[int] = []
        self.size = 0

    def append(self, text: bytes) -> None:
        end = self.size + len(text)
        if end > len(self.view):  # a page past the slack: move to a buffer twice as large
            grown = pa.allocate_buffer(max(2 * len(self.view), end))
            view = memoryview(grown).cast("B")
            view[: self.size] = self.view[: self.size]
            self.view.release()
            self.data, self.view = grown, view
        self.view[self.size:end] = text
        self.ends.append(end)
        self.size = end

    def take(self) -> pa.Array:
        if self.size >= 1 << 31:  # past 32-bit offsets: Arrow splits nothing here, so say so
            raise ValueError(f"a batch of {self.size} bytes of text is over Arrow's 2 GiB")
        offsets = np.zeros(len(self.ends) + 1, np.int32)
        offsets[1:] = self.ends
        self.view.release()
        return pa.Array.from_buffers(pa.string(), len(self.ends),
                                     [None, pa.py_buffer(offsets), self.data.slice(0, self.size)])


class _Batch:
    """Rows being gathered into one SourceBatch of about ``batch_bytes`` of text."""

    def __init__(self, batch_bytes: int) -> None:
        self.rows: dict[str, list] = {c: [] for c in COLUMNS if c not in ("text",
                                                                          "warc_record_id")}
        self.text = _TextColumn(batch_bytes + TEXT_SLACK)
        self.failed: list[Failure] = []
        self.notes: Counter = Counter()

    @property
    def size(self) -> int:
        return self.text.size

    def add(self, row: dict[str, str], text: bytes) -> None:
        """A row and its ``text`` as UTF-8 bytes (Arrow takes them without re-encoding)."""
        for name, values in self.rows.items():
            values.append(row[name])
        self.text.append(text)

    def take(self) -> SourceBatch:
        if not self.rows["id"]:
            return SourceBatch(pa.table({}), self.failed, self.notes)
        columns = {c: pa.array(v, pa.string()) for c, v in self.rows.items()
                   if c != "warc_record_id"}
        columns["warc_record_id"] = columns["id"]  # the same strings: one array, two columns
        columns["text"] = self.text.take()
        return SourceBatch(pa.table({c: columns[c] for c in COLUMNS}), self.failed, self.notes)


class _RecordReader:
    """Turns WARC records into rows, failures and notes for one shard."""

    def __init__(self, shard: Shard, stage: str) -> None:
        self.shard, self.stage = shard, stage
        self.gzip = shard.path.lower().split("?", 1)[0].endswith(".gz")

    def failure(self, reason: str, error: str, offset: int | None, record_id: str | None = None,
                excerpt: bytes = b"") -> Failure:
        return Failure(stage=self.stage, error=f"{reason}: {error}", file=self.shard.label,
                       offset=offset, id=record_id, reason=reason,
                       excerpt=excerpt[:EXCERPT].decode("utf-8", "backslashreplace") or None)

    def record(self, rec, batch: _Batch, place: tuple[int, int] | None) -> None:
        """One FastWARC record into ``batch``. Read with ``parse_http=True`` (``place`` given:
        the byte reading began at and the record's number from there), the common case (an
        HTTP block neither cut short nor transfer- or content-encoded) takes the payload as it
        stands; any other record is read again and taken the long way (:meth:`block_record`),
        so both give the same rows, failures and notes."""
        kind = rec.record_type
        if kind != WarcRecordType.response:
            batch.notes[f"skipped_{kind}"] += 1
            rec.reader.consume()
            return
        if place is None or not rec.is_http:
            self.block_record(rec, batch)
            return
        http = rec.http_headers
        payload = rec.reader.read()
        if (len(payload) < rec.content_length or "Transfer-Encoding" in http
                or "Content-Encoding" in http or "Content-Length" not in rec.headers):
            with _record_again(self.shard.path, rec, *place) as again:
                self.block_record(again, batch)
            return
        self.payload_record(rec, http, payload, batch)

    def block_record(self, rec, batch: _Batch) -> None:
        """A response record whose HTTP message is not parsed yet: its block read whole and
        length-checked, then parsed (undoing transfer and content encodings)."""
        offset = rec.stream_pos  # from the file's start, also when reading began further on
        record_id = rec.headers.get("WARC-Record-ID")
        block = rec.reader.read()
        short = None
        if "Content-Length" not in rec.headers:
            short = "the record header is cut short (no Content-Length)"
        elif len(block) < rec.content_length:
            short = f"the record block has {len(block)} of its {rec.content_length} bytes"
        if short:
            reason = "truncated_gzip" if self.gzip else "truncated_record"
            batch.failed.append(self.failure(reason, short, offset, record_id, block[:EXCERPT]))
            return
        rec.set_bytes_content(block)
        try:
            rec.parse_http(auto_decode="all")
            payload = rec.reader.read()
        except (OSError, ValueError) as err:
            batch.failed.append(self.failure("bad_record", f"unreadable HTTP message: {err}",
                                             offset, record_id, block[:EXCERPT]))
            return
        self.payload_record(rec, rec.http_headers if rec.is_http else None, payload, batch)

    def payload_record(self, rec, http, payload: bytes, batch: _Batch) -> None:
        """A response whose HTTP payload is read: a document, or skipped by status or type."""
        status = http.status_code if http is not None else None
        if status is None or not 200 <= status < 300:
            batch.notes["skipped_status"] += 1
        elif (rec.http_content_type or "").lower() not in HTML_TYPES:
            batch.notes["skipped_not_html"] += 1
        else:
            headers = rec.headers
            self.document(payload, http.get("Content-Type"), rec.stream_pos,
                          headers.get("WARC-Record-ID"),
                          _target_uri(headers.get("WARC-Target-URI")), headers.get("WARC-Date"),
                          batch)

    def document(self, payload: bytes, content_type: str | None, offset: int,
                 record_id: str | None, url: str | None, date: str | None,
                 batch: _Batch) -> None:
        """Decode one HTML payload into a row, or fail it with its reason."""
        if not record_id:
            batch.failed.append(self.failure("bad_record", "no WARC-Record-ID", offset))
            return
        if not payload or payload.isspace():  # (strip() would copy most pages whole)
            batch.failed.append(self.failure("empty", "the response has no payload", offset,
                                             record_id))
            return
        if (payload.find(b"\0", 0, NUL_SNIFF) >= 0
                and payload.count(0) > BINARY_FRACTION * len(payload)):
            batch.failed.append(self.failure("binary_content", "NUL bytes in a page labelled "
                                             "HTML", offset, record_id, payload[:256]))
            return
        decoded = decode_html(payload, _charset_of(content_type))
        if decoded.replaced_bytes > REPLACED_FRACTION * len(payload):
            batch.failed.append(self.failure(
                "binary_content", f"{decoded.replaced_bytes} of {len(payload)} bytes are not "
                f"{decoded.encoding}", offset, record_id, payload[:256]))
            return
        if decoded.replaced_bytes:
            batch.notes["replaced_bytes"] += decoded.replaced_bytes
        if decoded.unknown_label:
            batch.notes["charset_unknown"] += 1
        if decoded.source == "detected":
            batch.notes["charset_detected"] += 1
        batch.add({"id": record_id, "date": date, "url": url, "warc_file": self.shard.label},
                  decoded.utf8)


def _target_uri(value: str | None) -> str | None:
    """The URI without the angle brackets some writers (wget) put around it."""
    return value.strip().removeprefix("<").removesuffix(">") if value else value


def _charset_of(content_type: str | None) -> str | None:
    if not content_type:
        return None
    for part in content_type.split(";")[1:]:
        key, _, value = part.partition("=")
        if key.strip().lower() == "charset":
            return value.strip().strip("\"'") or None
    return None


def read_warc_batches(shard: Shard, batch_bytes: int, stage_name: str) -> Iterator[SourceBatch]:
    """Stream the HTML documents of the WARC file ``shard.path`` (local or fsspec URL, plain or
    gzip) in batches of about ``batch_bytes`` of text; see the module docstring."""
    reader = _RecordReader(shard, stage_name)
    batch = _Batch(batch_bytes)
    base, first, resumed = 0, True, False
    while base is not None:
        passed = 0
        try:
            for rec, place in _fastwarc_records(shard.path, base):
                first, passed = False, passed + 1
                reader.record(rec, batch, place)
                if batch.size >= batch_bytes:
                    yield batch.take()
                    batch = _Batch(batch_bytes)
            base = None
        except _Unparsable as bad:
            if first and bad.offset == 0:
                yield from _warcio_fallback(reader, batch, batch_bytes, bad)
                return
            if passed or not resumed:  # a damaged stretch is one failure, however long
                reason = "corrupt_gzip" if "gzip" in str(bad).lower() else "bad_record"
                batch.failed.append(reader.failure(reason, str(bad), bad.offset))
            base = _next_record_start(shard.path, bad.offset, reader.gzip)
            first, resumed = False, True
    if batch.rows["id"] or batch.failed or batch.notes:
        yield batch.take()


def _fastwarc_records(path: str, base: int):
    """FastWARC's records of ``path`` from byte ``base``, each with its place ``(base, number)``
    where its HTTP message is parsed, else None; a parse error as ``_Unparsable``. Records are
    read with ``parse_http=True``; where that fails, the stretch from the last good record is
    read again without HTTP parsing, so that only a damaged WARC header (not an odd HTTP one)
    stops reading."""
    last_start, yielded = base, False
    try:
        for number, rec in enumerate(_records(path, base, parse_http=True)):
            yield rec, (base, number)
            last_start, yielded = rec.stream_pos, True
    except _Unparsable:
        pass
    else:
        return
    records = _records(path, last_start, parse_http=False)
    if yielded:
        next(records, None)  # the last good record, taken already
    for rec in records:
        yield rec, None


def _records(path: str, base: int, parse_http: bool):
    """FastWARC's records of ``path`` from byte ``base``; a parse error as ``_Unparsable``."""
    with open_binary(path) as raw:
        if base:
            raw.seek(base)
        records = iter(ArchiveIterator(raw, parse_http=parse_http))
        last_start = base
        while True:
            try:
                rec = next(records)
            except StopIteration:
                return
            except OSError as err:
                raise _Unparsable(last_start, f"unreadable WARC data after byte {last_start}: "
                                  f"{err}; the records there are lost, reading resumes at the "
                                  "next record start") from None
            yield rec
            last_start = rec.stream_pos


@contextmanager
def _record_again(path: str, rec, base: int, number: int):
    """Record ``rec`` (the ``number``-th from byte ``base``) read again, its HTTP message
    unparsed: from its offset where that finds it (a record per gzip member, or no gzip), else
    counting from ``base``."""
    offset, record_id = rec.stream_pos, rec.headers.get("WARC-Record-ID")
    records = _records(path, offset, parse_http=False)
    again = next(records, None)
    if again is None or again.stream_pos != offset or \
            again.headers.get("WARC-Record-ID") != record_id:
        records.close()
        records = _records(path, base, parse_http=False)
        for _ in range(number + 1):
            again = next(records)
    try:
        yield again
    finally:
        records.close()


def _next_record_start(path: str, after: int, gzip: bool) -> int | None:
    """Offset of the first record start (a gzip member or ``WARC/``) after ``after``."""
    marker = b"\x1f\x8b\x08" if gzip else b"WARC/1."
    with open_binary(path) as raw:
        raw.seek(after + 1)
        position = after + 1
        while chunk := raw.read(RESYNC_WINDOW + len(marker)):
            hit = chunk.find(marker)
            if hit >= 0:
                return position + hit
            position += RESYNC_WINDOW
            raw.seek(position)
    return None


def _warcio_fallback(reader: _RecordReader, batch: _Batch, batch_bytes: int,
                     why: _Unparsable) -> Iterator[SourceBatch]:
    """Read a file FastWARC cannot parse (ARC, odd framing) with warcio."""
    from warcio.archiveiterator import ArchiveIterator as WarcioIterator
    from warcio.exceptions import ArchiveLoadFailed

    batch.notes["read_with_warcio"] += 1
    offset = 0
    try:
        with open_binary(reader.shard.path) as raw:
            records = WarcioIterator(raw)
            for rec in records:
                _warcio_record(reader, rec, lambda: records.get_record_offset(), batch)
                if batch.size >= batch_bytes:
                    yield batch.take()
                    batch = _Batch(batch_bytes)
    except (ArchiveLoadFailed, OSError, ValueError, EOFError) as err:
        batch.failed.append(reader.failure("bad_record", f"{why}; warcio: {err}", offset))
    yield batch.take()


def _warcio_record(reader: _RecordReader, rec, offset_of, batch: _Batch) -> None:
    """One warcio record into ``batch``. ARC records have no record id: theirs is
    ``label@offset``, the same in every run."""
    if rec.rec_type != "response":
        batch.notes[f"skipped_{rec.rec_type}"] += 1
        return
    headers = rec.http_headers
    status = int(headers.get_statuscode() or 0) if headers else 0
    content_type = headers.get_header("Content-Type") if headers else None
    if not 200 <= status < 300:
        batch.notes["skipped_status"] += 1
    elif (content_type or "").split(";")[0].strip().lower() not in HTML_TYPES:
        batch.notes["skipped_not_html"] += 1
    else:
        payload = rec.content_stream().read()
        offset = offset_of()
        if rec.format == "arc":
            record_id, url = f"{reader.shard.label}@{offset}", rec.rec_headers.get_header("uri")
            date = _arc_date(rec.rec_headers.get_header("archive-date"))
        else:
            record_id = rec.rec_headers.get_header("WARC-Record-ID")
            url = _target_uri(rec.rec_headers.get_header("WARC-Target-URI"))
            date = rec.rec_headers.get_header("WARC-Date")
        reader.document(payload, content_type, offset, record_id, url, date, batch)


def _arc_date(stamp: str | None) -> str | None:
    """ARC's ``20140216050221`` as WARC-Date's ``2014-02-16T05:02:21Z``."""
    if not stamp or len(stamp) < 14 or not stamp[:14].isdigit():
        return stamp
    s = stamp
    return f"{s[:4]}-{s[4:6]}-{s[6:8]}T{s[8:10]}:{s[10:12]}:{s[12:14]}Z"
