"""One writer per run directory: the lock file ``<root>/.curator.lock``.

The lock is created with ``O_CREAT|O_EXCL`` and holds JSON ``{host, pid, started, token, boot_id,
proc_start, heartbeat}`` (``proc_start``: field 22 of ``/proc/<pid>/stat``, against pid reuse). Its
holder keeps an ``flock`` on it for the life of the run (dropped by the kernel when the process
dies: the liveness signal on the same host) and a daemon thread refreshes the file's mtime, the
heartbeat that tells holders on other hosts (where ``flock`` may not reach, e.g. Lustre) alive.

A lock met on the same host (same hostname and boot id) is alive while its ``flock`` is held or
its process (pid with the same start time) exists; from another host, while its mtime is younger
than ``stale_after_s``. A dead or stale lock is taken over with one warning: it is renamed aside,
checked to be the very file judged (same inode, same bytes) and only then removed; a live lock
moved aside by a late contender is linked back. Remaining window: a third run that creates the
lock in the microseconds between such a move and its link-back makes two holders (warned).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

LOCK_FILE = ".curator.lock"
#: An unreadable lock file (a writer killed mid-write) younger than this is waited for.
GRACE_S = 5.0
log = logging.getLogger("curator")


class RunLocked(RuntimeError):
    """Another live run holds the run directory; the message names it in one line."""


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, start time in clock ticks since boot) of a live pid, None when gone."""
    try:
        rest = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return rest[0], int(rest[19])  # fields 3 (state) and 22 (starttime)


def _pid_alive(holder: dict) -> bool:
    pid = int(holder.get("pid", -1))
    if pid <= 0:
        return False
    if not Path("/proc/self/stat").exists():  # no procfs: the pid alone
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True
    stat = _proc_stat(pid)
    if stat is None or stat[0] in "ZX":
        return False
    return holder.get("proc_start") in (None, stat[1])


def _flock_held(fd: int) -> bool:
    """Whether another open file holds an flock on ``fd``'s file (False where unsupported)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def _one_line(value: Any) -> str:
    return " ".join(str(value).split()) or "?"


def _since(epoch: Any) -> str:
    try:
        return datetime.fromtimestamp(float(epoch)).isoformat(sep=" ", timespec="seconds")
    except (TypeError, ValueError, OverflowError, OSError):
        return "?"


def _who(holder: dict) -> str:
    return (f"host {_one_line(holder.get('host'))}, pid {_one_line(holder.get('pid'))}, "
            f"since {_since(holder.get('started'))}")


def _locked(root: Path, path: Path, holder: dict) -> RunLocked:
    err = RunLocked(f"{root} is being written by another run: {_who(holder)} (lock {path}); "
                    f"wait for it or stop it")
    err.holder, err.path = holder, path
    return err


def _parse(raw: bytes) -> dict | None:
    try:
        holder = json.loads(raw)
    except ValueError:
        return None
    return holder if isinstance(holder, dict) and "token" in holder else None


def _remove_if_same(path: Path, st: os.stat_result, raw: bytes) -> bool:
    """Remove the lock if it still is the file judged (inode ``st``, bytes ``raw``)."""
    aside = path.with_name(f"{path.name}.{secrets.token_hex(8)}.stale")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return False
    moved = os.stat(aside)
    if (moved.st_dev, moved.st_ino) == (st.st_dev, st.st_ino) and aside.read_bytes() == raw:
        aside.unlink()
        return True
    try:  # a newer lock, not the one judged: put it back
        os.link(aside, path)
    except FileExistsError:
        log.warning("lock %s changed hands during a take-over; its previous holder is left at %s",
                    path, aside)
        return False
    aside.unlink()
    return False


def _meet(root: Path, path: Path, stale_after_s: float, host: str, boot: str | None) -> bool:
    """Judge an existing lock: raise RunLocked if alive, remove it if dead or stale (True), or
    return False to look again (it vanished, changed, or is being written)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        st = os.fstat(fd)
        raw = os.pread(fd, 1 << 16, 0)
        holder = _parse(raw)
        age = time.time() - st.st_mtime
        if holder is None:
            if age < GRACE_S or _flock_held(fd):
                return False
            why = f"the unreadable lock file {path} ({st.st_size} bytes, {age:.0f} s old)"
        elif _alive(fd, holder, age, stale_after_s, host, boot):
            raise _locked(root, path, holder)
        elif _this_machine(holder, host, boot):
            why = f"a dead run ({_who(holder)}; process gone) (lock {path})"
        else:
            why = f"a stale run ({_who(holder)}; no heartbeat for {age:.0f} s) (lock {path})"
        if not _remove_if_same(path, st, raw):
            return False
        log.warning("%s: took over the run lock from %s", root, why)
        return True
    finally:
        os.close(fd)


def live_holder(root: Path, stale_after_s: float = 600.0) -> dict | None:
    """The holder of ``root``'s lock while it is alive, judged as a contender would (without
    taking the lock over or changing the file); None when there is no live run."""
    try:
        fd = os.open(Path(root) / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return None
    try:
        holder = _parse(os.pread(fd, 1 << 16, 0))
        age = time.time() - os.fstat(fd).st_mtime
        if holder is None or not _alive(fd, holder, age, stale_after_s, socket.gethostname(),
                                         _boot_id()):
            return None
        return holder
    finally:
        os.close(fd)


def _alive(fd: int, holder: dict, age: float, stale_after_s: float, host: str,
           boot: str | None) -> bool:
    """Whether a readable lock's holder lives: on this machine (same host and boot) its flock
    is held or its process is there; elsewhere its heartbeat is younger than ``stale_after_s``."""
    if _this_machine(holder, host, boot):
        return _flock_held(fd) or _pid_alive(holder)
    return age < stale_after_s


def _this_machine(holder: dict, host: str, boot: str | None) -> bool:
    return holder.get("host") == host and holder.get("boot_id") == boot


def _acquire(root: Path, path: Path, stale_after_s: float) -> tuple[int, dict]:
    host, boot, pid = socket.gethostname(), _boot_id(), os.getpid()
    stat = _proc_stat(pid)
    deadline = time.monotonic() + 2 * GRACE_S
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            if not _meet(root, path, stale_after_s, host, boot):
                if time.monotonic() > deadline:  # unreadable and still held: name no one
                    raise _locked(root, path, {}) from None
                time.sleep(0.02)
            continue
        with contextlib.suppress(OSError):  # before the content: readers test it only then
            fcntl.flock(fd, fcntl.LOCK_EX)
        now = time.time()
        me = {"host": host, "pid": pid, "started": now, "token": secrets.token_hex(16),
              "boot_id": boot, "proc_start": stat and stat[1], "heartbeat": now}
        os.write(fd, json.dumps(me).encode())
        os.fsync(fd)
        return fd, me


_HELD: set[int] = set()  # lock fds of this process: closed in a forked child (a worker), so
# that a worker outliving a killed driver does not keep its flock


def _close_held_in_child() -> None:
    for fd in _HELD:
        with contextlib.suppress(OSError):
            os.close(fd)
    _HELD.clear()


os.register_at_fork(after_in_child=_close_held_in_child)


def _beat(fd: int, stop: threading.Event, every_s: float) -> None:
    while not stop.wait(every_s):
        with contextlib.suppress(OSError):
            os.utime(fd)


@contextlib.contextmanager
def run_lock(root: Path, stale_after_s: float = 600.0,
             heartbeat_s: float | None = None) -> Iterator[dict]:
    """Hold ``root/.curator.lock`` (``root`` is created) for the ``with`` block; yield its content
    plus ``path``. Raise RunLocked if a live run holds it; take over a dead or stale one with a
    warning. The heartbeat (file mtime) is refreshed every ``heartbeat_s`` (default
    ``min(30, stale_after_s / 4)``); on exit the lock is removed only if it still holds our token.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    path = root / LOCK_FILE
    fd, me = _acquire(root, path, stale_after_s)
    _HELD.add(fd)
    every = heartbeat_s if heartbeat_s is not None else min(30.0, stale_after_s / 4)
    stop = threading.Event()
    beat = threading.Thread(target=_beat, args=(fd, stop, every), name="curator-run-lock",
                            daemon=True)
    beat.start()
    try:
        yield {**me, "path": path}
    finally:
        stop.set()
        beat.join()
        try:
            st, own = os.stat(path), os.fstat(fd)
            if (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino) and \
                    (_parse(path.read_bytes()) or {}).get("token") == me["token"]:
                path.unlink()
        except FileNotFoundError:
            pass
        finally:
            _HELD.discard(fd)
            os.close(fd)
