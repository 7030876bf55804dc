"""WARC reading: the real WARC files of the corpus (broken ones included) and built bad input."""

from __future__ import annotations

import gzip
import io
import random
import re
import zlib
from collections import Counter
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator as WarcioIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from curator.batch import Shard
from curator.io.warc import WarcLimits, read_warc_batches
from tests.warc_builder import CORPUS, write_warc

WARCS = CORPUS / "warc"
needs_corpus = pytest.mark.skipif(not WARCS.exists(), reason="shared corpus not staged")


def read(path: Path, batch_bytes: int = 1 << 20, limits: WarcLimits | None = None):
    """Rows, failures and notes of one WARC file."""
    rows, failed, notes = [], [], Counter()
    for batch in read_warc_batches(Shard(0, str(path), label=path.name), batch_bytes, "read_warc",
                                   limits):
        rows += batch.table.to_pylist()
        failed += batch.failed
        notes.update(batch.notes)
    return rows, failed, notes


def warcio_html_responses(path: Path) -> dict[str, str]:
    """Record id -> URL of the 2xx HTML responses, as warcio reads them (the reference)."""
    found = {}
    with open(path, "rb") as f:
        for rec in WarcioIterator(f):
            if rec.rec_type != "response" or rec.http_headers is None:
                continue
            kind = (rec.http_headers.get_header("Content-Type") or "").split(";")[0].strip()
            if kind == "text/html" and rec.http_headers.get_statuscode().startswith("2"):
                found[rec.rec_headers.get_header("WARC-Record-ID")] = \
                    rec.rec_headers.get_header("WARC-Target-URI")
    return found


@needs_corpus
@pytest.mark.parametrize("path", sorted(WARCS.glob("*/*")), ids=lambda p: p.name)
def test_every_corpus_warc_reads_without_an_exception(path):
    rows, failed, _ = read(path, batch_bytes=4096)  # small batches: many batch boundaries
    for row in rows:
        assert row["id"] == row["warc_record_id"] and row["text"] and row["warc_file"] == path.name
    assert all(f.reason and f.file == path.name and f.offset is not None for f in failed)


@needs_corpus
@pytest.mark.parametrize("name", ["commoncrawl/resiliparse-cc-excerpt.warc.gz",
                                  "wget/dolma-sample-0000.warc.gz",
                                  "wget/dolma-sample-0001.warc.gz",
                                  "heritrix/BL-20140325121225068-00000-32090-opera-8443.warc.gz"])
def test_documents_are_the_html_responses_warcio_finds(name):
    rows, failed, notes = read(WARCS / name)
    assert failed == []
    assert {r["id"]: r["url"] for r in rows} == warcio_html_responses(WARCS / name)
    assert notes["skipped_request"] > 0


@needs_corpus
def test_common_crawl_counts_match_the_corpus_readme():
    # README: warcinfo 1, request 17, response 16 (16 HTML), metadata 16
    rows, failed, notes = read(WARCS / "commoncrawl/resiliparse-cc-excerpt.warc.gz")
    assert (len(rows), failed) == (16, [])
    assert (notes["skipped_warcinfo"], notes["skipped_request"], notes["skipped_metadata"]) == \
        (1, 17, 16)


@needs_corpus
def test_a_clipped_gzip_record_fails_with_its_reason_and_position():
    rows, failed, _ = read(WARCS / "edge_cases/resiliparse-clipped.warc.gz")
    assert rows == [] and len(failed) == 1
    assert failed[0].reason == "truncated_gzip" and failed[0].offset == 0
    assert "88275" in failed[0].error  # the record's Content-Length


@needs_corpus
def test_a_record_longer_than_its_content_length_fails_once_and_reading_goes_on():
    """warcio's 'trunc' example: the response's block has 2 bytes more than its Content-Length
    says. It used to be kept and failed as well (two outcomes for one record)."""
    rows, failed, notes = read(WARCS / "edge_cases/warcio-example-trunc.warc")
    assert rows == []
    assert [(f.reason, f.offset) for f in failed] == [("bad_record", 1197)]
    assert notes["skipped_request"] == 1  # the record after the damage is read


@needs_corpus
def test_an_arc_file_is_read_with_warcio_and_its_ids_are_stable():
    path = WARCS / "edge_cases/warcio-example.arc.gz"
    first, failed, notes = read(path)
    again, _, _ = read(path)
    assert failed == [] and notes["read_with_warcio"] == 1
    assert len(first) == 1 and "Example Domain" in first[0]["text"]
    assert [r["id"] for r in first] == [r["id"] for r in again]


def _page(body: str) -> bytes:
    return f"<html><head><title>t</title></head><body><p>{body}</p></body></html>".encode()


def test_bad_input_is_counted_with_its_reason(tmp_path):
    good = _page("A page of ordinary text. " * 20)
    pages = [("http://a/good", good, "text/html; charset=utf-8"),
             ("http://a/binary", bytes(range(256)) * 40, "text/html"),
             ("http://a/empty", b"", "text/html"),
             ("http://a/unknown", _page("caf\xe9 cr\xe8me"),
              "text/html; charset=x-no-such-charset"),
             ("http://a/image", b"\x89PNG\r\n\x1a\n" + bytes(100), "image/png"),
             ("http://a/latin", _page("caf\xe9").decode().encode("latin-1"), "text/html")]
    ids = write_warc(tmp_path / "bad.warc.gz", pages)
    rows, failed, notes = read(tmp_path / "bad.warc.gz")
    by_url = {r["url"]: r for r in rows}
    assert set(by_url) == {"http://a/good", "http://a/unknown", "http://a/latin"}
    assert {f.reason: f.id for f in failed} == {"binary_content": ids[1], "empty": ids[2]}
    assert notes["charset_unknown"] == 1 and notes["skipped_not_html"] == 1
    assert "café" in by_url["http://a/latin"]["text"]  # no label: detected
    assert by_url["http://a/good"]["id"] == ids[0]


def test_undecodable_bytes_are_replaced_and_counted(tmp_path):
    payload = _page("valid text ") + b"\xff\xfe\xfa" + _page(" more text")
    write_warc(tmp_path / "r.warc", [("http://a/", payload, "text/html; charset=utf-8")],
               gzip=False)
    rows, failed, notes = read(tmp_path / "r.warc")
    assert failed == [] and notes["replaced_bytes"] == 3
    assert rows[0]["text"].count("\ufffd") == 3


def test_pages_past_the_batch_buffer_keep_their_text_and_order(tmp_path):
    """A page larger than a batch's text buffer (batch_bytes + TEXT_SLACK) moves the pages
    gathered so far into a larger buffer; every page comes out whole, in order."""
    from curator.io.warc import TEXT_SLACK

    pages = [_page(f"small page {i} " * 50) for i in range(3)]
    pages.insert(1, _page("x" * (TEXT_SLACK + 100_000)))
    pages.append(_page("\u3042" * (TEXT_SLACK // 2)))  # Japanese: non-ASCII UTF-8
    write_warc(tmp_path / "big.warc", [(f"http://a/{i}", p, "text/html; charset=utf-8")
                                       for i, p in enumerate(pages)], gzip=False)
    for batch_bytes in (1, 64 << 10, 1 << 30):
        rows, failed, _ = read(tmp_path / "big.warc", batch_bytes)
        assert failed == []
        assert [r["text"].encode() for r in rows] == pages
        assert [r["url"] for r in rows] == [f"http://a/{i}" for i in range(len(pages))]


def _members(data: bytes) -> list[bytes]:
    """The gzip members of ``data``, each still compressed."""
    members = []
    while data:
        inflate = zlib.decompressobj(31)
        inflate.decompress(data)
        members.append(data[:len(data) - len(inflate.unused_data)])
        data = inflate.unused_data
    return members


def _wrong_length(record: bytes, delta: int) -> bytes:
    true = int(re.search(rb"Content-Length: (\d+)", record).group(1))
    return record.replace(b"Content-Length: %d" % true, b"Content-Length: %d" % (true + delta), 1)


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("delta", [-40, 40])
@pytest.mark.parametrize("batch_bytes", [1, 1 << 20])
def test_a_wrong_content_length_is_never_kept_and_counted_once(tmp_path, delta, gz, batch_bytes):
    """Issue 27, defect 4: a too-short length kept the page cut (881 of 1153 characters) and
    failed it too (7 documents for 6 records). Now: not kept, one failure at its offset, and
    every other record read (also where the record before ends a batch)."""
    path = tmp_path / ("wrong.warc.gz" if gz else "wrong.warc")
    ids = write_warc(path, [(f"http://a/{i}", _page(f"page {i} " * 30), "text/html")
                            for i in range(4)], gzip=gz)
    raw = path.read_bytes()
    if gz:
        members = _members(raw)
        members[1] = gzip.compress(_wrong_length(gzip.decompress(members[1]), delta))
        starts = [sum(map(len, members[:i])) for i in range(len(members))]
        path.write_bytes(b"".join(members))
    else:
        starts = [m.start() for m in re.finditer(rb"WARC/1\.", raw)]
        path.write_bytes(raw[:starts[1]] + _wrong_length(raw[starts[1]:starts[2]], delta)
                         + raw[starts[2]:])
    rows, failed, _ = read(path, batch_bytes)
    assert [r["url"] for r in rows] == ["http://a/0", "http://a/2", "http://a/3"]
    assert [(f.reason, f.offset, f.id) for f in failed] == [("bad_record", starts[1], ids[1])]


def test_a_gzip_member_cut_short_at_the_end(tmp_path):
    path = tmp_path / "cut.warc.gz"
    pages = [(f"http://a/{i}", _page(f"{i} " + "varied words here " * (50 + i)), "text/html")
             for i in range(3)]
    write_warc(path, pages)
    data = path.read_bytes()
    starts = [m.start() for m in re.finditer(b"\x1f\x8b\x08", data)]
    path.write_bytes(data[:starts[2] + (len(data) - starts[2]) // 2])
    rows, failed, _ = read(path)
    assert [r["url"] for r in rows] == ["http://a/0", "http://a/1"]
    assert [(f.reason, f.offset) for f in failed] == [("truncated_gzip", starts[2])]
    gzip.decompress(data)  # the uncut file was whole


def test_a_corrupt_gzip_member_in_the_middle_loses_only_its_record(tmp_path):
    path = tmp_path / "mid.warc.gz"
    pages = [(f"http://a/{i}", _page(f"{i} " + "varied words here " * (50 + i)), "text/html")
             for i in range(4)]
    write_warc(path, pages)
    data = bytearray(path.read_bytes())
    starts = [m.start() for m in re.finditer(b"\x1f\x8b\x08", bytes(data))]
    middle = (starts[1] + starts[2]) // 2
    data[middle:middle + 8] = b"\x00" * 8
    # and the last member cut short: its failure must name its own offset after the resync
    path.write_bytes(bytes(data[:starts[3] + (len(data) - starts[3]) // 2]))
    rows, failed, _ = read(path)
    assert [r["url"] for r in rows] == ["http://a/0", "http://a/2"]
    assert [f.reason for f in failed] == ["corrupt_gzip", "truncated_gzip"]
    assert failed[1].offset == starts[3]


# ---- HTTP messages read as FastWARC parses them, the long way only where needed: pinned here
PAGE = _page("caf\xe9 cr\xe8me, chunked and zipped " * 200)


def _chunked(data: bytes, size: int = 1000) -> bytes:
    chunks = (data[i:i + size] for i in range(0, len(data), size))
    return b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"


def _encoded_warc(path: Path, layout: str, broken: bool = False) -> list[str]:
    """A dns: response, then HTML responses plain, chunked, gzip, chunked gzip, deflate, a 404
    (gzip), [a bad gzip body, bad chunks,] and a last plain one; returns the record ids."""
    zipped = gzip.compress(PAGE)
    bodies = [("plain", PAGE, [("Content-Length", str(len(PAGE)))], "200 OK"),
              ("chunked", _chunked(PAGE), [("Transfer-Encoding", "chunked")], "200 OK"),
              ("gzip", zipped, [("Content-Encoding", "gzip")], "200 OK"),
              ("both", _chunked(zipped), [("Content-Encoding", "gzip"),
                                          ("Transfer-Encoding", "chunked")], "200 OK"),
              ("deflate", zlib.compress(PAGE), [("Content-Encoding", "deflate")], "200 OK"),
              ("missing", zipped, [("Content-Encoding", "gzip")], "404 Not Found")]
    if broken:
        bodies += [("badgzip", b"not gzip at all" * 10, [("Content-Encoding", "gzip")], "200 OK"),
                   ("badchunks", b"zz\r\nnope\r\n", [("Transfer-Encoding", "chunked")], "200 OK")]
    bodies.append(("last", PAGE, [], "200 OK"))
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=layout == "gzip")
    ids = []
    records = [writer.create_warc_record("dns:a.example", "response",
                                         payload=io.BytesIO(b"20140325121225\na.example.\t300\t"
                                                            b"IN\tA\t93.184.216.34\n"),
                                         warc_content_type="text/dns")]
    for name, body, headers, status in bodies:
        http = StatusAndHeaders(status, [("Content-Type", "text/html; charset=utf-8"), *headers],
                                protocol="HTTP/1.1")
        records.append(writer.create_warc_record(f"http://a/{name}", "response",
                                                 payload=io.BytesIO(body), http_headers=http))
    for record in records:
        ids.append(record.rec_headers.get_header("WARC-Record-ID"))
        writer.write_record(record)
    data = out.getvalue()
    path.write_bytes(gzip.compress(data) if layout == "one gzip member" else data)
    return ids


LAYOUTS = ["plain", "gzip", "one gzip member"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_encoded_payloads_are_decoded_and_a_dns_response_is_skipped(tmp_path, layout):
    path = tmp_path / ("e.warc.gz" if "gzip" in layout else "e.warc")
    _encoded_warc(path, layout)
    rows, failed, notes = read(path, batch_bytes=4096)
    assert failed == []
    assert {r["url"]: r["text"] for r in rows} == {
        f"http://a/{name}": PAGE.decode() for name in
        ("plain", "chunked", "gzip", "both", "deflate", "last")}
    assert notes["skipped_status"] == 2  # the dns: record (no HTTP) and the 404


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_broken_http_encoding_fails_only_its_own_record(tmp_path, layout):
    path = tmp_path / ("b.warc.gz" if "gzip" in layout else "b.warc")
    ids = _encoded_warc(path, layout, broken=True)
    rows, failed, notes = read(path)
    assert [(f.reason, f.id) for f in failed] == [("bad_record", ids[7]), ("bad_record", ids[8])]
    assert all(f.excerpt.startswith("HTTP/1.1 200 OK") for f in failed)  # the block as read
    assert len(rows) == 6 and rows[-1]["url"] == "http://a/last"
    assert notes["skipped_status"] == 2


def test_a_record_cut_in_its_payload_fails_with_the_block_as_read(tmp_path):
    path = tmp_path / "cut.warc"
    _encoded_warc(path, "plain")
    data = path.read_bytes()
    last = data.rindex(b"WARC/1.")
    path.write_bytes(data[:-len(PAGE) // 2])
    rows, failed, _ = read(path)
    assert len(rows) == 5 and "http://a/last" not in {r["url"] for r in rows}
    [cut] = failed
    assert (cut.reason, cut.offset) == ("truncated_record", last)
    block = data[data.index(b"\r\n\r\n", last) + 4:-len(PAGE) // 2]
    assert f"the record block has {len(block)} of its" in cut.error
    assert cut.excerpt == block[:2048].decode("utf-8", "backslashreplace")


# ---- issue 27: bombs (defect 2) and damaged framing (defect 4), against small limits
SMALL = WarcLimits(max_record_bytes=1 << 20, max_ratio=20.0, ratio_floor=64 << 10)


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_a_record_over_max_record_bytes_fails_unread_and_the_next_is_kept(tmp_path, gz):
    """Defect 2: a 6.5 MB .warc.gz holding one 6 GiB record took 6 GB of memory; a block over
    max_record_bytes is now never read or inflated, and reading resumes after it."""
    path = tmp_path / ("big.warc.gz" if gz else "big.warc")
    ids = write_warc(path, [("http://a/0", _page("zero"), "text/html"),
                            ("http://a/big", b"<html>" + bytes(3 << 20), "text/html"),
                            ("http://a/2", _page("two"), "text/html")], gzip=gz)
    rows, failed, _ = read(path, limits=SMALL)
    assert [r["url"] for r in rows] == ["http://a/0", "http://a/2"]
    [big] = failed
    assert (big.reason, big.id) == ("record_too_large", ids[1])
    assert big.offset == [m.start() for m in re.finditer(
        b"\x1f\x8b\x08" if gz else rb"WARC/1\.", path.read_bytes())][1]
    assert "over max_record_bytes=1048576" in big.error


def test_a_record_claiming_a_huge_length_costs_only_itself(tmp_path):
    path = tmp_path / "lying.warc"
    write_warc(path, [(f"http://a/{i}", _page(f"page {i}"), "text/html") for i in range(3)],
               gzip=False)
    raw = path.read_bytes()
    second = [m.start() for m in re.finditer(rb"WARC/1\.", raw)][1]
    path.write_bytes(raw[:second] + _wrong_length(raw[second:], 10**12))
    rows, failed, _ = read(path, limits=SMALL)
    assert [r["url"] for r in rows] == ["http://a/0", "http://a/2"]
    assert [(f.reason, f.offset) for f in failed] == [("record_too_large", second)]


def _encoded(path: Path, body: bytes, encoding: str, gz: bool = True) -> list[str]:
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=gz)
    ids = []
    for url, payload, headers in [("http://a/0", _page("zero"), []),
                                  ("http://a/bomb", body, [("Content-Encoding", encoding)]),
                                  ("http://a/ok", gzip.compress(PAGE), [("Content-Encoding",
                                                                         "gzip")])]:
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                           *headers], protocol="HTTP/1.1")
        record = writer.create_warc_record(url, "response", payload=io.BytesIO(payload),
                                           http_headers=http)
        ids.append(record.rec_headers.get_header("WARC-Record-ID"))
        writer.write_record(record)
    path.write_bytes(out.getvalue())
    return ids


@pytest.mark.parametrize(("encoding", "body"), [
    ("gzip", gzip.compress(bytes(8 << 20))),
    ("deflate", zlib.compress(bytes(8 << 20))),
    ("gzip, gzip", gzip.compress(gzip.compress(bytes(64 << 20)))),
])
def test_a_content_encoding_bomb_fails_and_inflates_no_further(tmp_path, encoding, body):
    """Defect 2: a 243 KB record whose body inflated to 6 GiB took 6 GB of memory. A body that
    inflates more than max_ratio times (past ratio_floor) fails; a page that compresses as
    pages do is read as before."""
    ids = _encoded(tmp_path / "bomb.warc.gz", body, encoding)
    for limits in (SMALL, None):  # (None: the defaults)
        rows, failed, _ = read(tmp_path / "bomb.warc.gz", limits=limits)
        assert [r["url"] for r in rows] == ["http://a/0", "http://a/ok"]
        assert [(f.reason, f.id) for f in failed] == [("decompression_bomb", ids[1])]
        assert "inflates to more than" in failed[0].error


def test_the_first_bytes_overwritten_lose_one_record(tmp_path):
    """Defect 4: the first 200 bytes of a 5-record .warc.gz overwritten lost all five."""
    path = tmp_path / "head.warc.gz"
    write_warc(path, [(f"http://a/{i}", _page(f"page {i}"), "text/html") for i in range(5)])
    data = path.read_bytes()
    path.write_bytes(bytes(range(200)) + data[200:])
    rows, failed, _ = read(path)
    assert [r["url"] for r in rows] == [f"http://a/{i}" for i in range(1, 5)]
    assert [(f.reason, f.offset) for f in failed] == [("bad_record", 0)]


def test_an_uncompressed_warc_named_gz_with_junk_loses_nothing(tmp_path):
    """Defect 4: resync looked for gzip members only, so the records after the junk were lost."""
    path = tmp_path / "plain.warc.gz"
    write_warc(path, [(f"http://a/{i}", _page(f"page {i}"), "text/html") for i in range(5)],
               gzip=False)
    raw = path.read_bytes()
    third = [m.start() for m in re.finditer(rb"WARC/1\.", raw)][2]
    path.write_bytes(raw[:third] + b"junk, no record\r\n" * 50 + raw[third:])
    rows, failed, _ = read(path)
    assert [r["url"] for r in rows] == [f"http://a/{i}" for i in range(5)]
    assert [(f.reason, f.offset) for f in failed] == [("bad_record", third)]


def test_random_text_named_warc_gz_is_a_failure(tmp_path):
    """Defect 4: 200 KB of random text named .warc.gz produced no failure at all."""
    path = tmp_path / "random.warc.gz"
    path.write_bytes(bytes(random.Random(0).randrange(32, 127) for _ in range(200_000)))
    rows, failed, notes = read(path)
    assert rows == [] and notes == Counter()
    assert [(f.reason, f.offset, f.file) for f in failed] == [("bad_record", 0, path.name)]


def test_gzip_records_then_plain_ones_are_all_read(tmp_path):
    write_warc(tmp_path / "a.warc.gz", [("http://a/0", _page("zero"), "text/html")])
    write_warc(tmp_path / "b.warc", [("http://a/1", _page("one"), "text/html")], gzip=False)
    path = tmp_path / "mixed.warc.gz"
    path.write_bytes((tmp_path / "a.warc.gz").read_bytes() + (tmp_path / "b.warc").read_bytes())
    rows, failed, _ = read(path)
    assert ([r["url"] for r in rows], failed) == (["http://a/0", "http://a/1"], [])


def test_records_truncated_by_the_crawler_are_kept_and_noted(tmp_path):
    """Defect 4: WARC-Truncated records are cut by the crawler, not damaged."""
    page = _page(" ".join(f"word{i}" for i in range(3000)))  # (compresses as text does)
    zipped = gzip.compress(page)
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=True)
    for url, body, headers, warc in [
            ("http://a/cut", page[:5000], [], {"WARC-Truncated": "length"}),
            ("http://a/cutzip", zipped[:len(zipped) // 2], [("Content-Encoding", "gzip")],
             {"WARC-Truncated": "time"}),
            ("http://a/damaged", zipped[:len(zipped) // 2], [("Content-Encoding", "gzip")], {})]:
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                           *headers], protocol="HTTP/1.1")
        writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(body),
                                                      http_headers=http,
                                                      warc_headers_dict=warc))
    (tmp_path / "t.warc.gz").write_bytes(out.getvalue())
    rows, failed, notes = read(tmp_path / "t.warc.gz")
    assert [r["url"] for r in rows] == ["http://a/cut", "http://a/cutzip"]
    assert rows[0]["text"] == page[:5000].decode()
    assert page.decode().startswith(rows[1]["text"]) and len(rows[1]["text"]) > 5000
    assert notes["warc_truncated"] == 2
    assert [f.reason for f in failed] == ["bad_record"]  # cut without saying so: damage


def test_a_0_byte_warc_fails_alone_named_and_counted(tmp_path):
    """One rule for every reader: an empty file is one failure naming it, not a silent pass."""
    path = tmp_path / "empty.warc.gz"
    path.write_bytes(b"")
    batches = list(read_warc_batches(Shard(0, str(path), size=0, label=path.name), 1 << 20,
                                     "read_warc"))
    failures = [f for b in batches for f in b.failed]
    assert [(f.reason, f.file) for f in failures] == [("empty_file", path.name)]
    assert sum(b.table.num_rows for b in batches) == 0
