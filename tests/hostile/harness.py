"""Runs one pipeline over hostile inputs as a user would (``curate run`` in a process of its
own) under a wall-clock bound and an address-space bound, and checks the promises every such run
keeps: no traceback, no hang, no memory blow-up, accounting holds, every bad record failed with a
reason and a position, and the good documents beside the bad ones kept.

Memory is bounded two ways, neither depending on timing: every process of the run gets
``RLIMIT_AS`` = ``MEMORY_BYTES`` (a blow-up fails to allocate instead of taking the machine), and
the largest resident set of any of them, as the kernel keeps it for reaped processes
(``getrusage(RUSAGE_CHILDREN).ru_maxrss`` in a wrapper whose only child is the run), must stay
under ``PEAK_RSS_BYTES``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import ROOT, assert_accounting

#: What one hostile run may take: seconds of wall clock, bytes of address space per process, and
#: bytes resident in its largest process.
WALL_S = 180
MEMORY_BYTES = 3 << 30
PEAK_RSS_BYTES = 1536 << 20

#: Runs the command with the address-space bound, then reports the largest resident set of
#: the processes it reaped (the run and, through their parents, every process below it).
_WRAPPER = """
import resource, subprocess, sys
limit, report, *command = sys.argv[1:]
if int(limit):
    resource.setrlimit(resource.RLIMIT_AS, (int(limit), int(limit)))
code = subprocess.call(command)
with open(report, "w") as f:
    f.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024))
sys.exit(code)
"""


@dataclass
class Outcome:
    returncode: int
    stdout: str
    stderr: str
    run_dir: Path
    peak_rss: int = 0  # bytes: the largest resident set of any process of the run

    def stats(self) -> dict:
        return json.loads((self.run_dir / "stats.json").read_text())

    def errors(self, stage: str | None = None) -> list[dict]:
        """Every record of ``errors/`` (of one stage, or all), each with its reason and place."""
        folder = self.run_dir / "errors"
        files = sorted((folder / stage if stage else folder).rglob("*.jsonl"))
        return [json.loads(line) for f in files for line in f.read_text().splitlines() if line]

    def kept(self, writer: str = "write_parquet") -> list[dict]:
        import pyarrow.parquet as pq

        folder = self.run_dir / writer
        if not folder.exists() or not any(folder.glob("*.parquet")):
            return []
        return pq.read_table(folder).to_pylist()


def run_hostile(config: Path, run_dir: Path, *extra: str, wall_s: float = WALL_S,
                memory: bool = True) -> Outcome:
    """``curate run config --output run_dir``; fails the test on a hang (``wall_s``: the whole
    process group is killed), a traceback, or a process over ``PEAK_RSS_BYTES`` resident.
    ``memory``: also bound the address space (off for GPU/torch stacks that reserve it)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "peak_rss"
        command = [sys.executable, "-c", _WRAPPER, str(MEMORY_BYTES if memory else 0),
                   str(report), sys.executable, "-m", "curator.cli", "run", str(config),
                   "--output", str(run_dir), *extra]
        env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
        with subprocess.Popen(command, cwd=ROOT, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, start_new_session=True,
                              env=env) as process:
            try:
                stdout, stderr = process.communicate(timeout=wall_s)
            except subprocess.TimeoutExpired as err:
                raise AssertionError(f"hang: {config} ran past {wall_s} s; where each "
                                     f"thread was:\n{_stacks_then_kill(process)}") from err
        peak = int(report.read_text()) if report.exists() else 0
    assert "Traceback" not in stderr, stderr[-4000:]
    assert "MemoryError" not in stderr, stderr[-4000:]
    assert peak < PEAK_RSS_BYTES, f"a process of the run held {peak >> 20} MiB resident"
    return Outcome(process.returncode, stdout, stderr, run_dir, peak)


def _stacks_then_kill(process: subprocess.Popen) -> str:
    """SIGABRT to the hung run's process group (faulthandler prints every thread's stack),
    then SIGKILL; returns the tail of what they printed."""
    os.killpg(process.pid, signal.SIGABRT)
    try:
        _, stderr = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        _, stderr = process.communicate()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # what the abort left of the group
    return stderr[-12000:]


def assert_kept_promises(outcome: Outcome) -> dict:
    """Exit 0, accounting holds, every failure has a reason and names where it was."""
    assert outcome.returncode == 0, outcome.stderr[-4000:]
    stats = assert_accounting(outcome.run_dir)
    for error in outcome.errors():
        assert error.get("reason") or error.get("error"), error
        assert error.get("file"), error
        assert "MemoryError" not in json.dumps(error), error
    return stats
