"""A run never deletes what it did not write, and never trusts what it finds: ``--force`` on a
folder that is not a run, files a user put in a run, damaged or missing intermediates, markers,
manifests and published files (each is named, and only what it affects runs again)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from curator.cli import app
from tests.conftest import assert_accounting, write_shards
from tests.published import shard_parts
from tests.runtime import killing

runner = CliRunner()
SHARDS, BUCKETS = 6, 4


def _simple_config(tmp_path: Path, min_chars: int = 2000) -> Path:
    inputs = tmp_path / "in"
    if not inputs.exists():
        write_shards(inputs, 3)
    path = tmp_path / f"simple-{min_chars}.yaml"
    path.write_text(f"name: safety\nexecutor: {{type: local}}\nstages:\n"
                    f"  - {{type: read_jsonl, path: '{inputs}/*.jsonl'}}\n"
                    f"  - {{type: length_filter, min_chars: {min_chars}}}\n"
                    "  - {type: write_parquet}\n")
    return path


def _run(config: Path, output: Path, *extra: str):
    return runner.invoke(app, ["run", str(config), "--output", str(output), *extra])


def test_force_on_a_folder_that_is_not_a_run_is_refused_and_deletes_nothing(tmp_path):
    """Item 1 (e1da6e4 deleted d/sub/f and suggested --force)."""
    folder = tmp_path / "d"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "f").write_text("x")
    for extra in ([], ["--force"]):
        result = _run(_simple_config(tmp_path), folder, *extra)
        assert result.exit_code == 1
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "is not a curator run" in lines[0], result.output
        assert "--force" not in result.output
    assert (folder / "sub" / "f").read_text() == "x"
    assert sorted(p.name for p in folder.rglob("*")) == ["f", "sub"]


def test_force_recomputes_and_removes_only_what_the_run_wrote(tmp_path):
    run_dir = tmp_path / "run"
    assert _run(_simple_config(tmp_path), run_dir).exit_code == 0
    (run_dir / "notes.txt").write_text("mine")
    (run_dir / "write_parquet" / "README.md").write_text("mine too")
    (run_dir / "rejected" / "length_filter" / "part-stale.parquet").write_bytes(b"stale")
    changed = _simple_config(tmp_path, min_chars=5000)
    forced = _run(changed, run_dir, "--force")
    assert forced.exit_code == 0, forced.output
    assert "3 shards run, 0 resumed" in " ".join(forced.output.split())
    assert (run_dir / "notes.txt").read_text() == "mine"
    assert (run_dir / "write_parquet" / "README.md").read_text() == "mine too"
    fresh = tmp_path / "fresh"
    assert _run(changed, fresh).exit_code == 0
    assert killing.differences(run_dir, fresh) == ["extra notes.txt",
                                                   "extra write_parquet/README.md"]
    again = _run(changed, run_dir, "--force")  # the same config: recomputed all the same
    assert "3 shards run, 0 resumed" in " ".join(again.output.split())


# ----------------------------------------------------------------------------- damage on resume
@pytest.fixture(scope="module")
def dedup_case(tmp_path_factory):
    """read_jsonl → length_filter → exact_dedup → write_parquet (a shard segment, the barrier and
    a shard segment), its uninterrupted output kept as the reference."""
    base = tmp_path_factory.mktemp("safety-dedup")
    inputs = killing.write_inputs(base / "in", SHARDS, copies=3)
    config = killing.dedup_config(base, inputs, f"{{type: exact_dedup, buckets: {BUCKETS}}}",
                                  executor="local")
    reference = killing.reference_run(config, base / "run", base / "reference", base / "ref.log")
    assert killing.stats(reference)["stages"][2]["removed"] > 0
    return config, base / "run", reference


def _flip(path: Path, keep_mtime: bool = True) -> None:
    """16 bytes in the middle of ``path`` inverted, its size (and, by default, mtime) kept: only
    a checksum tells."""
    stat = path.stat()
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 16] = bytes(b ^ 0xFF for b in data[middle:middle + 16])
    path.write_bytes(bytes(data))
    if keep_mtime:
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def _times(run_dir: Path) -> dict[str, int]:
    """mtime of every record and output file (what a rerun rewrote shows as changed)."""
    return {str(p.relative_to(run_dir)): p.stat().st_mtime_ns for p in run_dir.rglob("*")
            if p.is_file() and p.name not in killing.NOT_OUTPUT}


def _rewritten(before: dict[str, int], after: dict[str, int]) -> set[str]:
    return {name for name, t in after.items() if before.get(name) != t}


DAMAGE = {
    # (kill point or None for a finished run, what to damage, what it names, files rewritten)
    # {k}: the k-th input shard's part name
    "intermediate-flipped": ("phase-task:hash@2", "_work/segment-00/{1}-0000.parquet", "flip"),
    "intermediate-deleted": ("phase-task:hash@2", "_work/segment-00/{2}-0000.parquet",
                             "delete"),
    "phase-file-deleted": ("phase-task:group@2", "_work/segment-01/hash", "delete-one"),
    "marker-empty": ("phase-task:group@2", "_work/segment-01/hash/_done/{3}-0000.json",
                     "empty"),
    "marker-deleted": ("phase-task:remove@2", "_work/segment-01/group/_done/bucket-00001.json",
                       "delete"),
    "commit-then-published": ("shard-commit:segment-02@3", "write_parquet/{0}-0000.parquet",
                              "rewrite"),
    "manifest-empty": (None, "_manifests/segment-00/{4}.json", "empty"),
    # a published file is checked by size, mtime and inode (then checksum): a rewrite shows
    "published-flipped": (None, "write_parquet/{2}-0000.parquet", "rewrite"),
    "published-deleted": (None, "rejected/length_filter/{1}.parquet", "delete"),
    "run-json-empty": (None, "run.json", "empty"),
}


def _damage(run_dir: Path, target: str, how: str) -> Path:
    path = run_dir / target.format(*shard_parts(run_dir))
    if how == "delete-one":  # a file a phase task wrote (not its marker)
        path = sorted(p for p in path.rglob("*") if p.is_file() and "_done" not in p.parts)[1]
        how = "delete"
    if how in ("flip", "rewrite"):
        _flip(path, keep_mtime=how == "flip")
    elif how == "delete":
        path.unlink()
    else:
        path.write_bytes(b"")
    return path


@pytest.mark.parametrize("case", list(DAMAGE))
def test_damage_is_named_and_only_what_it_affects_runs_again(case, dedup_case, tmp_path):
    config, run_dir, reference = dedup_case
    point, target, how = DAMAGE[case]
    if run_dir.exists():
        shutil.rmtree(run_dir)
    log = tmp_path / "run.log"
    if point is None:
        killing.run(config, run_dir, log)
    else:
        killing.kill_at(config, run_dir, point, log)
    damaged = _damage(run_dir, target, how)
    before = _times(run_dir)
    resumed = killing.run(config, run_dir, tmp_path / "resumed.log")
    named = (str(damaged.relative_to(run_dir)), damaged.name, damaged.stem)
    assert any(name in resumed for name in named), resumed
    assert killing.differences(run_dir, reference) == []
    assert_accounting(run_dir)
    rewritten = _rewritten(before, _times(run_dir))
    if point is None and case != "run-json-empty":  # a finished run: only the damaged shard
        shards = {p.split("/")[-1][:10] for p in rewritten
                  if p.startswith("_manifests/segment-") and "/part-" in p}
        assert len(shards) == 1, sorted(rewritten)
    if case == "run-json-empty":
        assert not {p for p in rewritten if p.startswith("_manifests/segment-") and "/part-" in p}


def test_curate_verify_names_every_damaged_file(dedup_case, tmp_path):
    _config, run_dir, reference = dedup_case
    if run_dir.exists():
        shutil.rmtree(run_dir)
    shutil.copytree(reference, run_dir, copy_function=shutil.copy2)
    clean = runner.invoke(app, ["verify", str(run_dir)])
    assert clean.exit_code == 0, clean.output
    assert "whole" in clean.output
    parts = shard_parts(run_dir)
    _flip(run_dir / "write_parquet" / f"{parts[1]}-0000.parquet")
    (run_dir / "_work" / "segment-00" / f"{parts[3]}-0000.parquet").unlink()
    (run_dir / "_work" / "segment-01" / "hash" / "_done" / f"{parts[0]}-0000.json").write_text(
        "{")
    (run_dir / "run.json").write_bytes(b"")
    result = runner.invoke(app, ["verify", str(run_dir)])
    assert result.exit_code == 1
    text = " ".join(result.output.split())
    for name in (f"write_parquet/{parts[1]}-0000.parquet",
                 f"segment-00/{parts[3]}-0000.parquet", f"hash/_done/{parts[0]}-0000.json",
                 "run.json"):
        assert name in text, text
    assert "4 damaged" in text


def test_a_second_run_into_the_same_folder_is_refused_while_the_first_runs(dedup_case,
                                                                           tmp_path):
    """Item 4: one writer per run directory; a holder that died is taken over."""
    config, run_dir, reference = dedup_case
    if run_dir.exists():
        shutil.rmtree(run_dir)
    first = killing.start(config, run_dir, tmp_path / "first.log",
                          halt="shard-done:segment-00@2", halt_dir=tmp_path / "halt")
    try:
        halted = killing.wait_halted(first, tmp_path / "halt", "shard-done", tmp_path / "first.log")
        for extra in ([], ["--force", "--set", "length_filter.min_chars=10"]):
            second = runner.invoke(app, ["run", str(config), "--output", str(run_dir), *extra])
            assert second.exit_code == 1
            line = second.output.strip()
            assert len(line.splitlines()) == 1, line
            assert f"pid {first.pid}" in line  # the driver holds the lock
            assert "being written by another run" in line and "since" in line
        assert (run_dir / "_manifests" / "segment-00" / f"{halted['key']}.json").exists()
    finally:
        killing.kill_group(first)
    resumed = killing.run(config, run_dir, tmp_path / "resumed.log")
    assert "taking over" in resumed or "took over" in resumed, resumed
    assert killing.differences(run_dir, reference) == []
