"""A run killed with SIGKILL while its document index is being written (its files in the
temporary folder, not yet swapped in), then run again with the same command: the same output
bytes as an uninterrupted run, the index in place, no temporary folder left, lookups answered
by the index."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from curator.store.doc_index import INDEX, PIECES, lookup
from curator.store.run_dir import RunDir
from tests.conftest import assert_accounting
from tests.runtime import killing

SHARDS = 4


def _killed_at(tmp_path: Path, halt: str) -> tuple[Path, Path, Path, dict]:
    """An exact_dedup run's reference, then the run killed at ``halt``: (config, run folder,
    reference, what halted.json says)."""
    inputs = killing.write_inputs(tmp_path / "in", SHARDS, copies=2)
    config = killing.dedup_config(tmp_path, inputs, "{type: exact_dedup}")
    run_dir = tmp_path / "run"
    reference = killing.reference_run(config, run_dir, tmp_path / "reference",
                                      tmp_path / "ref.log")
    halt_dir = tmp_path / "halt"
    proc = killing.start(config, run_dir, tmp_path / "run.log", halt=halt, halt_dir=halt_dir)
    halted = killing.halt_and_kill(proc, halt_dir, halt.partition("@")[0], tmp_path / "run.log")
    return config, run_dir, reference, halted


def test_a_run_killed_while_writing_its_index_resumes_to_the_same_bytes(tmp_path):
    config, run_dir, reference, halted = _killed_at(tmp_path, "index")
    assert halted["point"] == "index"
    assert not (run_dir / INDEX).exists() and list(run_dir.glob(f"{INDEX}.tmp-*"))

    killing.run(config, run_dir, tmp_path / "run.log")
    assert killing.differences(run_dir, reference) == []
    assert_accounting(run_dir)
    assert (run_dir / INDEX / "files.json").exists()
    assert not list(run_dir.glob(f"{INDEX}.*"))  # the killed build's folder is gone
    kept = pq.read_table(run_dir / "write_parquet").column("id").to_pylist()
    for doc_id in kept[:: max(1, len(kept) // 10)]:
        found = lookup(RunDir(run_dir), doc_id, "id")
        assert found and {loc.via for loc in found} == {"index"}
        assert any(Path(loc.path).parts[0] == "write_parquet" for loc in found)


def test_a_run_killed_between_a_piece_and_its_files_resumes_to_the_same_bytes(tmp_path):
    """Killed after a shard task wrote its index rows, before its files were renamed into
    place: the piece names files not there (or not as it names them), so lookups pass it by;
    the rerun writes it again, and the run's end merges the pieces."""
    config, run_dir, reference, halted = _killed_at(tmp_path, "index-piece@2")
    piece = run_dir / PIECES / f"{halted['key']}.arrow"
    assert piece.exists() and not (run_dir / INDEX).exists()
    assert killing.shards_done(run_dir, 0) < SHARDS
    listed = json.loads(pa.ipc.open_file(piece).schema.metadata[b"files"])
    assert listed and not any((run_dir / f["path"]).exists() for f in listed)

    killing.run(config, run_dir, tmp_path / "run.log")
    assert killing.differences(run_dir, reference) == []
    assert_accounting(run_dir)
    assert not (run_dir / PIECES).exists()
    kept = pq.read_table(run_dir / "write_parquet").column("id").to_pylist()
    for doc_id in kept[:: max(1, len(kept) // 10)]:
        found = lookup(RunDir(run_dir), doc_id, "id")
        assert found and {loc.via for loc in found} == {"index"}
