"""A dataset stage followed only by a Parquet writer: its removal writes its parts as the writer
lays out its files, and the writer publishes them as they are (hard-linked) instead of decoding
and encoding them again. Published bytes and stats are those of the same run unfused
(``CURATOR_FUSE_WRITER=0``); a part not laid out so (an earlier run's) is written as usual."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curator.io.parquet import PartFormat
from curator.runtime.driver.runner import FUSE_WRITER
from tests.conftest import assert_accounting
from tests.published import published, without_volatile
from tests.runtime import killing

pytestmark = pytest.mark.slow

DEDUPS = {
    "exact": "{type: exact_dedup, buckets: 4}",
    "fuzzy": "{type: fuzzy_dedup, buckets: 4}",
    "lines": "{type: line_dedup, unit: line}",
}


def _config(tmp_path: Path, dedup: str, writer: str) -> Path:
    inputs = killing.write_inputs(tmp_path / "in", 6, copies=3)
    config = tmp_path / "pipeline.yaml"
    config.write_text(f"""name: fusion
executor: {{type: local, workers: 2}}
stages:
  - {{type: read_jsonl, path: "{inputs}/*.jsonl"}}
  - {{type: length_filter, min_chars: 200}}
  - {dedup}
  - {writer}
""")
    return config


def _run(config: Path, out: Path, fuse: bool, monkeypatch) -> str:
    if fuse:
        monkeypatch.delenv(FUSE_WRITER, raising=False)
    else:
        monkeypatch.setenv(FUSE_WRITER, "0")
    log = killing.run(config, out, out.parent / f"{out.name}.log")
    assert_accounting(out)
    return log


def _stats(run: Path) -> dict:
    return without_volatile(json.loads((run / "stats.json").read_text()))


@pytest.mark.parametrize("dedup", list(DEDUPS))
@pytest.mark.parametrize("writer", ["{type: write_parquet}",
                                    "{type: write_parquet, row_group_rows: 7, compression: zstd}"])
def test_a_fused_writer_publishes_the_unfused_runs_bytes(tmp_path, monkeypatch, dedup, writer):
    config = _config(tmp_path, DEDUPS[dedup], writer)
    fused, plain = tmp_path / "fused", tmp_path / "plain"
    _run(config, fused, True, monkeypatch)
    _run(config, plain, False, monkeypatch)
    assert _stats(fused)["stages"][2]["removed"] > 0
    fused_files, plain_files = published(fused), published(plain)
    assert fused_files.keys() == plain_files.keys()
    assert [n for n in fused_files if n != "stats.json" and fused_files[n] != plain_files[n]] == []
    assert _stats(fused) == _stats(plain)
    written = sorted((fused / "write_parquet").glob("*.parquet"))
    assert written  # unfused, every published file is one of its own
    assert all(os.stat(p).st_nlink == 1 for p in (plain / "write_parquet").glob("*.parquet"))
    # published as the removal wrote them: each file with rows is the removal's part, linked
    parts = {p.name: p for p in (fused / "_work").glob("segment-01/out/*.parquet")}
    holding = [p for p in written if pq.read_metadata(p).num_rows]
    assert holding and {p.name for p in holding} <= set(parts)
    assert all(os.path.samefile(parts[p.name], p) for p in holding)
    # and counted from the figures the removal wrote beside each part, not read again
    assert all(PartFormat.figures_path(parts[p.name]).exists() for p in holding)


def test_a_part_laid_out_otherwise_is_written_as_usual(tmp_path, monkeypatch):
    """A run whose parts were written unfused, then the writer's layout changed: the writer
    segment runs again over those parts and decodes and encodes them."""
    config = _config(tmp_path, DEDUPS["exact"], "{type: write_parquet}")
    out = tmp_path / "run"
    _run(config, out, False, monkeypatch)
    reference = tmp_path / "reference"
    shutil.copytree(out, reference)
    config.write_text(config.read_text().replace("{type: write_parquet}",
                                                 "{type: write_parquet, row_group_rows: 5}"))
    _run(config, out, True, monkeypatch)
    for path in sorted((out / "write_parquet").glob("*.parquet")):
        groups = pq.ParquetFile(path).metadata
        assert all(groups.row_group(i).num_rows == 5 for i in range(groups.num_row_groups - 1))
    assert pq.read_table(out / "write_parquet").to_pylist() \
        == pq.read_table(reference / "write_parquet").to_pylist()


def test_only_a_part_its_removal_wrote_for_the_writer_is_published_as_it_is(tmp_path,
                                                                           monkeypatch):
    """Unfused, the removal's parts are written in the run's own format (uncompressed): with a
    writer that writes uncompressed too, and parts smaller than its row groups, a part looks
    laid out as the writer would lay it out, but it was not written by the writer's code; the
    writer decodes and encodes it, and publishes the bytes the fused run publishes."""
    config = _config(tmp_path, DEDUPS["exact"],
                     "{type: write_parquet, compression: none, row_group_rows: 100000}")
    plain, fused = tmp_path / "plain", tmp_path / "fused"
    _run(config, plain, False, monkeypatch)
    parts = list((plain / "_work").glob("segment-01/out/*.parquet"))
    assert parts and not list((plain / "_work").glob("segment-01/out/*.kept.json"))
    written = sorted((plain / "write_parquet").glob("*.parquet"))
    assert not any(os.path.samefile(p, q) for p in written for q in parts)
    _run(config, fused, True, monkeypatch)
    assert published(fused).keys() == published(plain).keys()
    assert all(published(fused)[n] == b for n, b in published(plain).items() if n != "stats.json")


def test_the_index_waits_for_the_run_end_when_the_writer_adopts_the_parts(tmp_path, monkeypatch):
    """The writer after a fused removal only links its parts, and the run's end builds the
    document index a moment later: the driver merges no index pieces between them (at 8 GB that
    merge held the writer back ~1 s); unfused, the writer's segment is a full pass and the merge
    comes first. Either way the index finds every published document."""
    from curator import ExactDedup, Pipeline, ReadJsonl, WriteParquet
    from curator.runtime.driver import runner
    from curator.store.doc_index import lookup
    from curator.store.run_dir import RunDir

    inputs = killing.write_inputs(tmp_path / "in", 6, copies=3)
    before_the_writer = []
    merge = runner.merge_pieces_if_many

    def spy(run_dir, many=0):  # every call merges (``many`` 0), and notes whether the writer ran
        before_the_writer.append(not (run_dir.root / "write_parquet").exists())
        return merge(run_dir, many)

    monkeypatch.setattr(runner, "merge_pieces_if_many", spy)
    merges = {}
    for fuse in (True, False):
        monkeypatch.setenv(FUSE_WRITER, "1" if fuse else "0")
        before_the_writer.clear()
        out = tmp_path / f"run-{fuse}"
        Pipeline([ReadJsonl(path=f"{inputs}/*.jsonl"), ExactDedup(buckets=4), WriteParquet()]
                 ).run(output=out, executor="local", progress=False)
        merges[fuse] = sum(before_the_writer)
        kept = pq.read_table(out / "write_parquet", columns=["id"]).column("id").to_pylist()
        assert kept and all(lookup(RunDir(out), doc, "id", settled=True) for doc in kept)
    assert merges[False] == merges[True] + 1
