"""A document that kills or hangs the process running a stage fails alone; the run goes on.

Real runs of ``curate run``, the misbehaving stages loaded from ``tests/runtime/fault_stages.py``
through the pipeline's ``imports:``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, assert_accounting, write_shards

STAGES = Path(__file__).with_name("fault_stages.py")  # KILL... kills, HANG... hangs


def _config(tmp: Path, inputs: Path, stage: str, executor: str = "dask") -> Path:
    config = tmp / f"{tmp.name}.yaml"
    config.write_text(f"""
name: faults
executor: {{type: {executor}, workers: 2}}
imports: [{STAGES}]
stages:
  - {{type: read_jsonl, path: "{inputs}/*.jsonl"}}
  - {stage}
  - {{type: write_parquet}}
""")
    return config


def _curate(config: Path, output: Path, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "curator.cli", "run", str(config), "--output",
                           str(output), *options], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def _plant(path: Path, text: str) -> None:
    """Put a document with ``text`` in the middle of the JSONL file ``path``."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    middle = len(lines) // 2
    lines.insert(middle, json.dumps({"id": "planted", "text": text}) + "\n")
    path.write_text("".join(lines), encoding="utf-8")


def _errors(run_dir: Path, stage: str) -> list[dict]:
    return [json.loads(line) for path in sorted((run_dir / "errors" / stage).glob("*.jsonl"))
            for line in path.read_text().splitlines()]


def test_a_sandboxed_stage_survives_a_deadly_document_without_a_cluster(tmp_path):
    """``executor: local`` has no worker to lose: a stage with ``timeout_s`` runs in a sandbox,
    which the document kills instead of the run."""
    inputs = tmp_path / "in"
    write_shards(inputs, 1, with_ids=True)
    _plant(inputs / "shard-000.jsonl", "KILL the sandbox")
    config = _config(tmp_path, inputs, "{type: test_deadly, timeout_s: 60}", executor="local")
    result = _curate(config, tmp_path / "run")
    assert result.returncode == 0, result.stderr
    deadly = assert_accounting(tmp_path / "run")["stages"][1]
    assert (deadly["in"], deadly["failed"]) == (185, 1)
    [error] = _errors(tmp_path / "run", "test_deadly")
    assert (error["id"], error["reason"]) == ("planted", "worker_died")


def test_a_document_over_max_document_bytes_never_reaches_the_stage(tmp_path):
    inputs = tmp_path / "in"
    write_shards(inputs, 1, with_ids=True)
    _plant(inputs / "shard-000.jsonl", "HANG " + "x" * 200_000)  # the stage would hang on it
    config = _config(tmp_path, inputs, "{type: test_sleepy, max_document_bytes: 200000}",
                     executor="local")
    result = _curate(config, tmp_path / "run")
    assert result.returncode == 0, result.stderr
    [error] = _errors(tmp_path / "run", "test_sleepy")
    assert (error["id"], error["reason"]) == ("planted", "too_large")
    assert error["error"] == "too_large: 200005 bytes of text, over max_document_bytes=200000"
