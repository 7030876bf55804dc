"""Run a command and measure it whole: wall seconds, CPU seconds of its process tree (every
descendant seen, daemons such as Ray's raylet included), peak RSS of the tree; descendants still
alive when the command ends (Ray and Xenna leave some behind) are killed."""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from dataclasses import dataclass

import psutil


@dataclass
class Measured:
    seconds: float
    cpu_seconds: float
    peak_rss_mb: float
    output: str
    returncode: int
    peak_process_mb: float = 0.0  # the largest single process
    peaks: dict[str, float] | None = None  # peak MB per process, named by its command line


def measure(cmd: list[str], interval: float = 0.05, env: dict | None = None) -> Measured:
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)
    root = psutil.Process(proc.pid)
    cpu: dict[int, float] = {}
    seen: dict[int, psutil.Process] = {}
    peak = 0.0
    own: dict[int, float] = {}
    names: dict[int, str] = {}
    chunks: list[str] = []
    reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read()), daemon=True)
    reader.start()
    while proc.poll() is None:
        rss = 0.0
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            tree = list(seen.values())
        for p in tree:
            try:
                times = p.cpu_times()
                cpu[p.pid] = times.user + times.system  # children counted as themselves
                mem = p.memory_info().rss
                rss += mem
                own[p.pid] = max(own.get(p.pid, 0), mem)
                if p.pid not in seen:
                    names[p.pid] = " ".join(p.cmdline()[:4])[-80:]
                seen[p.pid] = p
            except psutil.Error:
                continue
        peak = max(peak, rss)
        time.sleep(interval)
    seconds = time.perf_counter() - start
    reader.join()
    for p in seen.values():
        if p.pid != proc.pid and p.is_running():
            with contextlib.suppress(psutil.Error):
                p.kill()
    return Measured(seconds, sum(cpu.values()), peak / 2**20, "".join(chunks), proc.returncode,
                    max(own.values(), default=0) / 2**20,
                    {f"{pid} {names.get(pid, '')}": mb / 2**20 for pid, mb in own.items()})
