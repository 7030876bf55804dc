"""Hostile containers through a real ``curate run``: WARC files (gzip and plain framing, bombs,
wrong lengths, junk, truncation), arXiv e-prints and folders, LaTeX, Wikipedia dumps. Every bad
input is generated here, many to a run, each with good documents beside it. Each run, under
``harness.run_hostile``'s bounds (``WALL_S`` of wall clock, ``MEMORY_BYTES`` of address space
for every process of the run): no traceback, no hang, accounting holds, every good document is
kept, and every bad record fails alone with its reason and its position (file and offset, or
file and document id)."""

from __future__ import annotations

import bz2
import gzip
import io
import random
import re
import tarfile
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from tests.conftest import require_lid_model
from tests.hostile.harness import Outcome, assert_kept_promises, run_hostile

pytest.importorskip("pylatexenc")
pytest.importorskip("mwparserfromhell")

TIMEOUT_S = 3  # the short per-document timeout of these runs: every document that reaches it
#               takes minutes (measured: 100k nested <div> ~550 s in resiliparse, 100k unclosed
#               \begin{figure} ~340 s in extract_latex, 10k unbalanced {{a| ~30 s and more in
#               mwparserfromhell); a good document takes milliseconds
ENGLISH = ("The river runs past the old mill, where the village keeps the records of every "
           "harvest since the bridge was built. ")


@dataclass
class Expect:
    """What one input file must give: the documents kept, the failures (each a dict of the
    fields it must have: stage, reason, and its position: offset or id), notes of the source."""

    kept: set[str] = field(default_factory=set)
    failed: list[dict] = field(default_factory=list)
    notes: dict[str, int] = field(default_factory=dict)


def check(outcome: Outcome, expected: dict[str, Expect], key: str, source: str,
          file_of: Callable[[dict], str]) -> None:
    """Every file's kept documents (by ``key``) and failures are as expected; none other."""
    stats = assert_kept_promises(outcome)
    kept: dict[str, set[str]] = {}
    for row in outcome.kept():
        kept.setdefault(file_of(row), set()).add(row[key])
    errors: dict[str, list[dict]] = {}
    for error in outcome.errors():
        errors.setdefault(error["file"], []).append(error)
    assert set(errors) <= set(expected), set(errors) - set(expected)
    for name, want in expected.items():
        assert kept.get(name, set()) == want.kept, name
        got = errors.get(name, [])
        assert len(got) == len(want.failed), (name, got)
        for wanted in want.failed:
            match = [e for e in got if all(e.get(k) == v for k, v in wanted.items())]
            assert match, (name, wanted, got)
            got.remove(match[0])
    notes = Counter(next(s for s in stats["stages"] if s["name"] == source).get("notes", {}))
    for name, want in expected.items():
        for note, n in want.notes.items():
            assert notes[note] >= n, (name, note, notes)


def write_config(tmp: Path, name: str, stages: str) -> Path:
    config = tmp / f"{name}.yaml"
    config.write_text(f"name: {name}\nexecutor: {{type: dask, workers: 2}}\nstages:\n{stages}"
                      "  - {type: write_parquet}\n")
    return config


# ---------------------------------------------------------------------------- WARC
def page(tag: str) -> bytes:
    return (f"<html><head><title>{tag}</title></head><body><article><h1>{tag}</h1>"
            f"<p>{ENGLISH * 6}</p><p>{ENGLISH * 4}</p></article></body></html>").encode()


@dataclass
class Rec:
    url: str
    body: bytes | None = None  # default: a good page
    http: list[tuple[str, str]] = field(default_factory=list)  # more HTTP headers
    warc: dict[str, str] = field(default_factory=dict)  # more WARC headers


def warc(records: list[Rec], gz: bool = True) -> tuple[bytes, list[int], list[str]]:
    """The records written by warcio (a gzip member each, or plain); their offsets and ids."""
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=gz)
    offsets, ids = [], []
    for r in records:
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                           *r.http], protocol="HTTP/1.1")
        record = writer.create_warc_record(r.url, "response", payload=io.BytesIO(
            page(r.url) if r.body is None else r.body), http_headers=http,
            warc_headers_dict=r.warc)
        offsets.append(out.tell())
        ids.append(record.rec_headers.get_header("WARC-Record-ID"))
        writer.write_record(record)
    return out.getvalue(), offsets, ids


def goods(prefix: str, n: int = 3) -> list[Rec]:
    return [Rec(f"http://{prefix}/{i}") for i in range(n)]


def urls(records: list[Rec], *bad: int) -> set[str]:
    return {r.url for i, r in enumerate(records) if i not in bad}


def plain_starts(data: bytes) -> list[int]:
    return [m.start() for m in re.finditer(rb"WARC/1\.0\r\n", data)]


def with_length(header_block: bytes, delta: int) -> bytes:
    """A WARC record (header and the rest) whose Content-Length is off by ``delta``."""
    found = re.search(rb"Content-Length: (\d+)", header_block)
    return header_block.replace(found.group(0),
                                b"Content-Length: %d" % (int(found.group(1)) + delta), 1)


def gzip_members(data: bytes) -> list[bytes]:
    """The members of a gzip file, each still compressed."""
    members, rest = [], data
    while rest:
        inflate = zlib.decompressobj(31)
        inflate.decompress(rest)
        members.append(rest[:len(rest) - len(inflate.unused_data)])
        rest = inflate.unused_data
    return members


def joined(members: list[bytes]) -> tuple[bytes, list[int]]:
    offsets, position = [], 0
    for member in members:
        offsets.append(position)
        position += len(member)
    return b"".join(members), offsets


def make_warcs(folder: Path) -> dict[str, Expect]:
    """Every hostile WARC file of the run, with what it must give."""
    folder.mkdir()
    expect: dict[str, Expect] = {}

    def put(name: str, data: bytes, want: Expect) -> None:
        (folder / name).write_bytes(data)
        expect[name] = want

    # 1. a record whose block (70 MiB of zeros in a 70 KB gzip member) is over max_record_bytes
    recs = [*goods("bomb1", 1), Rec("http://bomb1/x", b"<html><body>" + bytes(70 << 20)),
            Rec("http://bomb1/2")]
    data, offs, ids = warc(recs)
    put("record_bomb.warc.gz", data, Expect(urls(recs, 1), [
        {"stage": "read_warc", "reason": "record_too_large", "offset": offs[1], "id": ids[1]}]))
    # 2-4. HTTP bodies that inflate 1000x: gzip, deflate in a plain WARC, gzip twice over
    for name, body, encoding, gz in [
            ("body_gzip_bomb.warc.gz", gzip.compress(b" " * (64 << 20)), "gzip", True),
            ("body_deflate_bomb.warc", zlib.compress(b" " * (64 << 20)), "deflate", False),
            ("body_double_gzip_bomb.warc.gz", gzip.compress(gzip.compress(bytes(128 << 20))),
             "gzip, gzip", True)]:
        recs = [*goods(name, 1), Rec(f"http://{name}/x", body, [("Content-Encoding", encoding)]),
                Rec(f"http://{name}/2")]
        data, offs, ids = warc(recs, gz)
        put(name, data, Expect(urls(recs, 1), [
            {"stage": "read_warc", "reason": "decompression_bomb", "offset": offs[1]}]))
    # 5. the first 200 bytes of a 5-record .warc.gz overwritten: only the first record is lost
    recs = goods("head", 5)
    data, offs, _ = warc(recs)
    noise = bytes(random.Random(5).randrange(256) for _ in range(200))
    put("head_overwritten.warc.gz", noise + data[200:], Expect(urls(recs, 0), [
        {"stage": "read_warc", "reason": "bad_record", "offset": 0}]))
    # 6. an uncompressed WARC named .warc.gz, junk between two records: no record lost
    recs = goods("junkplain", 5)
    data, offs, _ = warc(recs, gz=False)
    junk = b"this is no WARC record at all\r\n" * 40
    put("plain_named_gz_junk.warc.gz", data[:offs[3]] + junk + data[offs[3]:],
        Expect(urls(recs), [{"stage": "read_warc", "reason": "bad_record", "offset": offs[3]}]))
    # 7. junk over a record's start (its header gone): that record is lost, counted once
    recs = goods("junkhead", 5)
    data, offs, _ = warc(recs, gz=False)
    put("junk_over_header.warc", data[:offs[2]] + b"#" * 120 + data[offs[2] + 120:],
        Expect(urls(recs, 2), [{"stage": "read_warc", "reason": "bad_record",
                                "offset": offs[2]}]))
    # 8-9. 200 KB of random text, and of random bytes, named as WARC files
    rng = random.Random(8)
    put("random_text.warc.gz", bytes(rng.randrange(32, 127) for _ in range(200_000)),
        Expect(set(), [{"stage": "read_warc", "reason": "bad_record", "offset": 0}]))
    put("random_bytes.warc", rng.randbytes(100_000),
        Expect(set(), [{"stage": "read_warc", "reason": "bad_record", "offset": 0}]))
    # 10-11. a wrong Content-Length (too short, too long) in a plain WARC: that record fails once
    for name, delta in [("short_length.warc", -40), ("long_length.warc", 40)]:
        recs = goods(name, 4)
        data, offs, ids = warc(recs, gz=False)
        put(name, data[:offs[1]] + with_length(data[offs[1]:offs[2]], delta) + data[offs[2]:],
            Expect(urls(recs, 1), [{"stage": "read_warc", "reason": "bad_record",
                                    "offset": offs[1], "id": ids[1]}]))
    # 12-13. the same in gzip framing (the member rewritten)
    for name, delta in [("short_length.warc.gz", -40), ("long_length.warc.gz", 40)]:
        recs = goods(name, 4)
        data, _, ids = warc(recs)
        members = gzip_members(data)
        members[1] = gzip.compress(with_length(gzip.decompress(members[1]), delta))
        data, offs = joined(members)
        put(name, data, Expect(urls(recs, 1), [
            {"stage": "read_warc", "reason": "bad_record", "offset": offs[1], "id": ids[1]}]))
    # 14-15. a file cut in its last record: gzip member cut, plain block cut
    recs = goods("cutgz", 4)
    data, offs, _ = warc(recs)
    put("cut.warc.gz", data[:offs[3] + (len(data) - offs[3]) // 2], Expect(urls(recs, 3), [
        {"stage": "read_warc", "reason": "truncated_gzip", "offset": offs[3]}]))
    recs = goods("cutplain", 4)
    data, offs, _ = warc(recs, gz=False)
    put("cut.warc", data[:-300], Expect(urls(recs, 3), [
        {"stage": "read_warc", "reason": "truncated_record", "offset": offs[3]}]))
    # 16. a gzip member damaged in its middle: only its record is lost
    recs = goods("corrupt", 4)
    data, offs, _ = warc(recs)
    damaged = bytearray(data)
    middle = (offs[2] + offs[3]) // 2
    damaged[middle:middle + 16] = bytes(16)
    put("corrupt_member.warc.gz", bytes(damaged), Expect(urls(recs, 2), [
        {"stage": "read_warc", "reason": "corrupt_gzip", "offset": offs[2]}]))
    # 17. a record cut by the crawler (WARC-Truncated), its gzip body cut: kept, noted
    body = gzip.compress(page("http://truncated/x") * 20)
    recs = [*goods("truncated", 1), Rec("http://truncated/x", body[:len(body) // 2],
                                        [("Content-Encoding", "gzip")],
                                        {"WARC-Truncated": "length"}), Rec("http://truncated/2")]
    data, _, _ = warc(recs)
    put("warc_truncated.warc.gz", data, Expect(urls(recs), notes={"warc_truncated": 1}))
    # 18. 100k nested <div>: resiliparse in langid_html takes minutes (quadratic in depth)
    recs = [*goods("nested", 1), Rec("http://nested/x", b"<html><body>" + b"<div>" * 100_000
                                     + b"deep" + b"</div>" * 100_000 + b"</body></html>"),
            Rec("http://nested/2")]
    data, _, ids = warc(recs)
    put("nested_divs.warc.gz", data, Expect(urls(recs, 1), [
        {"stage": "langid_html", "reason": "timeout", "id": ids[1]}]))
    # 19-20. NUL bytes labelled HTML, and no payload at all
    for name, body, reason in [("binary.warc.gz", bytes(5000), "binary_content"),
                               ("empty_payload.warc.gz", b"", "empty")]:
        recs = [*goods(name, 1), Rec(f"http://{name}/x", body), Rec(f"http://{name}/2")]
        data, offs, ids = warc(recs)
        put(name, data, Expect(urls(recs, 1), [
            {"stage": "read_warc", "reason": reason, "offset": offs[1], "id": ids[1]}]))
    # 21-22. bad chunks, and a Content-Encoding nobody knows
    for name, body, header in [
            ("bad_chunks.warc", b"zz\r\nnot a chunk\r\n", ("Transfer-Encoding", "chunked")),
            ("unknown_encoding.warc.gz", b"\x1f\x9d\x90abc", ("Content-Encoding", "compress"))]:
        recs = [*goods(name, 1), Rec(f"http://{name}/x", body, [header]), Rec(f"http://{name}/2")]
        data, offs, ids = warc(recs, gz=name.endswith(".gz"))
        put(name, data, Expect(urls(recs, 1), [
            {"stage": "read_warc", "reason": "bad_record", "offset": offs[1], "id": ids[1]}]))
    # 23. a record header that lost its WARC-Type line (the length still right)
    recs = goods("notype", 3)
    data, offs, _ = warc(recs, gz=False)
    header = data[offs[1]:offs[2]].replace(b"WARC-Type: response\r\n", b"", 1)
    put("no_warc_type.warc", data[:offs[1]] + header + data[offs[2]:], Expect(urls(recs, 1), [
        {"stage": "read_warc", "reason": "bad_record", "offset": offs[1]}]))
    # 24. a 3 MB page: over langid_html's max_document_bytes (2 MB here)
    recs = [*goods("huge", 1), Rec("http://huge/x", page("huge") * 2000), Rec("http://huge/2")]
    data, _, ids = warc(recs)
    put("huge_page.warc.gz", data, Expect(urls(recs, 1), [
        {"stage": "langid_html", "reason": "too_large", "id": ids[1]}]))
    # 25. gzip records, then plain records appended: both framings read, nothing lost
    first, second = goods("mixed_a", 2), goods("mixed_b", 2)
    put("mixed_framing.warc.gz", warc(first)[0] + warc(second, gz=False)[0],
        Expect(urls(first) | urls(second)))
    # 26. garbage appended after the last record
    recs = goods("tail", 3)
    data, _, _ = warc(recs)
    put("trailing_junk.warc.gz", data + b"\x00junk" * 200, Expect(urls(recs), [
        {"stage": "read_warc", "reason": "corrupt_gzip", "offset": len(data)}]))
    # 27. an empty file: one failure naming it (one rule for every reader)
    put("empty.warc.gz", b"", Expect(failed=[{"stage": "read_warc", "reason": "empty_file",
                                              "offset": 0}]))
    # 28. a plain record that claims a 1 TB block: refused unread, the records after it kept
    recs = goods("lying", 4)
    data, offs, ids = warc(recs, gz=False)
    lying = data[offs[1]:offs[2]].replace(re.search(rb"Content-Length: \d+",
                                                    data[offs[1]:offs[2]]).group(0),
                                          b"Content-Length: 1000000000000", 1)
    data = data[:offs[1]] + lying + data[offs[2]:]
    put("lying_length.warc", data, Expect(urls(recs, 1), [
        {"stage": "read_warc", "reason": "record_too_large", "offset": offs[1], "id": ids[1]}]))
    return expect


def test_hostile_warc_files(tmp_path):
    require_lid_model()
    expected = make_warcs(tmp_path / "warc")
    config = write_config(tmp_path, "hostile-warc", f"""\
  - {{type: read_warc, path: "{tmp_path}/warc/*"}}
  - {{type: langid_html, languages: [en], timeout_s: {TIMEOUT_S}, max_document_bytes: 2000000}}
  - {{type: extract_html, extractor: resiliparse, timeout_s: {TIMEOUT_S}}}
""")
    outcome = run_hostile(config, tmp_path / "run")
    check(outcome, expected, "url", "read_warc", lambda row: row["warc_file"])


# ---------------------------------------------------------------------------- arXiv, LaTeX
def paper(title: str, body: str = "") -> bytes:
    return (rf"""\documentclass{{article}}
\begin{{document}}
\section{{{title}}}
{ENGLISH * 3}
{body}
\end{{document}}
""").encode()


def tar(members: dict[str, bytes], gz: bool = True, links: dict[str, str] | None = None,
        absolute: bool = False) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz" if gz else "w") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            archive.addfile(info)
    return buffer.getvalue()


def fan_out(levels: int, width: int, leaf: int) -> dict[str, bytes]:
    """A project whose files each input the next ``width`` times: width**levels leaves."""
    files = {f"f{i}.tex": (rf"\input{{f{i + 1}}}" * width).encode() for i in range(levels)}
    files[f"f{levels}.tex"] = b"w " * (leaf // 2)
    files["main.tex"] = rb"\documentclass{article}\begin{document}\section{A}\input{f0}" \
        rb"\end{document}"
    return files


def make_papers(folder: Path, outside: Path) -> dict[str, Expect]:
    """Every hostile arXiv input of the run (one paper each), with what it must give."""
    folder.mkdir()
    expect: dict[str, Expect] = {}

    def put(name: str, data: bytes | None, want: Expect) -> None:
        if data is not None:
            (folder / name).write_bytes(data)
        expect[name] = want

    def kept(name: str) -> Expect:
        return Expect({name.split("/")[-1].removesuffix(".tar.gz").removesuffix(".gz")})

    def failed(name: str, stage: str, reason: str) -> Expect:
        return Expect(failed=[{"stage": stage, "reason": reason,
                               "id": name.removesuffix(".tar.gz").removesuffix(".tar")}])

    for i in range(3):
        put(f"2401.0000{i}.tar.gz", tar({"main.tex": paper(f"Good {i}")}),
            kept(f"2401.0000{i}.tar.gz"))
    # archive rules: traversal, absolute path, a link out, a bomb, nesting too deep
    put("2401.10001.tar.gz", tar({"main.tex": paper("T"), "../../evil.tex": b"x"}),
        failed("2401.10001.tar.gz", "arxiv", "unsafe_archive"))
    put("2401.10002.tar.gz", tar({"main.tex": paper("A"), "/etc/evil.tex": b"x"}),
        failed("2401.10002.tar.gz", "arxiv", "unsafe_archive"))
    put("2401.10003.tar.gz", tar({"main.tex": paper("L")}, links={"x.tex": "/etc/passwd"}),
        failed("2401.10003.tar.gz", "arxiv", "unsafe_archive"))
    put("2401.10004.tar.gz", tar({"main.tex": paper("B"), "zeros.tex": bytes(100 << 20)}),
        failed("2401.10004.tar.gz", "arxiv", "archive_bomb"))
    nested = tar({"main.tex": paper("N")})
    for level in range(5):
        nested = tar({f"level{level}.tar.gz": nested})
    put("2401.10005.tar.gz", nested, failed("2401.10005.tar.gz", "arxiv", "archive_too_large"))
    # \input: 3 KB of files that expand past max_text_bytes; a cycle; 1 KB that expands to 26 MB
    put("2401.10006.tar.gz", tar(fan_out(19, 3, 200)),
        failed("2401.10006.tar.gz", "arxiv", "too_large"))
    cycle = {"main.tex": paper("C", r"\input{a}"), "a.tex": rb"a \input{b}",
             "b.tex": rb"b \input{a}"}
    put("2401.10007.tar.gz", tar(cycle), Expect({"2401.10007"}, notes={"input_cycle": 1}))
    put("2401.10008.tar.gz", tar(fan_out(8, 4, 400)),
        failed("2401.10008.tar.gz", "arxiv", "too_large"))
    # folders: a link to a file outside (refused, never read), a link inside (left out)
    secret = outside / "secret.tex"
    secret.write_text("SECRET-OUTSIDE-THE-FOLDER")
    linked = folder / "2401.10009"
    linked.mkdir()
    (linked / "main.tex").write_bytes(paper("F", r"\input{x}"))
    (linked / "x.tex").symlink_to(secret)
    put("2401.10009", None, failed("2401.10009", "arxiv", "unsafe_archive"))
    inside = folder / "2401.10010"
    inside.mkdir()
    (inside / "main.tex").write_bytes(paper("I"))
    (inside / "alias.tex").symlink_to(inside / "main.tex")
    put("2401.10010", None, Expect({"2401.10010"}))
    # no main file, corrupt gzip, a tar cut short, random bytes named .tar.gz
    put("2401.10011.tar.gz", tar({"notes.tex": b"just words"}),
        failed("2401.10011.tar.gz", "arxiv", "no_main_file"))
    good = tar({"main.tex": paper("G") * 50})
    put("2401.10012.tar.gz", good[:20] + bytes(64) + good[84:],
        failed("2401.10012.tar.gz", "arxiv", "bad_archive"))
    put("2401.10013.tar", tar({"main.tex": paper("Cut") * 40, "b.tex": b"x" * 5000},
                              gz=False)[:3000],
        failed("2401.10013.tar", "arxiv", "bad_archive"))
    put("2401.10019.tar.gz", random.Random(19).randbytes(30_000),
        failed("2401.10019.tar.gz", "arxiv", "no_main_file"))
    # LaTeX for extract_latex: a macro bomb, 100k unclosed floats (minutes), 3 MB of text
    rng = random.Random(14)

    def words(n: int, k: int = 6) -> list[str]:  # (random: compressing 200:1 is a bomb)
        return ["".join(rng.choices("abcdefghij", k=k)) for _ in range(n)]

    put("2401.10014.tar.gz", tar({"main.tex": paper(
        "M", r"\def\a{\a\a\a\a\a\a\a\a\a\a}" + r"\a " * 2000)}),
        failed("2401.10014.tar.gz", "extract_latex", "latex_error"))
    put("2401.10015.tar.gz", tar({"main.tex": paper("S", "".join(
        rf"\begin{{figure}}{w} " for w in words(100_000, 4)))}),
        failed("2401.10015.tar.gz", "extract_latex", "timeout"))
    put("2401.10017.tar.gz", tar({"main.tex": paper("H", " ".join(words(450_000)))}),
        failed("2401.10017.tar.gz", "extract_latex", "too_large"))
    # a gzipped single Latin-1 .tex: kept
    put("2401.10016.gz", gzip.compress(paper("Caf\xe9").decode().encode("latin-1")),
        Expect({"2401.10016"}, notes={"latin1_decoded": 1}))
    return expect


def test_hostile_arxiv_inputs_and_latex(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    expected = make_papers(tmp_path / "arxiv", outside)
    config = write_config(tmp_path, "hostile-arxiv", f"""\
  - {{type: arxiv, path: "{tmp_path}/arxiv/*", timeout_s: {TIMEOUT_S}}}
  - {{type: extract_latex, timeout_s: {TIMEOUT_S}, max_document_bytes: 2500000}}
""")
    outcome = run_hostile(config, tmp_path / "run")
    files = {name.removesuffix(".tar.gz").removesuffix(".tar").removesuffix(".gz"): name
             for name in expected}
    check(outcome, expected, "id", "arxiv", lambda row: files[row["id"]])
    assert all("SECRET" not in row["text"] for row in outcome.kept())


# ---------------------------------------------------------------------------- Wikipedia
SITE = (b'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.11/" xml:lang="en">\n'
        b"<siteinfo><sitename>Hostile</sitename><dbname>hostilewiki</dbname>"
        b"<base>https://xx.wikipedia.org/wiki/Main_Page</base><namespaces>"
        b'<namespace key="0" /><namespace key="6">File</namespace></namespaces></siteinfo>\n')
END = b"</mediawiki>\n"


def wiki_page(page_id: int, text: str | bytes) -> bytes:
    body = text if isinstance(text, bytes) else text.encode()
    return (b"<page><title>Page %d</title><ns>0</ns><id>%d</id><revision><id>9</id>"
            b"<timestamp>2024-01-01T00:00:00Z</timestamp><text>" % (page_id, page_id)
            + body + b"</text></revision></page>\n")


def article(n: int) -> str:
    return f"'''Page {n}''' is about [[rivers|a river]]. {ENGLISH * 3}\n== History ==\n{ENGLISH}"


def make_dumps(folder: Path) -> dict[str, Expect]:
    """Every hostile dump of the run, with what it must give (page ids: 100 k + n in dump k)."""
    folder.mkdir()
    expect: dict[str, Expect] = {}

    def put(name: str, data: bytes, kept: tuple[int, ...], failed: list[dict]) -> None:
        (folder / name).write_bytes(data)
        expect[name] = Expect({f"hostilewiki:{i}" for i in kept}, failed)

    def failure(reason: str, page_id: int | None = None) -> list[dict]:
        where = {} if page_id is None else {"id": f"hostilewiki:{page_id}"}
        return [{"stage": "wikipedia", "reason": reason, **where}]

    # 40 KB of unbalanced {{a| : mwparserfromhell takes minutes
    put("unbalanced_templates.xml", SITE + wiki_page(101, article(1))
        + wiki_page(102, "{{a|" * 10_000) + wiki_page(103, article(3)) + END,
        (101, 103), failure("timeout", 102))
    # a bz2 bomb: 270 MB of wikitext in one page, from 300 copies of one small bz2 stream
    filler = bz2.compress(b"a" * 900_000)
    bomb = (bz2.compress(SITE + wiki_page(201, article(1)) + b"<page><title>Bomb</title><ns>0"
                         b"</ns><id>202</id><revision><timestamp>x</timestamp><text>")
            + filler * 300 + bz2.compress(b"</text></revision></page>\n"
                                          + wiki_page(203, article(3)) + END))
    put("bomb_page.xml.bz2", bomb, (201, 203), failure("too_large", 202))
    # a dump cut inside its third page's bz2 stream: the two before are kept
    streams = [bz2.compress(SITE + wiki_page(301, article(1))),
               bz2.compress(wiki_page(302, article(2))),
               bz2.compress(wiki_page(303, article(3)) + END)]
    cut = b"".join(streams)[:len(streams[0]) + len(streams[1]) + len(streams[2]) // 2]
    put("cut.xml.bz2", cut, (301, 302), failure("damaged_dump"))
    # markup garbage between pages; bytes that are no UTF-8; 20 MB inside one comment
    for k, name, junk in [(4, "garbage.xml", b"<<<&&& not xml >>>"),
                          (5, "invalid_utf8.xml", b"\xff\xfe\xfa")]:
        put(name, SITE + wiki_page(100 * k + 1, article(1)) + wiki_page(100 * k + 2, article(2))
            + junk + wiki_page(100 * k + 3, article(3)) + END,
            (100 * k + 1, 100 * k + 2), failure("damaged_dump"))
    put("huge_comment.xml.bz2", bz2.compress(SITE + wiki_page(601, article(1)) + b"<!--")
        + filler * 25 + bz2.compress(b"-->" + wiki_page(602, article(2)) + END),
        (601,), failure("damaged_dump"))
    # random bytes named .xml.bz2; the same page twice (both counted and kept)
    put("not_a_dump.xml.bz2", random.Random(3).randbytes(20_000), (), failure("damaged_dump"))
    put("duplicate_ids.xml", SITE + wiki_page(801, article(1)) + wiki_page(801, article(1))
        + END, (801,), [])
    return expect


def test_hostile_wikipedia_dumps(tmp_path):
    expected = make_dumps(tmp_path / "wiki")
    config = write_config(tmp_path, "hostile-wiki", f"""\
  - {{type: wikipedia, path: "{tmp_path}/wiki/*", timeout_s: {TIMEOUT_S},
     max_page_chars: 1000000}}
""")
    outcome = run_hostile(config, tmp_path / "run")
    files = {i: name for name, want in expected.items() for i in want.kept}
    check(outcome, expected, "id", "wikipedia", lambda row: files[row["id"]])
