"""CPU seconds of work in a worker process: the process's CPU time over the work (its helper
threads included: Arrow's, torch's, numba's), shared equally among the tasks the process runs
side by side (a worker with several task threads). Exact where a process runs one task at a
time, as curator's CPU workers do; docs/report.md says more."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_running = 0  # tasks this process is running now


@contextmanager
def task_running() -> Iterator[None]:
    """Count the ``with`` body as one of the tasks this process runs now."""
    global _running
    with _lock:
        _running += 1
    try:
        yield
    finally:
        with _lock:
            _running -= 1


def cpu_now() -> float:
    """The process's CPU seconds so far (a start for :func:`cpu_since`)."""
    return time.process_time()


def cpu_since(start: float) -> float:
    """This task's share of the process's CPU seconds since ``start``."""
    return (time.process_time() - start) / max(1, _running)


_children = threading.local()  # per task thread: CPU seconds its sandbox children spent


def add_child_cpu(seconds: float) -> None:
    """Charge ``seconds`` of a child process's CPU (a sandbox's) to this thread's task."""
    _children.seconds = getattr(_children, "seconds", 0.0) + seconds


def child_cpu() -> float:
    """CPU seconds this thread's children were charged so far (a start for a difference)."""
    return getattr(_children, "seconds", 0.0)


def process_cpu(pid: int) -> float:
    """CPU seconds (user and system) process ``pid`` has spent; 0.0 where that cannot be read
    (it is gone, or the system has no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        fields = stat[stat.rindex(b")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0
