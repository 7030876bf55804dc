"""The document index written at commit: a real ``curate run`` held part-way has a piece per
committed task, and a lookup of a document it committed is answered by the pieces without
opening any data file, as a scan would answer it; at the end the pieces are merged into
``_index/`` (no file read again) and removed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curator import halt as hook
from curator.store.doc_index import INDEX, PIECES, data_files, lookup
from curator.store.run_dir import RunDir
from tests.runtime.killing import finish, kill_group, start
from tests.serve.test_doc_index import Recording, places
from tests.serve.test_runs import PII_CHAIN, _config, _inputs, _wait

pytestmark = pytest.mark.slow


@pytest.fixture
def recording(monkeypatch) -> type[Recording]:
    Recording.opened, Recording.reads = [], []
    monkeypatch.setattr(pq, "ParquetFile", Recording)
    return Recording


def _scanned(run: Path, copy: Path, doc_id: str) -> set[tuple[str, int, int]]:
    """The places a lookup finds in a copy of the run without its index or pieces (a scan)."""
    if not copy.exists():
        shutil.copytree(run, copy, ignore=shutil.ignore_patterns(INDEX, PIECES, ".*.tmp"))
    found = lookup(RunDir(copy), doc_id, "id")
    assert {loc.via for loc in found} <= {"scan"}
    return places(found)


def test_a_running_run_is_indexed_at_each_commit(tmp_path, recording):
    _inputs(tmp_path)
    out, halt_dir = tmp_path / "runs" / "demo", tmp_path / "halt"
    proc = start(_config(tmp_path, PII_CHAIN, rejected="documents"), out, tmp_path / "log",
                 halt="shard-done:segment-00@3", halt_dir=halt_dir)
    try:
        _wait(lambda: (halt_dir / hook.HALTED).exists(), "halted")
        pieces = sorted(p.name for p in (out / PIECES).glob("*.arrow"))
        assert len(pieces) == 3 and all(p.startswith("segment-00-part-") for p in pieces)
        assert not (out / INDEX).exists()
        committed = {path: pq.read_table(path, columns=["id"]).column("id").to_pylist()
                     for path in data_files(RunDir(out)).files}
        assert len(committed) >= 3  # each shard's kept part, its rejected and rewrites files
        ids = sorted({i for found in committed.values() for i in found})
        assert len(ids) == 60  # 3 of 6 shards of 120 documents
        data = set(committed)
        recording.opened.clear()
        answers = {doc_id: lookup(RunDir(out), doc_id, "id") for doc_id in ids}
        assert not data & set(recording.opened)  # no data file opened: no scan
        for doc_id, found in answers.items():
            assert found and {loc.via for loc in found} == {"index"}
            assert places(found) == _scanned(out, tmp_path / "scan", doc_id)
        assert lookup(RunDir(out), "doc-0999", "id") == []
        (halt_dir / hook.HALTED).unlink()  # let it go on
        log = finish(proc, tmp_path / "log")
    finally:
        kill_group(proc)
    assert not (out / PIECES).exists()  # merged into _index/, then removed
    assert "(0 of " in log.split("document index:")[1].splitlines()[0]  # no file read again
    final_copy = tmp_path / "scan-final"
    for doc_id in ids[::7]:
        found = lookup(RunDir(out), doc_id, "id")
        assert found and {loc.via for loc in found} == {"index"}
        assert places(found) == _scanned(out, final_copy, doc_id)
