"""Ctrl-C: SIGINT to a real `curate run` (Dask worker processes) mid-run ends it with one line and
exit code 130; the same command then resumes and completes. The run is halted mid-segment by
the curator.halt hook (a worker blocked after its second shard, the other at its next point)
when the signal comes: the driver, waiting on them, must stop the cluster all the same."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from curator import halt
from tests.conftest import ROOT, assert_accounting, write_shards
from tests.runtime import killing

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


def _curate(config: Path, log: Path, halt_dir: Path | None = None) -> subprocess.Popen:
    """``curate run config`` in a session of its own, stderr to ``log``; with ``halt_dir``, halted
    once a second shard's manifest is written."""
    env = {k: v for k, v in os.environ.items() if k not in (halt.HALT, halt.HALT_DIR)}
    if halt_dir is not None:
        env.update({halt.HALT: "shard-done:segment-00@2", halt.HALT_DIR: str(halt_dir)})
    with open(log, "w") as f:
        return subprocess.Popen([sys.executable, "-m", "curator.cli", "run", str(config)],
                                cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=f,
                                start_new_session=True)


def _ended(proc: subprocess.Popen, log: Path, timeout: float) -> str:
    try:
        proc.wait(timeout=timeout)
    finally:
        killing.kill_group(proc)  # and whatever it left behind
    return log.read_text()


def test_sigint_mid_run_says_one_line_then_the_same_command_resumes(tmp_path):
    config = _config(tmp_path)
    manifests = tmp_path / "run" / "_manifests" / "segment-00"
    log = tmp_path / "interrupted.log"
    proc = _curate(config, log, tmp_path / "halt")
    halted = killing.wait_halted(proc, tmp_path / "halt", "the second shard", log)
    proc.send_signal(signal.SIGINT)  # the driver alone, as `kill -INT`
    stderr = _ended(proc, log, 60)
    committed = len(list(manifests.glob("part-*.json")))
    assert (manifests / f"{halted['key']}.json").exists() and 2 <= committed < N_SHARDS
    assert proc.returncode == 130, stderr[-3000:]
    lines = stderr.splitlines()
    assert lines[-1] == "interrupted; rerun the same command to resume", stderr[-3000:]
    assert all(LOG_LINE.match(line) for line in lines[:-1]), stderr[-3000:]

    resumed = _curate(config, tmp_path / "resumed.log")
    stderr = _ended(resumed, tmp_path / "resumed.log", 300)
    assert resumed.returncode == 0, stderr[-3000:]
    assert f"{N_SHARDS - committed} shards run, {committed} resumed" in " ".join(stderr.split())
    assert_accounting(tmp_path / "run")
