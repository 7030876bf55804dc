"""curator.halt, the hook the kill tests stop a run with, in real processes: each gets the
environment a run's processes inherit (the setting is read when curator.halt is imported)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from curator import halt
from tests.conftest import ROOT

BLOCKED_S = 1.0  # a blocked process must not have returned after this


def _python(code: str, halt_dir: Path, setting: str | None, *args: str) -> subprocess.Popen:
    """``python -c code *args`` (``halt`` imported), ``CURATOR_HALT`` set to ``setting`` (None:
    unset; ``CURATOR_HALT_DIR`` is set either way)."""
    env = {k: v for k, v in os.environ.items() if k not in (halt.HALT, halt.HALT_DIR)}
    env[halt.HALT_DIR] = str(halt_dir)
    if setting is not None:
        env[halt.HALT] = setting
    return subprocess.Popen([sys.executable, "-c", f"from curator import halt\n{code}", *args],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _finished(proc: subprocess.Popen) -> str:
    """Its output, once it ended well."""
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return out


def _blocked(proc: subprocess.Popen) -> str:
    """Assert that ``proc`` has not returned after BLOCKED_S; kill it; return its output."""
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=BLOCKED_S)
    finally:
        proc.kill()
    out, _ = proc.communicate(timeout=60)
    return out


def _wait_for_halt(halt_dir: Path, seconds: float = 60) -> dict:
    path = halt_dir / halt.HALTED
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"no {halt.HALTED} in {seconds} s"
        time.sleep(0.01)
    return json.loads(path.read_text(encoding="utf-8"))


def test_the_nth_arrival_over_two_processes_halts_and_says_where(tmp_path):
    setting = "shard-done:segment-00@3"
    first = _python("halt.point('shard-done:segment-00', 'part-00000')\n"
                    "halt.point('shard-done:segment-00', 'part-00001')\nprint('passed')",
                    tmp_path, setting)
    assert _finished(first) == "passed\n"  # arrivals 1 and 2
    assert not (tmp_path / halt.HALTED).exists()
    second = _python("print('before', flush=True)\n"
                     "halt.point('shard-done:segment-00', 'part-00007')\nprint('after')",
                     tmp_path, setting)
    assert _wait_for_halt(tmp_path) == {"point": "shard-done:segment-00", "key": "part-00007",
                                        "arrival": 3, "pid": second.pid}
    assert _blocked(second) == "before\n"


def test_arrivals_together_are_each_counted_once(tmp_path):
    """Two processes arrive 200 times each, side by side: the 400th arrival (the last) halts, so
    none was lost or counted twice, and the other process passed all of its own."""
    code = ("import sys, time\nfrom pathlib import Path\n"
            "while not Path(sys.argv[1]).exists(): time.sleep(0.001)\n"
            "for i in range(200): halt.point('phase-task:hash', f'{sys.argv[2]}-{i}')\n"
            "print('passed')")
    go = tmp_path / "go"
    procs = {tag: _python(code, tmp_path, "phase-task:hash@400", str(go), tag) for tag in "ab"}
    go.touch()
    record = _wait_for_halt(tmp_path)
    [tag] = [t for t, p in procs.items() if p.pid == record["pid"]]
    assert record == {"point": "phase-task:hash", "key": f"{tag}-199", "arrival": 400,
                      "pid": procs[tag].pid}
    assert _finished(procs["b" if tag == "a" else "a"]) == "passed\n"
    assert _blocked(procs[tag]) == ""


def test_other_names_pass(tmp_path):
    """A point of another name, or of the same kind in another scope, is no arrival."""
    proc = _python("for name in ('shard-done:segment-01', 'shard-done', 'shard-commit:segment-00',"
                   " 'stats'):\n    halt.point(name, 'part-00000')\nprint('passed')",
                   tmp_path, "shard-done:segment-00")
    assert _finished(proc) == "passed\n"
    assert not (tmp_path / halt.HALTED).exists()


def test_after_the_halt_every_point_blocks(tmp_path):
    stopped = _python("halt.point('phase-task:group', 'bucket-00002')", tmp_path,
                      "phase-task:group")
    try:
        assert _wait_for_halt(tmp_path)["key"] == "bucket-00002"
        later = _python("print('before', flush=True)\nhalt.point('stats')\nprint('after')",
                        tmp_path, "phase-task:group")
        assert _blocked(later) == "before\n"
        assert _blocked(stopped) == ""
    finally:
        stopped.kill()
        stopped.communicate(timeout=60)


def test_without_the_setting_points_are_a_no_op(tmp_path):
    proc = _python("for name in halt.POINTS:\n    halt.point(name, 'k')\n"
                   "print(halt._SETTING)", tmp_path, None)
    assert _finished(proc) == "None\n"
    assert list(tmp_path.iterdir()) == []
