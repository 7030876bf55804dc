"""The document index a run writes at its end: the same answers as a scan, without reading
any data file; files written since it was built still found (by a scan of those alone); built
from id and URL columns a row group at a time; swapped in whole."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator.serve.documents import DocumentQuery, query_documents, settled
from curator.store import doc_index
from curator.store.doc_index import INDEX, build_index, data_files, lookup
from curator.store.run_dir import RunDir
from tests.serve.test_documents import build_run, input_documents


class Recording(pq.ParquetFile):
    """``pq.ParquetFile`` that notes every file opened and every read (pyarrow's, not ours)."""

    opened: list[Path] = []
    reads: list[tuple[str, object]] = []

    def __init__(self, source, *args, **kwargs) -> None:
        Recording.opened.append(Path(source))
        super().__init__(source, *args, **kwargs)

    def read_row_group(self, i, columns=None, **kwargs):
        Recording.reads.append(("read_row_group", columns))
        return super().read_row_group(i, columns=columns, **kwargs)

    def read(self, *args, **kwargs):
        Recording.reads.append(("read", kwargs.get("columns")))
        return super().read(*args, **kwargs)

    def iter_batches(self, *args, **kwargs):
        Recording.reads.append(("iter_batches", kwargs.get("columns")))
        return super().iter_batches(*args, **kwargs)


@pytest.fixture
def recording(monkeypatch) -> type[Recording]:
    Recording.opened, Recording.reads = [], []
    monkeypatch.setattr(pq, "ParquetFile", Recording)
    return Recording


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return build_run(tmp_path_factory.mktemp("index"))


def places(found) -> set[tuple[str, int, int]]:
    return {(loc.path, loc.row_group, loc.row) for loc in found}


def test_the_run_writes_its_index_and_it_answers_as_a_scan_does(run, tmp_path):
    listing = json.loads((run / INDEX / "files.json").read_text())
    assert listing["documents"] > len(input_documents())  # a document is in several files
    assert len(listing["files"]) == len(data_files(RunDir(run)).files)
    unindexed = tmp_path / "run"
    shutil.copytree(run, unindexed)
    shutil.rmtree(unindexed / INDEX)
    docs = input_documents()
    for doc in docs[::20]:
        indexed = lookup(RunDir(run), doc["id"], "id")
        scanned = lookup(RunDir(unindexed), doc["id"], "id")
        assert indexed and {loc.via for loc in indexed} == {"index"}
        assert {loc.via for loc in scanned} == {"scan"}
        assert places(indexed) == places(scanned)
        by_url = lookup(RunDir(run), doc["url"], "url")
        assert by_url and places(by_url) == places(lookup(RunDir(unindexed), doc["url"], "url"))
        for loc in by_url:
            row = pq.ParquetFile(run / loc.path).read_row_group(loc.row_group).slice(loc.row, 1)
            assert row.column("url")[0].as_py() == doc["url"]
    assert lookup(RunDir(run), "no-such-id", "id") == []


def test_a_lookup_reads_only_the_file_that_holds_the_document(run, recording):
    removed = pq.read_table(run / "rejected" / "length_filter")
    doc_id = removed.column("id")[0].as_py()
    data = set(data_files(RunDir(run)).files)
    found = lookup(RunDir(run), doc_id, "id")
    assert found and not data & set(recording.opened)
    recording.opened.clear()
    answer = query_documents(run, DocumentQuery(stage="length_filter", removed=True, id=doc_id))
    assert [d["id"] for d in answer["documents"]] == [doc_id] and answer["indexed"]
    [holder] = {run / loc.path for loc in found if loc.path.startswith("rejected/length_filter/")}
    assert data & set(recording.opened) == {holder}


def test_files_written_after_the_index_are_scanned(run, tmp_path):
    """A running run publishes a new part and rewrites another after the index was built."""
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    assert settled(RunDir(copy))
    progress = json.loads(RunDir(copy).progress_file.read_text())
    progress.update(state="running", started=time.time() + 1)  # as a new run writes it
    RunDir(copy).progress_file.write_text(json.dumps(progress))
    assert not settled(RunDir(copy))
    new = copy / "rejected" / "length_filter" / "part-new.parquet"
    pq.write_table(pa.table({"id": ["late-doc"], "text": ["a late page"], "reason": ["too_short"],
                             "url": ["https://example.org/late"]}), new)
    [loc] = lookup(RunDir(copy), "late-doc", "id")
    assert (loc.path, loc.via) == ("rejected/length_filter/part-new.parquet", "scan")
    assert [loc.via for loc in lookup(RunDir(copy), "https://example.org/late", "url")] == ["scan"]
    answer = query_documents(copy, DocumentQuery(removed=True, id="late-doc"))
    assert [d["text"] for d in answer["documents"]] == ["a late page"]
    assert not answer["indexed"]

    written = sorted((copy / "write_parquet").glob("*.parquet"))[0]
    rows = pq.read_table(written)
    pq.write_table(rows.slice(1), written)  # changed: its index entries no longer trusted
    gone, kept = rows.column("id")[0].as_py(), rows.column("id")[1].as_py()
    assert not any(loc.path.startswith("write_parquet/")
                   for loc in lookup(RunDir(copy), gone, "id"))
    moved = [loc for loc in lookup(RunDir(copy), kept, "id") if loc.path.startswith("write_")]
    assert [(loc.row, loc.via) for loc in moved] == [(0, "scan")]


def test_building_reads_key_columns_a_row_group_at_a_time_and_spills(run, tmp_path, recording):
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    shutil.rmtree(copy / INDEX)  # nothing indexed earlier: every file is read
    (copy / f"{INDEX}.tmp-killed").mkdir()  # a build killed part-way
    facts = build_index(RunDir(copy), spill_rows=64, rows_per_bucket=100)
    assert facts["spills"] > 1 and facts["buckets"] > 4
    assert facts["files_read"] == facts["files"] > 0
    assert facts["buckets"] & (facts["buckets"] - 1) == 0
    assert recording.reads and all(how == "read_row_group" and set(columns) <= {"id", "url"}
                                   for how, columns in recording.reads)
    assert sorted(p.name for p in copy.glob(f"{INDEX}*")) == [INDEX]
    assert len(list((copy / INDEX).glob("bucket-*.parquet"))) == facts["buckets"]
    for doc in input_documents():
        small, whole = lookup(RunDir(copy), doc["id"], "id"), lookup(RunDir(run), doc["id"], "id")
        assert places(small) == places(whole) and {loc.via for loc in small} == {"index"}


def test_rebuilding_swaps_the_whole_index_and_reads_only_files_changed_since(run, tmp_path,
                                                                            recording):
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    before = json.loads((copy / INDEX / "files.json").read_text())["build"]
    changed = sorted((copy / "write_parquet").glob("*.parquet"))[0]
    rows = pq.read_table(changed)
    pq.write_table(rows.slice(1), changed)
    recording.opened.clear()
    facts = build_index(RunDir(copy))
    assert facts["files_read"] == 1 and facts["files"] > 1
    assert set(data_files(RunDir(copy)).files) & set(recording.opened) == {changed}
    after = json.loads((copy / INDEX / "files.json").read_text())
    assert after["build"] != before
    unindexed = tmp_path / "unindexed"
    shutil.copytree(copy, unindexed)
    shutil.rmtree(unindexed / INDEX)
    for doc in input_documents()[::10]:
        assert places(lookup(RunDir(copy), doc["id"], "id")) \
            == places(lookup(RunDir(unindexed), doc["id"], "id"))
    assert pq.read_schema(copy / INDEX / "bucket-00000.parquet").metadata[b"build"] == \
        after["build"].encode()


def test_an_unreadable_file_is_left_out_of_the_index_not_the_run(run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    (copy / "rejected" / "length_filter" / "part-broken.parquet").write_bytes(b"PAR1 cut short")
    build_index(RunDir(copy))
    listing = json.loads((copy / INDEX / "files.json").read_text())
    assert [f["size"] for f in listing["files"] if f["path"].endswith("broken.parquet")] == [None]
    doc_id = input_documents()[0]["id"]
    found = lookup(RunDir(copy), doc_id, "id")
    assert found and {loc.via for loc in found} == {"index"}


def test_a_settled_run_is_answered_by_the_index_alone(run, monkeypatch):
    """A finished run whose index was built after it started: no file of the run is listed or
    stat-ed for a lookup (only the index's own files are read)."""
    assert settled(RunDir(run))
    docs = input_documents()
    expected = {d["id"]: places(lookup(RunDir(run), d["id"], "id")) for d in docs[::25]}

    def listing_forbidden(run_dir):
        raise AssertionError("a settled lookup listed the run's files")

    monkeypatch.setattr(doc_index, "data_files", listing_forbidden)
    for doc_id, where in expected.items():
        assert where and places(lookup(RunDir(run), doc_id, "id", settled=True)) == where


def test_pieces_answer_as_the_index_does_and_merge_into_it(run, tmp_path, recording):
    """Pieces as commits write them (here: one per data file), then merged at a segment's end
    when there are more than ``many``: the same answers throughout, no data file read."""
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    shutil.rmtree(copy / INDEX)
    files = data_files(RunDir(copy)).files
    for n, path in enumerate(files):
        doc_index.write_piece(RunDir(copy), f"task-{n}", [(path, path)])
    (copy / "stats.json").write_bytes(b"{}")  # not a document file: no piece
    doc_index.write_piece(RunDir(copy), "no-documents", [(copy / "stats.json",) * 2])
    assert len(list((copy / doc_index.PIECES).iterdir())) == len(files)
    docs = input_documents()[::15]
    recording.opened.clear()
    from_pieces = {d["id"]: lookup(RunDir(copy), d["id"], "id") for d in docs}
    assert not set(files) & set(recording.opened)
    for doc in docs:
        assert {loc.via for loc in from_pieces[doc["id"]]} == {"index"}
        assert places(from_pieces[doc["id"]]) == places(lookup(RunDir(run), doc["id"], "id"))
    assert doc_index.merge_pieces_if_many(RunDir(copy), many=len(files)) is None
    facts = doc_index.merge_pieces_if_many(RunDir(copy), many=len(files) - 1)
    assert facts["pieces"] == len(files) and facts["files_read"] == 0
    assert not (copy / doc_index.PIECES).exists()
    for doc in docs:
        assert places(lookup(RunDir(copy), doc["id"], "id", settled=True)) \
            == places(from_pieces[doc["id"]])
