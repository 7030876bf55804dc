"""WARC reading: HTML ``response`` records as documents.

FastWARC parses the file (local or any fsspec URL; gzip detected), HTTP headers included. ARC
files (``filedesc://`` first) are read with warcio instead. A response's payload is taken as
read when it is whole and neither transfer- nor content-encoded (the common case: one read, no
copy of the block); any other response is read again from its offset the long way: its block
read whole and checked against its ``Content-Length``, its chunks undone, then its
Content-Encoding (gzip, deflate, br, zstd) inflated under the limits below. A short block (a
clipped file, a truncated gzip member) fails with reason ``truncated_gzip`` /
``truncated_record``; an undecodable HTTP message (bad chunks, bad gzip) with ``bad_record``.

Limits (:class:`WarcLimits`; docs/web-extraction.md, "WARC"): a record whose block is over
``max_record_bytes`` is never read or inflated: reading resumes at the next record start after
it, and an HTML response fails with ``record_too_large`` (other records are skipped as usual);
a payload whose Content-Encoding inflates past ``max_record_bytes``, or more than
``max_ratio`` times its size (past ``ratio_floor``), fails with ``decompression_bomb``.

Damaged framing: where FastWARC cannot read the next record header, the record before it is
checked (its block must end in ``\r\n\r\n`` where its ``Content-Length`` says). A record whose
framing is damaged (a wrong ``Content-Length``) is never kept: what it gave is taken back and it
fails with ``bad_record``. Reading resumes at the next record start in either framing (a gzip
member or a ``WARC/1.`` header, each checked before it is trusted); a stretch of bytes in which
no record can be read is one failure (``bad_record``, ``corrupt_gzip`` where the gzip data is
damaged) at its offset. Every record is counted once. Records that carry ``WARC-Truncated``
(cut by the crawler, not damaged) are kept and counted in notes (``warc_truncated``).

Documents: ``response`` records with a 2xx status and an HTML Content-Type (text/html,
application/xhtml+xml). Other records are skipped and counted in notes (``skipped_<why>``); a
record without a WARC-Type (a damaged header) fails with ``bad_record``.
Columns: ``id`` (WARC-Record-ID), ``text`` (the decoded HTML, see :mod:`curator.io.charset`),
``date``, ``url``, ``warc_file``, ``warc_record_id``. Per-document bad input fails with a
reason: ``empty`` (no payload), ``binary_content`` (NUL bytes or mostly undecodable).
Notes: ``replaced_bytes`` (undecodable bytes replaced), ``charset_unknown`` (a label naming no
charset; detection used), ``charset_detected``.
"""

from __future__ import annotations

import io
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from fastwarc.stream_io import BrotliReader, ZstdReader
from fastwarc.warc import ArchiveIterator, WarcRecordType

from curator.batch import Failure, Shard, SourceBatch
from curator.io.charset import decode_html
from curator.io.files import file_failure, is_empty_file, open_binary

HTML_TYPES = ("text/html", "application/xhtml+xml")
EXCERPT = 2048
RESYNC_WINDOW = 1 << 20
GZIP_MAGIC = b"\x1f\x8b\x08"
WARC_MAGIC = b"WARC/1."
MAX_HEADER = 32 << 10  # a WARC header longer than this is no header (FastWARC's own bound)
#: A payload with more NUL bytes than this fraction, or more replaced bytes, is not text.
BINARY_FRACTION = 0.01
NUL_SNIFF = 1 << 16  # NULs are looked for in a page's first 64 KB: binary bodies show them at once
REPLACED_FRACTION = 0.2
COLUMNS = ("id", "text", "date", "url", "warc_file", "warc_record_id")
TEXT_SLACK = 4 << 20  # room past batch_bytes for the page that ends a batch
_CONTENT_LENGTH = re.compile(rb"(?im)^content-length:[ \t]*(\d+)[ \t]*\r?$")


@dataclass(frozen=True)
class WarcLimits:
    """What one record may cost (docs/web-extraction.md, "WARC")."""

    max_record_bytes: int = 64 << 20  # an HTML response's block, and its decoded payload
    max_ratio: float = 100.0  # inflated / encoded bytes of an HTTP body
    ratio_floor: int = 1 << 20  # ratios are checked once this much has been inflated


class _Unparsable(Exception):
    """FastWARC could not read a record header after the record at ``offset`` (or at
    ``offset`` itself, when no record was read from where reading began)."""

    def __init__(self, offset: int, error: str) -> None:
        super().__init__(error)
        self.offset = offset


class _Lost(Exception):
    """The record at ``offset`` cannot be read whole (``reason``); reading resumes after it.
    ``failed``: its failure is recorded already."""

    def __init__(self, offset: int, reason: str, error: str, failed: bool = False) -> None:
        super().__init__(error)
        self.offset, self.reason, self.failed = offset, reason, failed


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

    def pop(self) -> None:
        self.ends.pop()
        self.size = self.ends[-1] if self.ends else 0

    def take(self) -> pa.Array:
        if self.size >= 1 << 31:  # past 32-bit offsets: Arrow splits nothing here, so say so
            raise ValueError(f"a batch of {self.size} bytes of text is over Arrow's 2 GiB")
        offsets = np.zeros(len(self.ends) + 1, np.int32)
        offsets[1:] = self.ends
        self.view.release()
        return pa.Array.from_buffers(pa.string(), len(self.ends),
                                     [None, pa.py_buffer(offsets), self.data.slice(0, self.size)])


class _Batch:
    """Rows being gathered into one SourceBatch of about ``batch_bytes`` of text. What the
    record being read adds can be taken back (:meth:`retract`) until the next one begins."""

    def __init__(self, batch_bytes: int) -> None:
        self.rows: dict[str, list] = {c: [] for c in COLUMNS if c not in ("text",
                                                                          "warc_record_id")}
        self.text = _TextColumn(batch_bytes + TEXT_SLACK)
        self.failed: list[Failure] = []
        self.notes: Counter = Counter()
        self._mark: tuple[int, int, list[tuple[str, int]]] = (0, 0, [])

    @property
    def size(self) -> int:
        return self.text.size

    def begin_record(self) -> None:
        self._mark = (len(self.rows["id"]), len(self.failed), [])

    def add(self, row: dict[str, str], text: bytes) -> None:
        """A row and its ``text`` as UTF-8 bytes (Arrow takes them without re-encoding)."""
        for name, values in self.rows.items():
            values.append(row[name])
        self.text.append(text)

    def fail(self, failure: Failure) -> None:
        self.failed.append(failure)

    def note(self, key: str, n: int = 1) -> None:
        self.notes[key] += n
        self._mark[2].append((key, n))

    def retract(self) -> None:
        """Take back what the record being read added (its framing turned out damaged)."""
        rows, failed, notes = self._mark
        while len(self.rows["id"]) > rows:
            for values in self.rows.values():
                values.pop()
            self.text.pop()
        del self.failed[failed:]
        for key, n in notes:
            self.notes[key] -= n
        self.notes = +self.notes
        self.begin_record()

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

    def __init__(self, shard: Shard, stage: str, limits: WarcLimits) -> None:
        self.shard, self.stage, self.limits = shard, stage, limits
        self.gzip = shard.path.lower().split("?", 1)[0].endswith(".gz")
        self.last = None  # the record read last

    def failure(self, reason: str, error: str, offset: int | None, record_id: str | None = None,
                excerpt: bytes = b"") -> Failure:
        return Failure(stage=self.stage, error=f"{reason}: {error}", file=self.shard.label,
                       offset=offset, id=record_id, reason=reason,
                       excerpt=excerpt[:EXCERPT].decode("utf-8", "backslashreplace") or None)

    def record(self, rec, gzip: bool, batch: _Batch, place: tuple[int, int] | None) -> None:
        """One FastWARC record into ``batch``. Read with ``parse_http=True`` (``place`` given:
        the byte reading began at and the record's number from there), the common case (an
        HTTP block neither cut short nor transfer- or content-encoded) takes the payload as it
        stands; any other record is read again and taken the long way (:meth:`block_record`),
        so both give the same rows, failures and notes."""
        batch.begin_record()
        self.gzip = gzip
        offset, kind = rec.stream_pos, rec.record_type
        self.last = rec
        if kind != WarcRecordType.response:
            if "WARC-Type" not in rec.headers:
                batch.fail(self.failure("bad_record", "the record header has no WARC-Type (a "
                                        "damaged header)", offset, self.record_id))
                self.skip(rec, batch, None)
                return
            self.skip(rec, batch, f"skipped_{kind}")
            return
        http = rec.http_headers if place is not None and rec.is_http else None
        if http is not None and (why := _skipped(http.status_code, rec.http_content_type)):
            self.skip(rec, batch, why)
            return
        if rec.content_length > self.limits.max_record_bytes:
            batch.fail(self.failure("record_too_large", f"a block of {rec.content_length} "
                                    f"bytes, over max_record_bytes="
                                    f"{self.limits.max_record_bytes}", offset,
                                    self.record_id))
            self.skip(rec, batch, None)
            return
        if http is None:
            self.block_record(rec, batch)
            return
        payload = _read(rec, self.gzip)
        if (len(payload) < rec.content_length or "Transfer-Encoding" in http
                or "Content-Encoding" in http or "Content-Length" not in rec.headers):
            with _record_again(self.shard.path, rec, *place) as again:
                self.block_record(again, batch)
            return
        self.payload_record(rec, http, payload, batch)

    @property
    def record_id(self) -> str | None:
        """The WARC-Record-ID of the record read last (looked up only where a failure needs
        it: a header lookup costs microseconds)."""
        return None if self.last is None else self.last.headers.get("WARC-Record-ID")

    def skip(self, rec, batch: _Batch, note: str | None) -> None:
        """Read past the rest of ``rec``'s block without keeping it, and count ``note``. A block
        over ``max_record_bytes`` is never inflated: ``_Lost`` (reading resumes at the next
        record start after it)."""
        if note:
            batch.note(note)
        if rec.content_length > self.limits.max_record_bytes:
            raise _Lost(rec.stream_pos, "record_too_large", "", failed=True)
        try:
            rec.reader.consume()
        except OSError as err:
            batch.retract()
            raise _Lost(rec.stream_pos, _damage_reason(err, self.gzip),
                        f"unreadable block: {err}") from None

    def block_record(self, rec, batch: _Batch) -> None:
        """A response record whose HTTP message is not parsed yet: its block read whole and
        length-checked, then parsed (chunks undone, content decoded under the limits)."""
        offset = rec.stream_pos  # from the file's start, also when reading began further on
        record_id = rec.headers.get("WARC-Record-ID")
        block = _read(rec, self.gzip)
        short = None
        if "Content-Length" not in rec.headers:
            short = "the record header is cut short (no Content-Length)"
        elif len(block) < rec.content_length:
            short = f"the record block has {len(block)} of its {rec.content_length} bytes"
        if short:
            reason = "truncated_gzip" if self.gzip else "truncated_record"
            batch.fail(self.failure(reason, short, offset, record_id, block[:EXCERPT]))
            return
        rec.set_bytes_content(block)
        try:
            rec.parse_http(auto_decode="transfer")
            payload = rec.reader.read()
            http = rec.http_headers if rec.is_http else None
            if http is not None and (encoding := http.get("Content-Encoding")):
                payload = _decode_content(payload, encoding, self.limits,
                                          "WARC-Truncated" in rec.headers)
        except _Bomb as err:
            batch.fail(self.failure("decompression_bomb", str(err), offset, record_id))
            return
        except (OSError, ValueError, zlib.error) as err:
            batch.fail(self.failure("bad_record", f"unreadable HTTP message: {err}",
                                    offset, record_id, block[:EXCERPT]))
            return
        self.payload_record(rec, http, payload, batch)

    def payload_record(self, rec, http, payload: bytes, batch: _Batch) -> None:
        """A response whose HTTP payload is read: a document, or skipped by status or type."""
        why = _skipped(http.status_code if http is not None else None, rec.http_content_type)
        if why:
            batch.note(why)
            return
        headers = rec.headers
        if "WARC-Truncated" in headers:
            batch.note("warc_truncated")
        self.document(payload, http.get("Content-Type"), rec.stream_pos,
                      headers.get("WARC-Record-ID"), _target_uri(headers.get("WARC-Target-URI")),
                      headers.get("WARC-Date"), batch)

    def document(self, payload: bytes, content_type: str | None, offset: int,
                 record_id: str | None, url: str | None, date: str | None,
                 batch: _Batch) -> None:
        """Decode one HTML payload into a row, or fail it with its reason."""
        if not record_id:
            batch.fail(self.failure("bad_record", "no WARC-Record-ID", offset))
            return
        if not payload or payload.isspace():  # (strip() would copy most pages whole)
            batch.fail(self.failure("empty", "the response has no payload", offset, record_id))
            return
        if (payload.find(b"\0", 0, NUL_SNIFF) >= 0
                and payload.count(0) > BINARY_FRACTION * len(payload)):
            batch.fail(self.failure("binary_content", "NUL bytes in a page labelled HTML",
                                    offset, record_id, payload[:256]))
            return
        decoded = decode_html(payload, _charset_of(content_type))
        if decoded.replaced_bytes > REPLACED_FRACTION * len(payload):
            batch.fail(self.failure(
                "binary_content", f"{decoded.replaced_bytes} of {len(payload)} bytes are not "
                f"{decoded.encoding}", offset, record_id, payload[:256]))
            return
        if decoded.replaced_bytes:
            batch.note("replaced_bytes", decoded.replaced_bytes)
        if decoded.unknown_label:
            batch.note("charset_unknown")
        if decoded.source == "detected":
            batch.note("charset_detected")
        batch.add({"id": record_id, "date": date, "url": url, "warc_file": self.shard.label},
                  decoded.utf8)

    # ------------------------------------------------------------------ damaged framing
    def after_unparsable(self, batch: _Batch, base: int, last: int | None,
                         bad: _Unparsable) -> int | None:
        """FastWARC stopped (``bad``) after the record at ``last`` (None: at ``base``, before
        any record): count what is lost, return where reading resumes (None: nowhere)."""
        path, reason = self.shard.path, _damage_reason(bad, self.gzip)
        if last is None:
            batch.fail(self.failure(reason, f"no WARC record can be read at byte {base}: {bad}",
                                    base))
            return _next_record_start(path, base + 1)
        whole, end = _record_end(path, last, self.limits)
        if not whole:
            batch.retract()
            batch.fail(self.failure("bad_record", "the record does not end where its "
                                    "Content-Length says (a wrong length, or damage after it)",
                                    last, self.record_id))
            return _next_record_start(path, last + 1)
        resume = _next_record_start(path, last + 1 if end is None else end)
        if end is None or (resume != end and not _blank(path, end, resume)):
            where = f"byte {end}" if end is not None else f"the record at byte {last}"
            batch.fail(self.failure(reason, f"unreadable WARC data after {where}: {bad}; the "
                                    "records there are lost", last if end is None else end))
        return resume


def _skipped(status: int | None, content_type: str | None) -> str | None:
    """Why a response is no document (a note), or None."""
    if status is None or not 200 <= status < 300:
        return "skipped_status"
    if (content_type or "").lower() not in HTML_TYPES:
        return "skipped_not_html"
    return None


def _read(rec, gzip: bool) -> bytes:
    """The rest of ``rec``'s block; damaged data below it is ``_Lost``."""
    try:
        return rec.reader.read()
    except OSError as err:
        raise _Lost(rec.stream_pos, _damage_reason(err, gzip),
                    f"unreadable block: {err}") from None


def _damage_reason(err: Exception, gzip: bool) -> str:
    text = str(err).lower()
    return "corrupt_gzip" if gzip and ("gzip" in text or "zlib" in text
                                       or "decompress" in text) else "bad_record"


class _Bomb(ValueError):
    """A payload that inflates past the limits."""


def _decode_content(data: bytes, encoding: str, limits: WarcLimits, truncated: bool) -> bytes:
    """``data`` with its Content-Encoding (``gzip, br``: applied in that order) undone, never
    inflating past ``max_record_bytes`` or ``max_ratio`` times its size. A cut stream is an
    error unless the record says it was cut (``WARC-Truncated``): then what inflates is kept."""
    for name in reversed([e.strip().lower() for e in encoding.split(",")]):
        if name in ("", "identity", "none"):
            continue
        cap = min(limits.max_record_bytes,
                  max(limits.ratio_floor, int(limits.max_ratio * len(data))))
        if name in ("gzip", "x-gzip", "deflate"):
            zlib_header = len(data) > 1 and data[0] & 0x0F == 8 and \
                (data[0] << 8 | data[1]) % 31 == 0
            inflate = zlib.decompressobj(31 if "gzip" in name else 15 if zlib_header else -15)
            out = inflate.decompress(data, cap + 1)
            if not inflate.eof and len(out) <= cap and not truncated:
                raise ValueError(f"the {name} body is cut short")
        elif name in ("br", "zstd"):
            reader = BrotliReader if name == "br" else ZstdReader
            out = reader(io.BytesIO(data)).read(cap + 1)
        else:
            raise ValueError(f"unsupported Content-Encoding: {name}")
        if len(out) > cap:
            raise _Bomb(f"the {name} payload of {len(data)} bytes inflates to more than {cap} "
                        f"(max_record_bytes={limits.max_record_bytes}, "
                        f"max_ratio={limits.max_ratio:g})")
        data = out
    return data


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


def read_warc_batches(shard: Shard, batch_bytes: int, stage_name: str,
                      limits: WarcLimits | None = None) -> Iterator[SourceBatch]:
    """Stream the HTML documents of the WARC file ``shard.path`` (local or fsspec URL, plain or
    gzip) in batches of about ``batch_bytes`` of text; see the module docstring."""
    if is_empty_file(shard):  # one rule for every reader: named and counted, not passed over
        yield file_failure(shard, stage_name, "empty file (0 bytes)", "empty_file")
        return
    reader = _RecordReader(shard, stage_name, limits or WarcLimits())
    batch = _Batch(batch_bytes)
    base: int | None = 0
    while base is not None:
        last = None  # the offset of the record read last from ``base``
        try:
            for rec, place, gzip in _fastwarc_records(shard.path, base):
                if batch.size >= batch_bytes:  # (the record before is whole: this one follows)
                    yield batch.take()
                    batch = _Batch(batch_bytes)
                last = rec.stream_pos
                reader.record(rec, gzip, batch, place)
            base = None
        except _Unparsable as bad:
            if base == 0 and last is None and _is_arc(shard.path):
                yield from _warcio_fallback(reader, batch, batch_bytes, bad)
                return
            base = reader.after_unparsable(batch, base, last, bad)
        except _Lost as lost:
            if not lost.failed:
                batch.fail(reader.failure(lost.reason, str(lost), lost.offset, reader.record_id))
            base = _next_record_start(shard.path, lost.offset + 1)
    if batch.rows["id"] or batch.failed or batch.notes:
        yield batch.take()


def _fastwarc_records(path: str, base: int):
    """FastWARC's records of ``path`` from byte ``base``, each with its place ``(base, number)``
    where its HTTP message is parsed, else None, and whether it is gzip-framed; a parse error as
    ``_Unparsable``. Records are read with ``parse_http=True``; where that fails, the stretch
    from the last good record is read again without HTTP parsing, so that only a damaged WARC
    header (not an odd HTTP one) stops reading."""
    last_start, yielded = base, False
    try:
        for number, (rec, gzip) in enumerate(_records(path, base, parse_http=True)):
            yield rec, (base, number), gzip
            last_start, yielded = rec.stream_pos, True
    except _Unparsable:
        pass
    else:
        return
    records = _records(path, last_start, parse_http=False)
    if yielded:
        next(records, None)  # the last good record, taken already
    for rec, gzip in records:
        yield rec, None, gzip


def _records(path: str, base: int, parse_http: bool):
    """FastWARC's records of ``path`` from byte ``base``, each with whether the file is
    gzip-framed there; a parse error as ``_Unparsable``."""
    with open_binary(path) as raw:
        raw.seek(base)
        gzip = raw.read(2) == GZIP_MAGIC[:2]
        raw.seek(base)
        records = iter(ArchiveIterator(raw, parse_http=parse_http))
        last_start = base
        while True:
            try:
                rec = next(records)
            except StopIteration:
                return
            except OSError as err:
                raise _Unparsable(last_start, str(err)) from None
            yield rec, gzip
            last_start = rec.stream_pos


@contextmanager
def _record_again(path: str, rec, base: int, number: int):
    """Record ``rec`` (the ``number``-th from byte ``base``) read again, its HTTP message
    unparsed: from its offset where that finds it (a record per gzip member, or no gzip), else
    counting from ``base``."""
    offset, record_id = rec.stream_pos, rec.headers.get("WARC-Record-ID")
    records = _records(path, offset, parse_http=False)
    again = next(records, (None, None))[0]
    if again is None or again.stream_pos != offset or \
            again.headers.get("WARC-Record-ID") != record_id:
        records.close()
        records = _records(path, base, parse_http=False)
        for _ in range(number + 1):
            again = next(records)[0]
    try:
        yield again
    finally:
        records.close()


# ---------------------------------------------------------------------------- framing checks
def _header_length(text: bytes) -> tuple[int, int] | None:
    """(header length with its blank line, Content-Length) of a WARC header at the start of
    ``text``; None where there is none."""
    if not (text.startswith(b"WARC/1.0\r\n") or text.startswith(b"WARC/1.1\r\n")):
        return None
    end = text.find(b"\r\n\r\n", 0, MAX_HEADER)
    found = _CONTENT_LENGTH.search(text, 0, end) if end >= 0 else None
    return (end + 4, int(found.group(1))) if found else None


def _record_end(path: str, start: int, limits: WarcLimits) -> tuple[bool, int | None]:
    """Whether the record at ``start`` ends where its Content-Length says (its block followed by
    ``\\r\\n\\r\\n``), and the offset after it (None inside a gzip member that holds more)."""
    with open_binary(path) as raw:
        raw.seek(start)
        head = raw.read(MAX_HEADER)
        if not head.startswith(GZIP_MAGIC):
            found = _header_length(head)
            if found is None:
                return False, None
            end = start + found[0] + found[1]
            raw.seek(end)
            return raw.read(4) == b"\r\n\r\n", end + 4
        inflate, text, cap = zlib.decompressobj(31), bytearray(), limits.max_record_bytes + \
            2 * MAX_HEADER
        packed, chunk = 0, head
        try:
            while chunk and not inflate.eof and len(text) <= cap:
                text += inflate.decompress(chunk, cap + 1 - len(text))
                packed += len(chunk) - len(inflate.unconsumed_tail) - len(inflate.unused_data)
                chunk = inflate.unconsumed_tail or (b"" if inflate.eof else raw.read(1 << 16))
        except zlib.error:
            return False, None
    found = _header_length(bytes(text[:MAX_HEADER]))
    if found is None:
        return False, None
    end = found[0] + found[1]
    if text[end:end + 4] != b"\r\n\r\n":
        return False, None
    return True, start + packed if inflate.eof and len(text) == end + 4 else None


def _starts_record(raw, position: int) -> bool:
    """Whether a WARC record (plain, or a gzip member holding one) starts at ``position``."""
    raw.seek(position)
    head = raw.read(MAX_HEADER)
    if head.startswith(GZIP_MAGIC):
        try:
            head = zlib.decompressobj(31).decompress(head, MAX_HEADER)
        except zlib.error:
            return False
    return _header_length(head) is not None


def _next_record_start(path: str, after: int) -> int | None:
    """Offset of the first record start at or after ``after``: a gzip member or a ``WARC/1.``
    header, either checked before it is trusted."""
    with open_binary(path) as raw:
        position = after
        while True:
            raw.seek(position)
            chunk = raw.read(RESYNC_WINDOW + len(WARC_MAGIC))
            if not chunk:
                return None
            hits = sorted(hit for marker in (GZIP_MAGIC, WARC_MAGIC)
                          for hit in _finds(chunk, marker) if hit < RESYNC_WINDOW)
            for hit in hits:
                if _starts_record(raw, position + hit):
                    return position + hit
            position += RESYNC_WINDOW


def _finds(data: bytes, marker: bytes) -> Iterator[int]:
    hit = data.find(marker)
    while hit >= 0:
        yield hit
        hit = data.find(marker, hit + 1)


def _blank(path: str, start: int, stop: int | None) -> bool:
    """Whether the bytes from ``start`` to ``stop`` (the end: None) are only padding."""
    with open_binary(path) as raw:
        raw.seek(start)
        stretch = raw.read(min(stop - start, 1 << 16) if stop is not None else 1 << 16)
        return not stretch.strip(b"\r\n\t \0") and (stop is not None or not raw.read(1))


def _is_arc(path: str) -> bool:
    """Whether the file starts like an ARC file (``filedesc://``, plain or gzip)."""
    with open_binary(path) as raw:
        head = raw.read(1 << 16)
    if head.startswith(GZIP_MAGIC):
        try:
            head = zlib.decompressobj(31).decompress(head, 64)
        except zlib.error:
            return False
    return head.startswith(b"filedesc://")
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
        limit = reader.limits.max_record_bytes
        payload = rec.content_stream().read(limit + 1)  # (decoded: never past the limit)
        offset = offset_of()
        if rec.format == "arc":
            record_id, url = f"{reader.shard.label}@{offset}", rec.rec_headers.get_header("uri")
            date = _arc_date(rec.rec_headers.get_header("archive-date"))
        else:
            record_id = rec.rec_headers.get_header("WARC-Record-ID")
            url = _target_uri(rec.rec_headers.get_header("WARC-Target-URI"))
            date = rec.rec_headers.get_header("WARC-Date")
        if len(payload) > limit:
            batch.fail(reader.failure("record_too_large", f"the payload inflates past "
                                      f"max_record_bytes={limit}", offset, record_id))
            return
        reader.document(payload, content_type, offset, record_id, url, date, batch)


def _arc_date(stamp: str | None) -> str | None:
    """ARC's ``20140216050221`` as WARC-Date's ``2014-02-16T05:02:21Z``."""
    if not stamp or len(stamp) < 14 or not stamp[:14].isdigit():
        return stamp
    s = stamp
    return f"{s[:4]}-{s[4:6]}-{s[6:8]}T{s[8:10]}:{s[10:12]}:{s[12:14]}Z"
