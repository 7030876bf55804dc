"""How every benchmark script records its figures: with the commit, the machine, the command and
the date they were measured on, appended to the script's results file as one Markdown section.

    import harness

    harness.record(args.out, "\\n".join(lines))   # the script's Markdown, after it printed it
    with harness.Recording(args.results):         # or: what the block prints, as it prints it
        ...

A section reads::

    ## bench_io.py, 2026-12-05 10:11 UTC

    - commit: `2998213-dirty`
    - machine: AMD EPYC 7B13 (x86_64), 2 cores (2 usable), 23.4 GiB memory, GPU: none; ...
    - command: `PYTHONPATH=. .venv/bin/python benchmarks/bench_io.py --files 1`
    - date: 2026-12-05T10:11:12Z (UTC, the script's start), 83 s

    <the figures: the script's Markdown with its headings two levels down>

A results file is a log: the newest section is the last. ``-dirty`` means tracked files differ
from the commit (the ``benchmarks/results*`` files aside, which benchmarks write themselves); on a
machine without the checkout's ``.git`` set ``CURATOR_BENCH_COMMIT`` to the commit. With no
results file (``None``: a script whose printed output is its results, as ``make bench`` tees it)
the section's heading and provenance are printed to stdout instead.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parents[1]
COMMIT_ENV = "CURATOR_BENCH_COMMIT"
# Variables that change what a command measures: recorded in front of it when set.
ENV = ("PYTHONPATH", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "NUMBA_NUM_THREADS",
       "MIMALLOC_PURGE_DELAY")
# The script's start, near enough (benchmark scripts import this first): its clock, command line
# and environment then, before what it runs changes them (OMP_NUM_THREADS=1 appeared during a
# bench_fuzzy.py run that was not started with it).
STARTED = time.time()
ARGV = list(sys.argv)
ENVIRON = dict(os.environ)


def _output(cmd: list[str]) -> str | None:
    """The stripped stdout of ``cmd`` run in the checkout, None when it cannot run or fails."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=20, cwd=ROOT)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def commit() -> str:
    """``git rev-parse --short HEAD``, ``-dirty`` when tracked files differ from it."""
    if ENVIRON.get(COMMIT_ENV):
        return ENVIRON[COMMIT_ENV]
    head = _output(["git", "rev-parse", "--short", "HEAD"])
    if head is None:
        return f"not recorded (no git checkout; set {COMMIT_ENV})"
    changed = _output(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                       ":(exclude)benchmarks/results*"])
    return head if changed == "" else f"{head}-dirty"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model")):  # x86; some ARM kernels
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "CPU model not recorded"


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 2**20:.1f} GiB memory"
    except (OSError, ValueError, IndexError):
        pass
    return "memory not recorded"


def _gpus() -> str:
    names = _output(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"])
    if not names:
        return "none" if names is not None else "none (no nvidia-smi)"
    counts: dict[str, int] = {}
    for line in names.splitlines():
        name, _, memory = line.partition(",")
        key = f"{name.strip()} ({memory.strip()})" if memory.strip() else name.strip()
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n} x {key}" for key, n in counts.items())


def machine() -> dict[str, str]:
    """CPU model and architecture, cores (all, and usable by this process), memory, GPUs (from
    nvidia-smi), operating system, Python."""
    cores = os.cpu_count() or 0
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    return {"cpu": f"{_cpu_model()} ({platform.machine()})",
            "cores": f"{cores} cores ({usable} usable)", "memory": _memory(), "gpu": _gpus(),
            "os": platform.platform(), "python": f"Python {platform.python_version()}"}


def command() -> str:
    """The command line as run: the variables of ``ENV`` (and ``CURATOR_*``) that were set, the
    interpreter (relative to the working directory when under it) and ``sys.argv``."""
    env = [f"{k}={shlex.quote(ENVIRON[k])}" for k in sorted(ENVIRON)
           if (k in ENV or k.startswith("CURATOR_")) and k != COMMIT_ENV]
    python = sys.executable or "python"
    cwd = Path.cwd()
    if Path(python).is_relative_to(cwd):
        python = os.path.relpath(python, cwd)
    where = "" if cwd == ROOT else f" (in {cwd})"
    return " ".join([*env, shlex.join([python, *ARGV])]) + where


def provenance() -> dict[str, Any]:
    """Commit, machine, command and UTC start date of this run, and its seconds so far."""
    started = dt.datetime.fromtimestamp(STARTED, dt.timezone.utc)
    return {"commit": commit(), "machine": machine(), "command": command(),
            "date": started.strftime("%Y-%m-%dT%H:%M:%SZ"), "seconds": time.time() - STARTED}


def _demoted(body: str, levels: int = 2) -> str:
    """``body`` with its ATX headings ``levels`` deeper (at most 6), fenced code left alone."""
    out, fence = [], ""
    for line in body.splitlines():
        marker = line.lstrip()[:3]
        if marker in ("```", "~~~") and (not fence or marker == fence):
            fence = "" if fence else marker
        elif not fence and line.startswith("#") and line.lstrip("#")[:1] in (" ", ""):
            depth = len(line) - len(line.lstrip("#"))
            line = "#" * min(depth + levels, 6) + line[depth:]
        out.append(line)
    return "\n".join(out)


def fenced(text: str) -> str:
    """Plain printed text as a Markdown code block."""
    return f"```text\n{text.rstrip()}\n```"


def section(body: str, *, title: str | None = None, figures: Mapping[str, Any] | None = None,
            prov: Mapping[str, Any] | None = None) -> str:
    """One Markdown section: heading, provenance, ``body`` (headings demoted), ``figures`` as
    JSON."""
    prov = prov or provenance()
    m = prov["machine"]
    date = prov["date"]
    lines = [f"## {title or Path(ARGV[0]).name}, {date[:10]} {date[11:16]} UTC", "",
             f"- commit: `{prov['commit']}`",
             f"- machine: {m['cpu']}, {m['cores']}, {m['memory']}, GPU: {m['gpu']}; {m['os']}; "
             f"{m['python']}",
             f"- command: `{prov['command']}`",
             f"- date: {date} (UTC, the script's start), {prov['seconds']:.0f} s", ""]
    if body.strip():
        lines += [_demoted(body.strip()), ""]
    if figures:
        lines += ["Figures (JSON):", "", "```json",
                  json.dumps(figures, indent=1, default=str), "```", ""]
    return "\n".join(lines)


def record(results: str | Path | None, body: str = "", *, title: str | None = None,
           figures: Mapping[str, Any] | None = None) -> str:
    """Append ``section(body, ...)`` to ``results`` (made if missing); with ``results`` None
    print it instead. Returns the section."""
    text = section(body, title=title, figures=figures)
    if results is None:
        print("\n" + text, flush=True)
        return text
    path = Path(results)
    path.parent.mkdir(parents=True, exist_ok=True)
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    with open(path, "a", encoding="utf-8") as f:
        f.write(("\n" if old and not old.endswith("\n") else "") + ("\n" if old else "") + text)
    print(f"recorded in {path}", file=sys.stderr)
    return text


def add_results_argument(parser: Any, default: str | Path | None = None) -> None:
    """``--results FILE`` for a script whose printed output is its figures."""
    parser.add_argument("--results", type=Path, default=default, metavar="FILE",
                        help="append the printed figures, with commit, machine and command, to "
                             "FILE as a Markdown section (default: "
                             + (f"{default}" if default else "print the provenance after them")
                             + ")")


class _Tee(io.TextIOBase):
    def __init__(self, *streams: TextIO) -> None:
        self.streams = streams

    def write(self, text: str) -> int:
        for stream in self.streams:
            stream.write(text)
        return len(text)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()

    def isatty(self) -> bool:
        return self.streams[0].isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.streams[0], "encoding", None) or "utf-8"


class Recording:
    """Copy what the block prints; when it ends without an exception, ``record`` it (as a text
    block, with ``figures``: a dict the block may fill) in ``results``, or with ``results`` None
    print only the provenance after it."""

    def __init__(self, results: str | Path | None, *, title: str | None = None) -> None:
        self.results, self.title = results, title
        self.figures: dict[str, Any] = {}
        self._printed = io.StringIO()

    def __enter__(self) -> Recording:
        self._stdout = sys.stdout
        sys.stdout = _Tee(self._stdout, self._printed)
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        sys.stdout = self._stdout
        if kind is not None:
            return
        if self.results is None:
            record(None, title=self.title)
        else:
            record(self.results, fenced(self._printed.getvalue()), title=self.title,
                   figures=self.figures)
