"""Ctrl-C: SIGINT to a real `curate run` (Dask worker processes) mid-run ends it with one line and
exit code 130; the same command then resumes and completes."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT, assert_accounting, write_shards

N_SHARDS = 24
LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d ")  # curator's own progress log


def _config(tmp: Path) -> Path:
    inputs = tmp / "in"
    write_shards(inputs, N_SHARDS, copies=12)
    config = tmp / "pipeline.yaml"
    config.write_text(f"""
name: interrupt
output: {tmp / "run"}
batch_bytes: 65536
executor: {{type: dask, workers: 2, processes: true}}
stages:
  - {{type: read_jsonl, path: "{inputs}/*.jsonl"}}
  - {{type: sample, fraction: 0.8, seed: 3}}
  - {{type: write_parquet}}
""")
    return config


def _curate(config: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "curator.cli", "run", str(config)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sigint_mid_run_says_one_line_then_the_same_command_resumes(tmp_path):
    config = _config(tmp_path)
    manifests = tmp_path / "run" / "_manifests" / "segment-00"
    proc = _curate(config)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(manifests.glob("part-*.json"))) < 2:
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)  # the driver alone, as `kill -INT`
    _, stderr = proc.communicate(timeout=60)
    committed = len(list(manifests.glob("part-*.json")))
    assert 2 <= committed < N_SHARDS, f"the signal landed outside the run ({committed} done)"
    assert proc.returncode == 130, stderr[-3000:]
    lines = stderr.splitlines()
    assert lines[-1] == "interrupted; rerun the same command to resume", stderr[-3000:]
    assert all(LOG_LINE.match(line) for line in lines[:-1]), stderr[-3000:]

    resumed = _curate(config)
    _, stderr = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, stderr[-3000:]
    assert f"{N_SHARDS - committed} shards run, {committed} resumed" in " ".join(stderr.split())
    assert_accounting(tmp_path / "run")
