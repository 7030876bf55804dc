"""A run killed with SIGKILL mid-run and started again gives the uninterrupted run's output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from tests.conftest import ROOT, assert_accounting, write_shards

N_SHARDS = 24


def _config(tmp: Path, inputs: Path) -> Path:
    config = tmp / "pipeline.yaml"
    config.write_text(f"""
name: resume
batch_bytes: 65536
executor: {{type: dask, workers: 2}}
stages:
  - {{type: read_jsonl, path: "{inputs}/*.jsonl"}}
  - {{type: length_filter, min_chars: 3000}}
  - {{type: sample, fraction: 0.8, seed: 3}}
  - {{type: write_parquet, row_group_rows: 50}}
""")
    return config


def _curate(config: Path, output: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "curator.cli", "run", str(config), "--output", str(output)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)


def _outputs(run_dir: Path) -> dict[str, bytes]:
    files = sorted((run_dir / "write_parquet").glob("part-*.parquet"))
    files += sorted((run_dir / "rejected").rglob("part-*.parquet"))
    return {str(f.relative_to(run_dir)): f.read_bytes() for f in files}


def _funnel(run_dir: Path) -> list[tuple]:
    stats = json.loads((run_dir / "stats.json").read_text())
    return [(s["name"], s["in"], s["kept"], s["removed"], s["failed"], s["removed_by_reason"])
            for s in stats["stages"]]


def test_sigkill_mid_run_then_resume_gives_identical_output(tmp_path):
    inputs = tmp_path / "in"
    write_shards(inputs, N_SHARDS, copies=12)
    config = _config(tmp_path, inputs)

    reference = tmp_path / "reference"
    assert _curate(config, reference).wait(timeout=300) == 0

    killed = tmp_path / "killed"
    proc = _curate(config, killed)
    manifests = killed / "_manifests" / "segment-00"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(manifests.glob("part-*.json"))) < 3:
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver, the scheduler and both workers
    proc.wait()
    committed = len(list(manifests.glob("part-*.json")))
    assert 3 <= committed < N_SHARDS, f"kill landed outside the run ({committed} shards done)"

    resumed = _curate(config, killed)
    log = resumed.communicate(timeout=300)[0].decode()
    assert resumed.returncode == 0, log
    assert f"{N_SHARDS - committed} shards run, {committed} resumed" in " ".join(log.split())

    assert _outputs(killed) == _outputs(reference)
    assert _funnel(killed) == _funnel(reference)
    assert_accounting(killed)
    ids = pq.read_table(killed / "write_parquet").column("id").to_pylist()
    assert len(ids) == len(set(ids)) > 0
    assert not list(killed.rglob("*.tmp")), "temporary files left behind"
