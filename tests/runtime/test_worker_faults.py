"""A document that kills or hangs the process running a stage fails alone; the run goes on; a
sandbox process killed from outside loses no document.

Real runs of ``curate run`` on a Dask LocalCluster with worker processes, the misbehaving
stages loaded from ``tests/runtime/fault_stages.py`` through the pipeline's ``imports:``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

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


def _outputs(run_dir: Path) -> dict[str, bytes]:
    files = [*(run_dir / "write_parquet").glob("*.parquet"), *(run_dir / "rejected").rglob("*")]
    return {str(f.relative_to(run_dir)): f.read_bytes() for f in sorted(files) if f.is_file()}


def _funnel(run_dir: Path) -> list[tuple]:
    stats = json.loads((run_dir / "stats.json").read_text())
    return [(s["name"], s["in"], s["kept"], s["removed"], s["failed"], s["removed_by_reason"])
            for s in stats["stages"]]


def _errors(run_dir: Path, stage: str) -> list[dict]:
    return [json.loads(line) for path in sorted((run_dir / "errors" / stage).glob("*.jsonl"))
            for line in path.read_text().splitlines()]


@pytest.mark.parametrize("executor", ["dask", "ray"])
def test_a_document_that_kills_its_worker_fails_alone(tmp_path, executor):
    """On Dask and on Ray alike: the worker dies twice, the shard runs again sandboxed."""
    if executor == "ray":
        pytest.importorskip("ray")
    clean, planted = tmp_path / "clean", tmp_path / "planted"
    write_shards(clean, 3, with_ids=True)
    write_shards(planted, 3, with_ids=True)
    _plant(planted / "shard-001.jsonl", "KILL this worker")
    stage = "{type: test_deadly, min_chars: 3000}"

    result = _curate(_config(tmp_path, planted, stage, executor), tmp_path / "run")
    assert result.returncode == 0, result.stderr
    assert "running it again with its stages in a sandbox" in result.stderr
    reference = _curate(_config(tmp_path, clean, stage), tmp_path / "ref", "--executor", "local")
    assert reference.returncode == 0, reference.stderr

    run, ref = tmp_path / "run", tmp_path / "ref"
    assert_accounting(run)
    assert _outputs(run) == _outputs(ref) and len(_outputs(ref)) == 6
    [error] = _errors(run, "test_deadly")
    assert (error["id"], error["reason"], error["file"]) == ("planted", "worker_died",
                                                             "shard-001.jsonl")
    assert "exited with code 1" in error["error"]
    expected = [list(s) for s in _funnel(ref)]
    expected[0][1] += 1  # the planted document is read...
    expected[0][2] += 1
    expected[1][1] += 1  # ...and fails in the stage; nothing else changes
    expected[1][4] += 1
    assert [list(s) for s in _funnel(run)] == expected


@pytest.mark.parametrize("executor", ["dask", "ray"])
def test_a_document_that_hangs_is_cut_at_timeout_s(tmp_path, executor):
    if executor == "ray":
        pytest.importorskip("ray")
    inputs = tmp_path / "in"
    write_shards(inputs, 2, with_ids=True)
    _plant(inputs / "shard-000.jsonl", "HANG for ever")
    config = _config(tmp_path, inputs, "{type: test_sleepy, timeout_s: 2}", executor)

    started = time.monotonic()
    result = _curate(config, tmp_path / "run")
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 60
    stats = assert_accounting(tmp_path / "run")
    sleepy = stats["stages"][1]
    assert (sleepy["in"], sleepy["kept"], sleepy["failed"]) == (185, 184, 1)
    [error] = _errors(tmp_path / "run", "test_sleepy")
    assert (error["id"], error["reason"], error["file"]) == ("planted", "timeout",
                                                             "shard-000.jsonl")
    assert "still running after 2 s" in error["error"]


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


WAITING = '''
import os
import time
from pathlib import Path

from curator import BatchResult, BatchStage


class Waiting(BatchStage):
    """Passes documents on; on a WAIT document, writes ``folder/started-<pid>`` and waits for
    ``folder/go``."""

    type = "test_waiting"
    folder: str

    def process(self, batch):
        for text in batch.column("text").to_pylist():
            if text.startswith("WAIT"):
                Path(self.folder, f"started-{os.getpid()}").touch()
                while not Path(self.folder, "go").exists():
                    time.sleep(0.05)
        return BatchResult(kept=batch)
'''


def test_a_sandbox_killed_from_outside_loses_no_document(tmp_path):
    """Issue 27, defect 5: a sandbox process killed from outside (here: while its document
    provably waits for the test) lost its page for good, and a rerun did not repair it. The
    document is run again alone in a new child and kept; worker_died is for documents that
    kill that one too (test_a_document_that_kills_its_worker_fails_alone)."""
    inputs, folder = tmp_path / "in", tmp_path / "signals"
    write_shards(inputs, 1, with_ids=True)
    folder.mkdir()
    _plant(inputs / "shard-000.jsonl", "WAIT for the test")
    (tmp_path / "waiting.py").write_text(WAITING)
    config = tmp_path / "waiting.yaml"
    config.write_text(f"""
name: waiting
executor: {{type: dask, workers: 1}}
imports: [{tmp_path / "waiting.py"}]
stages:
  - {{type: read_jsonl, path: "{inputs}/*.jsonl"}}
  - {{type: test_waiting, folder: "{folder}", timeout_s: 600}}
  - {{type: write_parquet}}
""")
    run = subprocess.Popen([sys.executable, "-m", "curator.cli", "run", str(config), "--output",
                            str(tmp_path / "run")], cwd=ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (started := list(folder.glob("started-*"))):
            assert run.poll() is None and time.monotonic() < deadline, run.stdout.read()
            time.sleep(0.05)
        os.kill(int(started[0].name.split("-")[1]), signal.SIGKILL)  # the sandbox child
        (folder / "go").touch()
        output, _ = run.communicate(timeout=120)
    finally:
        (folder / "go").touch()
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, output
    waiting = assert_accounting(tmp_path / "run")["stages"][1]
    assert (waiting["in"], waiting["kept"], waiting["failed"]) == (185, 185, 0)
    assert len(list(folder.glob("started-*"))) == 2  # the killed child, then the new one
    assert not (tmp_path / "run" / "errors").exists()
