"""Progress a person can read, from a real `curate run`: documents, bytes, docs/s and ETA within
a shard (sent by the workers), the phases of a barrier stage, a closing summary in input shards;
bars on a terminal; and a dashboard address that answers."""

from __future__ import annotations

import json
import logging
import os
import pty
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import ClassVar

import pyarrow as pa
import pytest

from curator import Pipeline, ReadJsonl, WriteParquet
from curator.batch import BatchResult
from curator.stages.base import BatchStage
from tests.conftest import ROOT, write_shards

IN_SHARD = r"segment 1/3: 0/3 shards, [1-9][\d,]* docs, [\d.]+/[\d.]+ MB, [\d,.]+ docs/s, ETA "


def _config(tmp_path: Path, executor: str) -> Path:
    inputs = tmp_path / "in"
    write_shards(inputs, 3)
    path = tmp_path / "p.yaml"
    path.write_text(f"""
name: progress
output: {tmp_path / "run"}
batch_bytes: 65536
executor: {executor}
stages:
  - {{type: read_jsonl, path: "{inputs}/*.jsonl"}}
  - {{type: length_filter, min_chars: 500}}
  - {{type: exact_dedup, buckets: 3}}
  - {{type: write_parquet}}
""")
    return path


def _curate(config: Path, **options) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "curator.cli", "run", str(config)], cwd=ROOT,
                          text=True, capture_output=True, timeout=300, **options)


@pytest.mark.parametrize("executor", ["{type: dask, workers: 1}", "{type: local}"])
def test_log_lines_show_progress_within_shards_phases_and_input_shards(tmp_path, executor):
    result = _curate(_config(tmp_path, executor))
    assert result.returncode == 0, result.stderr[-3000:]
    log = result.stderr
    assert re.search(IN_SHARD, log), log  # a worker's report before any shard was done
    stats = json.loads((tmp_path / "run" / "stats.json").read_text())
    read = stats["stages"][0]["in"]
    assert re.search(rf"segment 1/3: 3/3 shards, {read:,} docs, ", log), log
    for phase in ("hash 3/3", "group 3/3", "remove 3/3"):
        assert f"exact_dedup: {phase}" in log, log
    assert "3 shards run, 0 resumed" in " ".join(log.split())  # 3 input shards, 6 shard tasks


def test_a_terminal_gets_bars_with_docs_per_second(tmp_path):
    config = _config(tmp_path, "{type: local}")
    parent, child = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "curator.cli", "run", str(config)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=child)
    os.close(child)
    screen = b""
    while True:
        try:
            chunk = os.read(parent, 65536)
        except OSError:  # the terminal closed: the run is over
            break
        if not chunk:
            break
        screen += chunk
    assert proc.wait(timeout=60) == 0
    text = screen.decode(errors="replace")
    assert "━" in text and "docs/s" in text and "ETA" in text, text[-2000:]
    assert "exact_dedup: remove" in text


def _lines(stream) -> queue.Queue:
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in stream], daemon=True).start()
    return lines


def test_printed_dashboard_address_answers_in_thread_mode(tmp_path):
    """Every stage releases the GIL, so the workers are threads of the `curate` process; the
    input is a named pipe nobody writes to, which holds the run while the address is fetched."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    os.mkfifo(inputs / "held.jsonl.gz")
    config = tmp_path / "p.yaml"
    config.write_text(f"name: dash\noutput: {tmp_path / 'run'}\nexecutor: {{workers: 2}}\n"
                      "stages:\n"
                      f"  - {{type: read_jsonl, path: '{inputs}/*.jsonl.gz'}}\n"
                      "  - {type: write_parquet}\n")
    proc = subprocess.Popen([sys.executable, "-m", "curator.cli", "run", str(config)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        lines = _lines(proc.stderr)
        deadline = time.monotonic() + 120
        seen = []
        while not any("dashboard" in line and "http" in line for line in seen) \
                and time.monotonic() < deadline:
            seen.append(lines.get(timeout=max(0.1, deadline - time.monotonic())))
        assert any("threads in one process" in line for line in seen), seen
        url = re.search(r"https?://\S+", seen[-1]).group(0)
        assert url.startswith("http://127.0.0.1:"), seen[-1]  # fetch loopback only
        with urllib.request.urlopen(url, timeout=10) as page:
            assert page.status == 200
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()



class _Silent(BatchStage):
    """Logs nothing until the run has said where it stands: a shard task that is silent for a
    while (it waits on that line, not on a clock)."""

    type = "test_silent_batches"
    heard: ClassVar[threading.Event] = threading.Event()

    def process(self, batch: pa.Table) -> BatchResult:
        assert self.heard.wait(120), "no heartbeat line while the task was silent"
        return BatchResult(kept=batch)


def test_a_segment_that_logs_nothing_for_a_while_says_where_it_stands(tmp_path, monkeypatch,
                                                                       caplog):
    """A first run is never silent for long: a segment whose only shard takes longer than the
    heartbeat logs its tasks done and how long it has run."""
    from curator.runtime.worker import progress

    class Heard(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "running" in record.getMessage():
                _Silent.heard.set()

    monkeypatch.setattr(progress, "HEARTBEAT_S", 1.0)
    write_shards(tmp_path / "in", 1)
    handler = Heard()
    logging.getLogger("curator").addHandler(handler)
    try:
        with caplog.at_level(logging.INFO, logger="curator"):
            Pipeline([ReadJsonl(path=f"{tmp_path}/in/*.jsonl"), _Silent(), WriteParquet()]).run(
                output=tmp_path / "run", executor="local", progress=True)
    finally:
        logging.getLogger("curator").removeHandler(handler)
    beats = [r.getMessage() for r in caplog.records if "running" in r.getMessage()]
    assert beats and beats[0].startswith("segment 1/1: 0/1 shards done, running ")
