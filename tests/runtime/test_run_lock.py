"""The run lock against real processes: a live holder, a SIGKILLed one, other hosts, races."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from curator.runtime.driver import run_lock as run_lock_module
from curator.runtime.driver.run_lock import LOCK_FILE, RunLocked, _boot_id, _proc_stat, run_lock

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(120)

# Takes the lock (after a line on stdin with "go"), prints "held <pid>" and holds it until stdin
# closes; or prints "locked <message>".
CHILD = r"""
import sys
from pathlib import Path
from curator.runtime.driver.run_lock import RunLocked, run_lock
if sys.argv[2] == "go":
    sys.stdin.readline()
try:
    with run_lock(Path(sys.argv[1])) as me:
        print("held", me["pid"], flush=True)
        sys.stdin.read()
except RunLocked as err:
    print("locked", err, flush=True)
"""


@pytest.fixture
def spawn():
    children: list[subprocess.Popen] = []

    def start(root: Path, go: bool = False) -> subprocess.Popen:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(root), "go" if go else "-"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                cwd=ROOT, env=env)
        children.append(proc)
        return proc

    yield start
    for proc in children:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for f in (proc.stdin, proc.stdout):
            f.close()


@pytest.fixture
def warnings(caplog):
    """The warnings of logger "curator" (which the CLI sets not to propagate)."""
    logger = logging.getLogger("curator")
    saved = logger.propagate, logger.level
    logger.addHandler(caplog.handler)
    logger.propagate, logger.level = False, logging.INFO

    def read() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]

    yield read
    logger.removeHandler(caplog.handler)
    logger.propagate, logger.level = saved


def write_lock(root: Path, age_s: float, **fields) -> Path:
    """A lock file written as if by another run, its mtime (the heartbeat) ``age_s`` old."""
    root.mkdir(parents=True, exist_ok=True)
    then = time.time() - age_s
    holder = {"host": "elsewhere", "pid": 4242, "started": then - 60, "token": "theirs",
              "boot_id": "other-boot", "proc_start": 1, "heartbeat": then, **fields}
    path = root / LOCK_FILE
    path.write_text(json.dumps(holder))
    os.utime(path, (then, then))
    return path


def held_line(proc: subprocess.Popen) -> int:
    line = proc.stdout.readline().split()
    assert line[:1] == ["held"], line
    return int(line[1])


def test_live_holder_in_another_process(tmp_path, spawn):
    child = spawn(tmp_path)
    assert held_line(child) == child.pid
    holder = json.loads((tmp_path / LOCK_FILE).read_text())
    with pytest.raises(RunLocked) as err, run_lock(tmp_path):
        pass
    msg = str(err.value)
    since = datetime.fromtimestamp(holder["started"]).isoformat(sep=" ", timespec="seconds")
    assert "\n" not in msg
    assert f"host {socket.gethostname()}, pid {child.pid}, since {since}" in msg
    assert f"(lock {tmp_path / LOCK_FILE})" in msg
    child.stdin.close()  # the child releases: the lock is free again
    assert child.wait() == 0
    assert not (tmp_path / LOCK_FILE).exists()
    with run_lock(tmp_path):
        pass


def test_sigkilled_holder_is_taken_over(tmp_path, spawn, warnings):
    child = spawn(tmp_path)
    pid = held_line(child)
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == pid
    with run_lock(tmp_path) as me:
        assert json.loads((tmp_path / LOCK_FILE).read_text())["token"] == me["token"]
    [warning] = warnings()
    assert f"pid {pid}," in warning and "dead run" in warning and "\n" not in warning


def test_flock_alone_tells_a_holder_alive(tmp_path, spawn):
    """As if the holder's pid were not ours to see (another pid namespace, same hostname)."""
    child = spawn(tmp_path)
    held_line(child)
    path = tmp_path / LOCK_FILE
    holder = {**json.loads(path.read_text()), "proc_start": -1}
    with open(path, "r+") as f:  # the same inode, which the child flocks
        f.write(json.dumps(holder))
        f.truncate()
    with pytest.raises(RunLocked, match=f"pid {child.pid},"), run_lock(tmp_path):
        pass

def test_same_process_second_lock_is_refused(tmp_path):
    with run_lock(tmp_path) as me, pytest.raises(RunLocked, match=f"pid {me['pid']},"), \
            run_lock(tmp_path):
        pass


def test_reused_pid_is_dead_and_live_pid_is_alive_without_flock(tmp_path, warnings):
    """No flock is held on these files: the pid and its start time decide."""
    mine = {"host": socket.gethostname(), "boot_id": _boot_id(), "pid": os.getpid()}
    write_lock(tmp_path, 0, **mine, proc_start=_proc_stat(os.getpid())[1])
    with pytest.raises(RunLocked, match=f"pid {os.getpid()},"), run_lock(tmp_path):
        pass
    write_lock(tmp_path, 0, **mine, proc_start=-1)  # our pid, another process's start time
    with run_lock(tmp_path):
        pass
    [warning] = warnings()
    assert f"pid {os.getpid()}," in warning and "dead run" in warning


def test_other_host(tmp_path, warnings):
    path = write_lock(tmp_path, age_s=5)
    with pytest.raises(RunLocked) as err, run_lock(tmp_path, stale_after_s=600):
        pass
    assert "host elsewhere, pid 4242," in str(err.value) and "\n" not in str(err.value)
    assert json.loads(path.read_text())["token"] == "theirs"
    assert warnings() == []

    write_lock(tmp_path, age_s=700)
    with run_lock(tmp_path, stale_after_s=600) as me:
        assert json.loads(path.read_text())["token"] == me["token"]
    [warning] = warnings()
    assert "host elsewhere, pid 4242," in warning and "no heartbeat for 70" in warning


def test_heartbeat_refreshes_the_mtime(tmp_path):
    with run_lock(tmp_path, heartbeat_s=0.05) as me:
        os.utime(me["path"], (1000, 1000))
        deadline = time.monotonic() + 60
        while me["path"].stat().st_mtime < time.time() - 600:
            assert time.monotonic() < deadline, "no heartbeat within 60 s"
            time.sleep(0.01)


def test_release_removes_only_its_own_lock(tmp_path):
    path = tmp_path / "new" / LOCK_FILE
    with run_lock(path.parent) as me:
        assert me["path"] == path and json.loads(path.read_text())["pid"] == os.getpid()
    assert not path.exists()
    with run_lock(path.parent):
        path.write_text(json.dumps({"token": "someone else"}))
    assert json.loads(path.read_text()) == {"token": "someone else"}


def test_empty_lock_file_past_the_grace_is_taken_over(tmp_path, warnings):
    path = tmp_path / LOCK_FILE
    path.write_bytes(b"")
    os.utime(path, (time.time() - 60,) * 2)
    with run_lock(tmp_path) as me:
        assert json.loads(path.read_text())["token"] == me["token"]
    [warning] = warnings()
    assert str(path) in warning and "unreadable" in warning


@pytest.mark.parametrize("round_", range(3))
def test_two_contenders_for_a_stale_lock(tmp_path, spawn, round_):
    """Both start at once (a line on stdin): exactly one holds, the other names it."""
    write_lock(tmp_path, age_s=10_000)
    a, b = spawn(tmp_path, go=True), spawn(tmp_path, go=True)
    for child in (a, b):
        child.stdin.write("go\n")
        child.stdin.flush()
    lines = {child.pid: child.stdout.readline() for child in (a, b)}
    held = [pid for pid, line in lines.items() if line.startswith("held")]
    assert len(held) == 1, lines
    [loser] = [line for line in lines.values() if line.startswith("locked")]
    assert f"pid {held[0]}," in loser
    assert not list(tmp_path.glob("*.stale"))


def test_live_lock_moved_aside_by_a_late_contender_is_put_back(tmp_path, spawn, monkeypatch):
    """We judge a lock stale; before we move it aside, another run takes it over: we move the
    new live lock aside, see it is not the one judged, link it back and name its holder."""
    write_lock(tmp_path, age_s=10_000)
    real, child = run_lock_module._remove_if_same, None

    def late(path, st, raw):
        nonlocal child
        child = spawn(tmp_path)
        held_line(child)
        return real(path, st, raw)

    monkeypatch.setattr(run_lock_module, "_remove_if_same", late)
    with pytest.raises(RunLocked) as err, run_lock(tmp_path):
        pass
    assert f"pid {child.pid}," in str(err.value)
    assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == child.pid
    assert sorted(p.name for p in tmp_path.iterdir()) == [LOCK_FILE]
