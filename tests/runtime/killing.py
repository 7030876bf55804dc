"""Kill a real ``curate run`` with SIGKILL at a chosen point, resume it, compare with a reference.

A run is started with ``start_new_session=True``, so ``os.killpg`` takes the driver, the Dask
scheduler and every worker process at once. The kill point is found by polling the run directory
(shard manifests, phase markers under ``_work/segment-NN/<phase>/_done/``, output files) with a
deadline. Output is compared byte for byte; ``stats.json`` and the manifests are compared with
their timing fields left out.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TIMING = {"seconds", "executor_start_seconds", "timeline"}
#: Files of a run that are not output bytes: the config it was started with, and the files that
#: hold timings (compared without them by :func:`stats` and :func:`manifests`).
NOT_OUTPUT = {"run.json", "stats.json", "report.html"}
POLL_S = 0.003


class KillMissed(AssertionError):
    """The run was not cut where intended (it ended first, or the kill landed elsewhere)."""


# ------------------------------------------------------------------------------- processes
def start(config: Path, output: Path, log: Path, *extra: str) -> subprocess.Popen:
    """``curate run config --output output`` in a session of its own, output to ``log``."""
    with open(log, "ab") as f:
        return subprocess.Popen(
            [sys.executable, "-m", "curator.cli", "run", str(config), "--output", str(output),
             *extra], cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)


def finish(proc: subprocess.Popen, log: Path, timeout: float = 300) -> str:
    """Wait for a run to end; assert it succeeded; return its log."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        raise AssertionError(f"run did not end in {timeout} s:\n{tail(log)}") from None
    text = log.read_text(errors="replace")
    assert proc.returncode == 0, text[-4000:]
    return text


def run(config: Path, output: Path, log: Path, timeout: float = 300) -> str:
    """A whole run, not interrupted."""
    return finish(start(config, output, log), log, timeout)


def tail(log: Path, chars: int = 4000) -> str:
    return log.read_text(errors="replace")[-chars:] if log.exists() else ""


def _group_alive(pgid: int) -> list[int]:
    """Processes of group ``pgid`` that are not zombies."""
    alive = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2:].split()  # after "pid (comm) "
        if int(fields[2]) == pgid and fields[0] != b"Z":
            alive.append(int(entry.name))
    return alive


def kill_group(proc: subprocess.Popen, within: float = 10) -> None:
    """SIGKILL the run's whole process group; return once none of its processes is left."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + within
    while (left := _group_alive(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not left, f"processes {left} of the killed run survived SIGKILL"


def kill_when(proc: subprocess.Popen, ready: Callable[[], bool], what: str, log: Path,
              deadline_s: float = 120, then: Callable[[], bool] | None = None) -> None:
    """Poll ``ready()``; when it holds, SIGKILL the run's process group (driver, scheduler,
    workers). Fails when the run ends first or the deadline passes.

    With ``then``: when ``ready()`` holds, stop the driver (SIGSTOP: it runs the scheduler and
    writes the dataset-level files) while the workers finish the tasks they hold, and SIGKILL
    the group once ``then()`` holds. That cuts a run in a window too narrow to hit by polling
    (between the last shard's commit and the driver's finalize, say)."""
    deadline = time.monotonic() + deadline_s
    try:
        while not ready():
            if proc.poll() is not None:
                raise KillMissed(f"the run ended (rc {proc.returncode}) before {what}:\n"
                                 f"{tail(log)}")
            if time.monotonic() > deadline:
                raise KillMissed(f"no {what} within {deadline_s} s:\n{tail(log)}")
            time.sleep(POLL_S)
        if then is not None:
            os.kill(proc.pid, signal.SIGSTOP)
            while not then():
                if time.monotonic() > deadline:
                    raise KillMissed(f"driver stopped, but the workers did not get to {what} "
                                     f"within {deadline_s} s:\n{tail(log)}")
                time.sleep(POLL_S)
    finally:
        kill_group(proc)


# ------------------------------------------------------------------------------- run directory
def count(folder: Path, pattern: str = "*.json") -> int:
    """Files in ``folder`` matching ``pattern`` (0 when it does not exist)."""
    try:
        return sum(1 for _ in folder.glob(pattern))
    except OSError:
        return 0


def markers(run_dir: Path, segment: int, phase: str) -> int:
    """Tasks of a dataset stage's ``phase`` that committed their marker."""
    return count(run_dir / "_work" / f"segment-{segment:02d}" / phase / "_done")


def shards_done(run_dir: Path, segment: int) -> int:
    """Shards of a segment whose manifest is committed."""
    return count(run_dir / "_manifests" / f"segment-{segment:02d}", "part-*.json")


def temporaries(run_dir: Path) -> list[Path]:
    return sorted(run_dir.rglob("*.tmp"))


def _drop_timing(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_timing(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [_drop_timing(v) for v in value]
    return value


def outputs(run_dir: Path) -> dict[str, bytes]:
    """Every file of the run (outputs, rejected/, errors/, writers' dataset files, the dedup
    work files) but for the config, the timed files and the manifests."""
    out = {}
    for path in sorted(run_dir.rglob("*")):
        rel = path.relative_to(run_dir)
        if path.is_file() and str(rel) not in NOT_OUTPUT and rel.parts[0] != "_manifests":
            out[str(rel)] = path.read_bytes()
    return out


def manifests(run_dir: Path) -> dict[str, Any]:
    """Shard manifests (counts, files with sizes and xxh3-128) without timings."""
    return {str(p.relative_to(run_dir)): _drop_timing(json.loads(p.read_text()))
            for p in sorted((run_dir / "_manifests").rglob("*.json"))}


def stats(run_dir: Path) -> dict[str, Any]:
    """``stats.json`` (the funnel and every stage's facts) without timings."""
    return _drop_timing(json.loads((run_dir / "stats.json").read_text()))


def differences(run_dir: Path, reference: Path) -> list[str]:
    """What differs between two finished runs: file names first, then bytes."""
    got, want = outputs(run_dir), outputs(reference)
    diff = [f"missing {name}" for name in sorted(set(want) - set(got))]
    diff += [f"extra {name}" for name in sorted(set(got) - set(want))]
    diff += [f"bytes differ: {name} ({_how(name, got[name], want[name])})"
             for name in sorted(set(got) & set(want)) if got[name] != want[name]]
    if manifests(run_dir) != manifests(reference):
        diff.append("manifests differ")
    if stats(run_dir) != stats(reference):
        diff.append("stats.json differs")
    diff += [f"temporary file left: {p.relative_to(run_dir)}" for p in temporaries(run_dir)]
    return diff


def _how(name: str, got: bytes, want: bytes) -> str:
    """How two versions of a file differ: columns, rows, or only bytes."""
    if name.endswith(".parquet"):
        import io

        import pyarrow.parquet as pq

        a, b = pq.read_table(io.BytesIO(got)), pq.read_table(io.BytesIO(want))
        if a.column_names != b.column_names:
            return f"columns {a.column_names}, reference {b.column_names}"
        if a.schema != b.schema:
            return f"schema {a.schema}, reference {b.schema}"
        return "rows differ" if not a.equals(b) else "same rows and schema, other bytes"
    if len(got) != len(want):
        return f"{len(got)} bytes, reference {len(want)}"
    at = next(i for i, (x, y) in enumerate(zip(got, want, strict=True)) if x != y)
    return f"first difference at byte {at}"


# ------------------------------------------------------------------------------- kill points
@dataclass(frozen=True)
class KillPoint:
    """Kill when ``ready(run_dir)`` holds (or stop the driver then, and kill when
    ``then(run_dir)`` holds); afterwards ``landed(run_dir)`` says whether the run was cut where
    intended (a phase started and not finished): None, or what went wrong."""

    name: str
    ready: Callable[[Path], bool]
    landed: Callable[[Path], str | None]
    then: Callable[[Path], bool] | None = None  # see kill_when


def in_phase(segment: int, phase: str, tasks: int, at: int) -> KillPoint:
    """Kill once ``at`` of the ``tasks`` markers of ``phase`` exist (the phase must not be over:
    the kill is checked to have left it between 1 and ``tasks - 1`` markers)."""
    def landed(run_dir: Path) -> str | None:
        n = markers(run_dir, segment, phase)
        return None if 0 < n < tasks else f"{phase}: {n} of {tasks} tasks done at the kill"

    return KillPoint(f"{phase}@{at}/{tasks}",
                     lambda run_dir: markers(run_dir, segment, phase) >= at, landed)


def in_shards(segment: int, shards: int, at: int) -> KillPoint:
    """Kill once ``at`` of the segment's ``shards`` are committed (the segment not over)."""
    def landed(run_dir: Path) -> str | None:
        n = shards_done(run_dir, segment)
        return None if 0 < n < shards else f"segment {segment}: {n} of {shards} shards at kill"

    return KillPoint(f"segment-{segment:02d}@{at}/{shards}",
                     lambda run_dir: shards_done(run_dir, segment) >= at, landed)


def kill_and_resume(config: Path, run_dir: Path, point: KillPoint, log: Path,
                    deadline_s: float = 120) -> str:
    """Start a run in ``run_dir`` (emptied first), kill it at ``point``, check where the kill
    landed, run the same command again to the end; return the resumed run's log."""
    if run_dir.exists():
        shutil.rmtree(run_dir)
    proc = start(config, run_dir, log)
    then = point.then
    kill_when(proc, lambda: point.ready(run_dir), point.name, log, deadline_s,
              None if then is None else lambda: then(run_dir))
    missed = point.landed(run_dir)
    if missed is not None:
        raise KillMissed(f"kill missed {point.name}: {missed}\n{tail(log)}")
    if (run_dir / "stats.json").exists():
        raise KillMissed(f"the run had finished before the kill at {point.name}")
    return run(config, run_dir, log)


def reference_run(config: Path, run_dir: Path, keep_as: Path, log: Path) -> Path:
    """An uninterrupted run made in ``run_dir`` (the path the killed runs use: writers may
    record absolute paths, as ``blend.json`` does) and moved to ``keep_as``."""
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run(config, run_dir, log)
    run_dir.rename(keep_as)
    return keep_as


# ------------------------------------------------------------------------------- cases
def write_inputs(folder: Path, shards: int, copies: int) -> Path:
    """``copies`` of the bundled sample over ``shards`` JSONL files (so every document has
    duplicates in other shards), and two bad lines (errors/) in a few of them."""
    from tests.conftest import write_shards

    paths = write_shards(folder, shards, copies=copies)
    for path in paths[1::7]:
        with open(path, "ab") as f:
            f.write(b'{"text": "unterminated\n{"text": "caf\xe9 au lait"}\n')
    return folder


def dedup_config(folder: Path, inputs: Path, dedup: str, executor: str = "dask",
                 batch_bytes: int = 65536) -> Path:
    """read_jsonl → length_filter → ``dedup`` (a YAML flow mapping) → write_parquet: a shard
    segment, the barrier, and a shard segment after it."""
    config = folder / "pipeline.yaml"
    config.write_text(f"""
name: kill
batch_bytes: {batch_bytes}
executor: {{type: {executor}, workers: 2, processes: true}}
stages:
  - {{type: read_jsonl, path: "{inputs}/*.jsonl"}}
  - {{type: length_filter, min_chars: 2000}}
  - {dedup}
  - {{type: write_parquet, row_group_rows: 50}}
""")
    return config


FUZZY_SHARDS, FUZZY_BUCKETS = 24, 32


def fuzzy_case(folder: Path, device: str = "cpu", rounds: bool = True) -> Path:
    """Inputs and config of the fuzzy_dedup kill tests (and ``benchmarks/kill_resume.py``):
    with ``rounds`` the component rounds, each a phase to cut; else the default for a graph
    this small, one ``components`` task."""
    inputs = write_inputs(folder / "in", FUZZY_SHARDS, copies=8)
    whole = ", whole_graph_edges: 0" if rounds else ""
    return dedup_config(folder, inputs, f"{{type: fuzzy_dedup, buckets: {FUZZY_BUCKETS}, "
                                        f"device: {device}{whole}}}")


def fuzzy_phases(rounds: int = 3) -> list[tuple[int, str, int]]:
    """Where a fuzzy_dedup run can be cut, in order, as (segment, phase, tasks): the shards
    before the barrier (phase ``""``), each phase of the stage (``rounds`` component rounds),
    the shards after it."""
    s, b = FUZZY_SHARDS, FUZZY_BUCKETS
    phases = [("signatures", s), ("edges", b), *[(f"cc-r{r:03d}", b) for r in range(rounds)],
              ("labels", b), ("members", s), ("clusters", b), ("remove", s)]
    return [(0, "", s), *[(1, p, n) for p, n in phases], (2, "", s)]


def kill_point(segment: int, phase: str, tasks: int, at: int) -> KillPoint:
    """Cut a shard segment (``phase`` empty) or a phase once ``at`` of its tasks are done."""
    return in_phase(segment, phase, tasks, at) if phase else in_shards(segment, tasks, at)


def fuzzy_points(rounds: int = 3) -> list[KillPoint]:
    """Every place of :func:`fuzzy_phases`, cut a quarter of the way through."""
    return [kill_point(seg, phase, n, n // 4) for seg, phase, n in fuzzy_phases(rounds)]
