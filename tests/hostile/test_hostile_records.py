"""Hostile records through real ``curate run`` s (issue 27): JSONL (plain, gz, zst, bz2, xz),
Parquet, charset labels in WARC headers and ``<meta>`` tags, and decontamination task files, all
generated here. Each run puts many bad files (or records) side by side with good ones and keeps
the harness's promises (no traceback, no hang past ``WALL_S``, no process over
``PEAK_RSS_BYTES`` resident or ``MEMORY_BYTES`` of address space); then each kind is checked:
every bad record failed with its reason and position, every good document beside it kept.

Bombs expand to 4 GiB (more than the address-space bound), so that a reader that is not bounded
fails the run. The whole module takes ~40 s.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import os
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from tests.hostile.harness import Outcome, assert_kept_promises, run_hostile
from tests.warc_builder import write_warc

MAX_LINE = 256 << 10  # max_line_bytes of the JSONL runs
BOMB_PIECE = 16 << 20  # one member/frame of a bomb; BOMB_PIECES of them: 4 GiB
BOMB_PIECES = 256


@dataclass
class Ran:
    """A hostile run, read once: its outcome, its failures by file, the ids it kept."""

    outcome: Outcome
    errors: dict[str, list[dict]]
    ids: set[str]
    expected: dict = field(default_factory=dict)


def _ran(outcome: Outcome, expected: dict | None = None) -> Ran:
    errors: dict[str, list[dict]] = {}
    for error in outcome.errors():
        errors.setdefault(error["file"], []).append(error)
    folder = outcome.run_dir / "write_parquet"
    ids = set(pq.read_table(folder, columns=["id"]).column("id").to_pylist()) \
        if any(folder.glob("*.parquet")) else set()
    return Ran(outcome, errors, ids, expected or {})


def _good(kind: str, i: int) -> bytes:
    return json.dumps({"id": f"{kind}-{i}", "text": f"A good document {i} beside {kind}."}
                      ).encode()


def _around(kind: str, bad: bytes) -> tuple[bytes, int, int]:
    """Two good lines, the bad one (line 3), two good lines; with the bad line's offset."""
    head = _good(kind, 0) + b"\n" + _good(kind, 1) + b"\n"
    return head + bad + b"\n" + _good(kind, 2) + b"\n" + _good(kind, 3) + b"\n", 3, len(head)


def _deep(levels: int) -> bytes:
    return b'{"text": "deep", "m": ' + b"[" * levels + b"]" * levels + b"}"


# kind: (the bad line, its reason)
JSONL_LINES: dict[str, tuple[bytes, str]] = {
    "text_number": (b'{"id": "x", "text": 42}', "bad_text_type"),
    "text_array": (b'{"id": "x", "text": ["a", "b"]}', "bad_text_type"),
    "text_object": (b'{"id": "x", "text": {"a": 1}}', "bad_text_type"),
    "text_boolean": (b'{"id": "x", "text": true}', "bad_text_type"),
    "text_null": (b'{"id": "x", "text": null}', "null_text"),
    "text_missing": (b'{"id": "x", "body": "no text field"}', "no_text"),
    "invalid_json": (b'{"id": "x", "text": "unterminated', "bad_json"),
    "invalid_utf8": (b'{"id": "x", "text": "caf\xe9"}', "bad_utf8"),
    "lone_surrogate": (b'{"id": "x", "text": "a\\ud800b"}', "bad_json"),
    "nested_20k": (_deep(20_000), "too_deep"),
    "nested_150": (_deep(150), "too_deep"),
    "keys_12k": (json.dumps({"text": "wide", **{f"k{i}": 0 for i in range(12_000)}}).encode(),
                 "too_many_fields"),
    "line_too_long": (json.dumps({"text": "y" * (MAX_LINE * 3)}).encode(), "line_too_long"),
    "top_level_array": (b"[1, 2, 3]", "not_an_object"),
    "infinite_number": (b'{"text": "x", "n": 1e999}', "bad_json"),
    "binary_garbage": (bytes(b for b in range(256) if b != 10) * 4, "bad_utf8"),
}


def _members(compress, piece: bytes, count: int) -> bytes:
    """``count`` copies of ``piece``, each compressed on its own (members, frames, streams)."""
    return compress(piece) * count


COMPRESSORS = {"gz": lambda b: gzip.compress(b, 6),
               "zst": lambda b: zstandard.ZstdCompressor(level=3).compress(b),
               "bz2": lambda b: bz2.compress(b, 9), "xz": lambda b: lzma.compress(b, preset=1)}


def _bomb(ext: str, head: bytes, line: bool) -> bytes:
    """``head`` then 4 GiB: one line of "a" (``line``) or 60 KB documents, ratio ~1000+; zstd
    in one frame (a reader that decompresses a read block whole makes it 4 GiB at once), the
    others in members of ``BOMB_PIECE`` (cheap to make)."""
    doc = json.dumps({"text": "a" * (60 << 10)}).encode() + b"\n"
    piece = b"a" * BOMB_PIECE if line else doc * (BOMB_PIECE // len(doc))
    first, last = head + (b'{"text": "' if line else b""), b'"}\n' if line else b""
    if ext == "zst":
        frame = zstandard.ZstdCompressor(level=1).compressobj()
        parts = [frame.compress(first), *(frame.compress(piece) for _ in range(BOMB_PIECES))]
        return b"".join(parts) + frame.compress(last) + frame.flush()
    compress = COMPRESSORS[ext]
    return compress(first) + _members(compress, piece, BOMB_PIECES) + (
        compress(last) if last else b"")


@pytest.fixture(scope="module")
def jsonl_run(tmp_path_factory) -> Ran:
    root = tmp_path_factory.mktemp("hostile_jsonl")
    folder = root / "in"
    folder.mkdir()
    expected: dict[str, tuple[int | None, int | None, str]] = {}
    for kind, (bad, reason) in JSONL_LINES.items():
        data, line, offset = _around(kind, bad)
        (folder / f"{kind}.jsonl").write_bytes(data)
        expected[f"{kind}.jsonl"] = (line, offset, reason)
    (folder / "empty_file.jsonl").write_bytes(b"")
    expected["empty_file.jsonl"] = (None, 0, "empty_file")
    for ext in COMPRESSORS:
        for shape in ("bomb_line", "bomb_docs"):
            head = b"".join(_good(f"bomb-{shape}-{ext}", i) + b"\n" for i in range(2))
            (folder / f"{shape}.jsonl.{ext}").write_bytes(_bomb(ext, head, shape == "bomb_line"))
        whole = COMPRESSORS[ext](b"".join(_good(f"trunc_{ext}", i) + b"\n" for i in range(400)))
        (folder / f"truncated.jsonl.{ext}").write_bytes(whole[:len(whole) // 2])
        data, line, offset = _around(f"packed_{ext}", JSONL_LINES["text_number"][0])
        (folder / f"packed_{ext}.jsonl.{ext}").write_bytes(COMPRESSORS[ext](data))
        expected[f"packed_{ext}.jsonl.{ext}"] = (line, offset, "bad_text_type")
    zst = bytearray(COMPRESSORS["zst"](b"".join(_good("corrupt", i) + b"\n" for i in range(400))))
    zst[len(zst) // 2:len(zst) // 2 + 64] = b"\xff" * 64
    (folder / "corrupt.jsonl.zst").write_bytes(bytes(zst))
    (folder / "not_gzip.jsonl.gz").write_bytes(_good("not_gzip", 0) + b"\n")
    (folder / "empty.jsonl.gz").write_bytes(b"")
    expected["empty.jsonl.gz"] = (None, 0, "empty_file")
    config = root / "p.yaml"
    config.write_text(f"""name: hostile-jsonl
executor: {{type: local}}
stages:
  - {{type: read_jsonl, path: "{folder}/*", max_line_bytes: {MAX_LINE}}}
  - {{type: write_parquet}}
""")
    return _ran(run_hostile(config, root / "run"), expected)


def test_the_jsonl_run_keeps_its_promises(jsonl_run):
    stats = assert_kept_promises(jsonl_run.outcome)
    assert stats["stages"][0]["failed"] == sum(map(len, jsonl_run.errors.values()))


@pytest.mark.parametrize("name", [f"{k}.jsonl" for k in JSONL_LINES] + [
    "empty_file.jsonl", "empty.jsonl.gz", *(f"packed_{e}.jsonl.{e}" for e in COMPRESSORS)])
def test_a_bad_jsonl_record_fails_alone_with_reason_and_position(jsonl_run, name):
    line, offset, reason = jsonl_run.expected[name]
    errors = jsonl_run.errors[name]
    assert [(e.get("line"), e.get("offset"), e["reason"]) for e in errors] == \
        [(line, offset, reason)], errors
    kind = name.split(".")[0]
    kept = {i for i in jsonl_run.ids if i.startswith(f"{kind}-")}
    assert kept == (set() if reason == "empty_file" else {f"{kind}-{i}" for i in range(4)})
    if reason == "bad_text_type":
        assert "a number" in errors[0]["error"] or "an array" in errors[0]["error"] or \
            "an object" in errors[0]["error"] or "a boolean" in errors[0]["error"]


@pytest.mark.parametrize("ext", list(COMPRESSORS))
@pytest.mark.parametrize("shape", ["bomb_line", "bomb_docs"])
def test_a_decompression_bomb_stops_at_the_limit_and_keeps_what_came_before(jsonl_run, ext,
                                                                            shape):
    errors = jsonl_run.errors[f"{shape}.jsonl.{ext}"]
    assert errors[-1]["reason"] == "over_limit" and "max_expansion_ratio" in errors[-1]["error"]
    assert all(e.get("line", 0) >= 3 and e.get("offset", 0) > 0 for e in errors), errors
    assert {f"bomb-{shape}-{ext}-0", f"bomb-{shape}-{ext}-1"} <= jsonl_run.ids


@pytest.mark.parametrize("name", [*(f"truncated.jsonl.{e}" for e in COMPRESSORS),
                                  "corrupt.jsonl.zst", "not_gzip.jsonl.gz"])
def test_damaged_compressed_jsonl_keeps_every_line_before_the_damage(jsonl_run, name):
    [error] = jsonl_run.errors[name]
    assert error["reason"] == "damaged" and error["line"] >= 1 and "offset" in error
    kind = ("trunc_" + name.rsplit(".", 1)[1]) if name.startswith("truncated") else \
        name.split(".")[0]
    kept = sorted(int(i.rsplit("-", 1)[1]) for i in jsonl_run.ids if i.startswith(f"{kind}-"))
    assert kept == list(range(error["line"] - 1))


# ------------------------------------------------------------------------------- Parquet
def _table(kind: str, n: int = 3, **extra) -> pa.Table:
    return pa.table({"id": [f"{kind}-{i}" for i in range(n)],
                     "text": [f"A good document {i} beside {kind}." for i in range(n)], **extra})


def _with_bad_group(path: Path, kind: str, bad: pa.Table, **options) -> None:
    """Good rows 0-2, the bad row group (rows 3..), good rows after."""
    after = pa.table({"id": [f"{kind}-{i}" for i in range(3, 6)],
                      "text": [f"A good document {i} beside {kind}." for i in range(3, 6)]})
    with pq.ParquetWriter(path, bad.schema, **options) as writer:
        for part in (_table(kind).cast(bad.schema), bad, after.cast(bad.schema)):
            writer.write_table(part)


def _invalid_utf8_text() -> pa.Array:
    values = [b"A good document 0 beside utf8.", b"caf\xe9 \xff", b"A good document 2 beside utf8."]
    offsets = pa.array([0, *(sum(len(v) for v in values[:i + 1]) for i in range(3))], pa.int32())
    return pa.Array.from_buffers(pa.string(), 3, [None, offsets.buffers()[1],
                                                  pa.py_buffer(b"".join(values))])


@pytest.fixture(scope="module")
def parquet_run(tmp_path_factory) -> Ran:
    root = tmp_path_factory.mktemp("hostile_parquet")
    folder = root / "in"
    folder.mkdir()
    (folder / "empty.parquet").write_bytes(b"")
    pq.write_table(_table("footer"), folder / "footer.parquet")
    data = (folder / "footer.parquet").read_bytes()
    (folder / "footer.parquet").write_bytes(data[:-12])
    (folder / "garbage.parquet").write_bytes(os.urandom(4096))
    pq.write_table(pa.table({"text": [1, 2, 3]}), folder / "text_int.parquet")
    pq.write_table(pa.table({"text": [["a"], ["b"]]}), folder / "text_list.parquet")
    pq.write_table(pa.table({"body": ["a", "b"]}), folder / "no_text.parquet")
    pq.write_table(pa.table({"id": ["nulls-0", "nulls-1", "nulls-2"],
                             "text": ["A good document 0.", None, "A good document 2."]}),
                   folder / "nulls.parquet")
    pq.write_table(pa.table({"id": ["utf8-0", "utf8-1", "utf8-2"], "text": _invalid_utf8_text()}),
                   folder / "utf8.parquet")
    big = pa.table({"id": ["page-big"], "text": ["a" * (48 << 20)]})
    _with_bad_group(folder / "zstd_bomb.parquet", "zstd_bomb", big, compression="zstd")
    repeated = pa.DictionaryArray.from_arrays(pa.array([0] * 8192, pa.int32()),
                                              pa.array(["b" * (256 << 10)]))
    bomb = pa.table({"id": pa.array([f"dict-{i}" for i in range(8192)]), "text": repeated})
    _with_bad_group(folder / "dict_bomb.parquet", "dict_bomb", bomb, compression="zstd",
                    store_schema=False)  # Arrow decodes the dictionary itself
    _with_bad_group(folder / "categorical_bomb.parquet", "categorical_bomb", bomb,
                    compression="zstd")  # read as a dictionary: counted before it is decoded
    _with_bad_group(folder / "damaged_page.parquet", "damaged_page", _table("damaged-x", 3),
                    compression="none")
    path = folder / "damaged_page.parquet"
    page = pq.ParquetFile(path).metadata.row_group(1).column(1).data_page_offset
    raw = bytearray(path.read_bytes())
    raw[page:page + 16] = b"\xff" * 16  # the text page header of the middle row group
    path.write_bytes(bytes(raw))
    categories = pa.DictionaryArray.from_arrays(pa.array([0, 1, 0], pa.int32()),
                                                pa.array(["A good document.", "Another one."]))
    pq.write_table(pa.table({"id": [f"categorical-{i}" for i in range(3)], "text": categories}),
                   folder / "categorical.parquet")
    pq.write_table(_table("good", 5), folder / "good.parquet")
    config = root / "p.yaml"
    config.write_text(f"""name: hostile-parquet
executor: {{type: local}}
stages:
  - {{type: read_parquet, path: "{folder}/*.parquet"}}
  - {{type: write_parquet}}
""")
    return _ran(run_hostile(config, root / "run"))


# file: (reason, the positions (row) that fail, the good ids kept)
PARQUET = {
    "empty.parquet": ("empty_file", [None], set()),
    "footer.parquet": ("unreadable_file", [None], set()),
    "garbage.parquet": ("unreadable_file", [None], set()),
    "text_int.parquet": ("bad_text_type", [0, 1, 2], set()),
    "text_list.parquet": ("bad_text_type", [0, 1], set()),
    "no_text.parquet": ("no_text", [0, 1], set()),
    "nulls.parquet": ("null_text", [1], {"nulls-0", "nulls-2"}),
    "utf8.parquet": ("bad_utf8", [1], {"utf8-0", "utf8-2"}),
    "zstd_bomb.parquet": ("over_limit", [3], {f"zstd_bomb-{i}" for i in range(6)}),
    "dict_bomb.parquet": ("over_limit", [3], {f"dict_bomb-{i}" for i in range(6)}),
    "categorical_bomb.parquet": ("over_limit", [3],
                                 {f"categorical_bomb-{i}" for i in range(6)}),
    "damaged_page.parquet": ("damaged", [3], {f"damaged_page-{i}" for i in range(6)}),
    "categorical.parquet": (None, [], {f"categorical-{i}" for i in range(3)}),
    "good.parquet": (None, [], {f"good-{i}" for i in range(5)}),
}


def test_the_parquet_run_keeps_its_promises(parquet_run):
    assert_kept_promises(parquet_run.outcome)


@pytest.mark.parametrize("name", list(PARQUET))
def test_a_bad_parquet_file_or_row_fails_alone(parquet_run, name):
    reason, rows, good = PARQUET[name]
    errors = parquet_run.errors.get(name, [])
    assert [(e["reason"], e.get("line")) for e in errors] == [(reason, r) for r in rows], errors
    if rows == [None]:
        assert errors[0]["offset"] == 0
    stem = name.removesuffix(".parquet")
    assert {i for i in parquet_run.ids if i.startswith(f"{stem}-")} == good


# ------------------------------------------------------------------------------ charsets
#: Labels that are no charset, or fail on the page: each page falls back and is kept.
HEADER_LABELS = ["rot13", "base64", "zlib", "hex", "bz2", "quopri", "uu", "undefined",
                 "unicode_escape", "raw_unicode_escape", "idna", "punycode", "utf-7", "mbcs",
                 "charmap", "utf-8\x00", "x" * 500, "\u00fctf-8", "utf-16", "utf-32"]
META_LABELS = ["rot13", "base64", "zlib", "undefined", "unicode_escape", "utf-7"]


def _page(marker: str, meta: str = "") -> bytes:
    head = f'<meta charset="{meta}">' if meta else ""
    return (f"<html><head>{head}<title>{marker}</title></head><body><p>{marker}: +2D8- \\ud800 "
            f"x\\x00 a page whose label lies.</p></body></html>").encode()


@pytest.fixture(scope="module")
def warc_run(tmp_path_factory) -> Outcome:
    root = tmp_path_factory.mktemp("hostile_warc")
    folder = root / "in"
    folder.mkdir()
    pages = [(f"http://h/{i}", _page(f"header-{i}") + (b"x" if label in ("utf-16", "utf-32")
                                                        else b""), f"text/html; charset={label}")
             for i, label in enumerate(HEADER_LABELS)]
    pages += [(f"http://m/{i}", _page(f"meta-{i}", label), "text/html")
              for i, label in enumerate(META_LABELS)]
    pages.append(("http://good/", _page("good-page"), "text/html; charset=utf-8"))
    write_warc(folder / "labels.warc.gz", pages[: len(pages) // 2])
    write_warc(folder / "labels2.warc.gz", pages[len(pages) // 2:])
    config = root / "p.yaml"
    config.write_text(f"""name: hostile-warc
executor: {{type: local}}
stages:
  - {{type: read_warc, path: "{folder}/*.warc.gz"}}
  - {{type: write_parquet}}
""")
    return run_hostile(config, root / "run")


def test_the_charset_run_keeps_its_promises(warc_run):
    stats = assert_kept_promises(warc_run)
    assert stats["stages"][0]["failed"] == 0
    notes = stats["stages"][0].get("notes", {})
    assert notes.get("charset_unknown", 0) >= len(HEADER_LABELS) - 1 + len(META_LABELS) - 1


@pytest.mark.parametrize("marker", [f"header-{i}" for i in range(len(HEADER_LABELS))]
                         + [f"meta-{i}" for i in range(len(META_LABELS))] + ["good-page"])
def test_a_page_whose_charset_label_is_hostile_is_kept(warc_run, marker):
    texts = [row["text"] for row in warc_run.kept() if f"<title>{marker}</title>" in row["text"]]
    assert len(texts) == 1 and f"{marker}: +2D8-" in texts[0]


# ------------------------------------------------------------------- decontamination tasks
def _task_bomb(ext: str) -> bytes:
    line = json.dumps({"question": "q " * 5000, "answer": "a"}).encode() + b"\n"
    piece = line * ((4 << 20) // len(line))
    return _members(COMPRESSORS[ext], piece, (BOMB_PIECE * BOMB_PIECES) // len(piece))


def _dictionary_task(path: Path) -> None:
    questions = pa.DictionaryArray.from_arrays(pa.array([0] * 8192, pa.int32()),
                                               pa.array(["q" * (256 << 10)]))
    pq.write_table(pa.table({"question": questions, "answer": ["a"] * 8192}), path,
                   compression="zstd", store_schema=False)


LAUGHS = "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
TASKS = {  # file: (its content or writer, what the one-line error says)
    **{f"bomb.jsonl.{ext}": (lambda ext=ext: _task_bomb(ext), "max_expansion_ratio")
       for ext in COMPRESSORS},
    "deep.json": (lambda: b"[" * 200_000 + b"]" * 200_000, "nested too deeply"),
    "laughs.xml": (lambda: f'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY l0 "lol">{LAUGHS}]>'
                   f"<r><q>&l9;</q></r>".encode(), "amplification"),
    "dictionary.parquet": (_dictionary_task, "MAX_TASK_FILE_BYTES"),
}


@pytest.mark.parametrize("name", list(TASKS))
def test_a_hostile_task_file_stops_the_run_with_one_line_in_bounded_memory(tmp_path, name):
    content, says = TASKS[name]
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.jsonl").write_text(json.dumps({"text": "A document to decontaminate."}) + "\n")
    task = tmp_path / name
    if name.endswith(".parquet"):
        content(task)
    else:
        task.write_bytes(content())
    spec = "fields: [q]" if name.endswith(".xml") else "fields: [question]"
    config = tmp_path / "p.yaml"
    config.write_text(f"""name: hostile-task
executor: {{type: local}}
stages:
  - {{type: read_jsonl, path: "{folder}/*.jsonl"}}
  - type: decontaminate
    tasks:
      - {{name: t, path: "{task}", {spec}}}
  - {{type: write_parquet}}
""")
    outcome = run_hostile(config, tmp_path / "run")
    assert outcome.returncode == 1
    lines = [line for line in (outcome.stdout + outcome.stderr).splitlines()
             if line.startswith("error:")]
    assert len(lines) == 1 and name in lines[0] and says in lines[0], outcome.stderr[-2000:]
