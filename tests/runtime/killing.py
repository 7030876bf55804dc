"""Kill a real ``curate run`` with SIGKILL at a chosen point, resume it, compare with a reference.

A run is started with ``start_new_session=True``, so ``os.killpg`` takes the driver, the Dask
scheduler and every worker process at once. The kill point is a point of :mod:`curator.halt`:
the run is started with ``CURATOR_HALT=NAME@N``, the process that arrives there the N-th time
writes ``halted.json`` and blocks, and so does every process that reaches a point after it. The
run waits for the kill, so there is no clock to race: the test waits for ``halted.json``, kills
the process group, and checks from the run's manifests and markers that it stopped where the
:class:`KillPoint` names. Output is compared byte for byte; ``stats.json`` and the manifests are
compared with their timing fields left out.
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

from curator import halt as hook
from tests.published import VOLATILE

ROOT = Path(__file__).resolve().parents[2]
#: Fields that differ between two runs of the same bytes: timings, and when and where a record
#: saw a file it names (``seen``: its mtime and inode).
TIMING = VOLATILE  # one list of what varies between equal runs: tests/published.py
#: Files of a run that are not output bytes: the config it was started with, and the files that
#: hold timings (compared without them by :func:`stats` and :func:`manifests`).
NOT_OUTPUT = {"run.json", "stats.json", "report.html", "run.log", "progress.json"}


class KillMissed(AssertionError):
    """The run was not cut where intended (it ended first, or the kill landed elsewhere)."""


# ------------------------------------------------------------------------------- processes
def start(config: Path, output: Path, log: Path, *extra: str, halt: str | None = None,
          halt_dir: Path | None = None) -> subprocess.Popen:
    """``curate run config --output output`` in a session of its own, output to ``log``. With
    ``halt`` (``NAME`` or ``NAME@N``, a point of :data:`curator.halt.POINTS`) the run stops there
    and writes ``halt_dir/halted.json``; without, the hook is off (not inherited from here)."""
    env = {k: v for k, v in os.environ.items() if k not in (hook.HALT, hook.HALT_DIR)}
    if halt is not None:
        kind = halt.partition("@")[0].partition(":")[0]
        if kind not in hook.POINTS or halt_dir is None:
            raise ValueError(f"halt {halt!r}: not a point of curator.halt, or no halt_dir")
        halt_dir.mkdir(parents=True, exist_ok=True)
        env.update({hook.HALT: halt, hook.HALT_DIR: str(halt_dir)})
    with open(log, "ab") as f:
        return subprocess.Popen(
            [sys.executable, "-m", "curator.cli", "run", str(config), "--output", str(output),
             *extra], cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT,
            start_new_session=True)


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


def wait_halted(proc: subprocess.Popen, halt_dir: Path, what: str, log: Path,
                deadline_s: float = 300) -> dict[str, Any]:
    """Wait for the run started with ``halt_dir`` to halt (``halted.json``); return the halted
    record (point, key, arrival, pid). The run stays halted until :func:`kill_group`. It waits
    for the kill, so the deadline only guards against a hung run; a run that ends first never
    reached the point: :class:`KillMissed` (its process group killed)."""
    halted = halt_dir / hook.HALTED
    deadline = time.monotonic() + deadline_s
    while not halted.exists():
        ended = proc.poll() is not None
        if ended or time.monotonic() > deadline:
            kill_group(proc)
            why = f"ended (rc {proc.returncode})" if ended else f"did not halt in {deadline_s} s"
            raise KillMissed(f"the run {why} before {what}:\n{tail(log)}")
        time.sleep(0.05)  # the run is halted once the file exists: no window to miss
    return json.loads(halted.read_text(encoding="utf-8"))


def halt_and_kill(proc: subprocess.Popen, halt_dir: Path, what: str, log: Path,
                  deadline_s: float = 300) -> dict[str, Any]:
    """:func:`wait_halted`, then SIGKILL the run's process group (driver, scheduler, workers);
    return the halted record."""
    try:
        return wait_halted(proc, halt_dir, what, log, deadline_s)
    finally:
        kill_group(proc)


# ------------------------------------------------------------------------------- run directory
def count(folder: Path, pattern: str = "*.json") -> int:
    """Files in ``folder`` matching ``pattern`` (0 when it does not exist)."""
    try:
        return sum(1 for _ in folder.glob(pattern))
    except OSError:
        return 0


def marker(run_dir: Path, segment: int, phase: str, key: str) -> Path:
    """The marker a dataset stage's ``phase`` task ``key`` commits once its files are written."""
    return run_dir / "_work" / f"segment-{segment:02d}" / phase / "_done" / f"{key}.json"


def manifest(run_dir: Path, segment: int, part: str) -> Path:
    """The manifest a shard commits last, once its files are in place."""
    return run_dir / "_manifests" / f"segment-{segment:02d}" / f"{part}.json"


def shards_done(run_dir: Path, segment: int) -> int:
    """Shards of a segment whose manifest is committed."""
    return count(run_dir / "_manifests" / f"segment-{segment:02d}", "part-*.json")


def shard_files(run_dir: Path, segment: int, part: str) -> list[str]:
    """The files (relative to the run directory) a finished run's manifest of shard ``part``
    lists."""
    return [f["path"] for f in json.loads(manifest(run_dir, segment, part).read_text())["files"]]


def temporaries(run_dir: Path) -> list[Path]:
    return sorted(run_dir.rglob("*.tmp"))


def _drop_timing(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_timing(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [_drop_timing(v) for v in value]
    return value


def outputs(run_dir: Path) -> dict[str, bytes]:
    """Every file of the run (outputs, rejected/, errors/, rewrites/, writers' dataset files,
    the dedup work files) but for the config, the timed files, the manifests and the document
    index (it records files' mtimes); the phase markers
    (``_work/.../_done/*.json``) without their :data:`TIMING` fields."""
    out = {}
    for path in sorted(run_dir.rglob("*")):
        rel = path.relative_to(run_dir)
        if path.is_file() and str(rel) not in NOT_OUTPUT \
                and rel.parts[0] not in ("_manifests", "_index"):
            data = path.read_bytes()
            if rel.parts[0] == "_work" and rel.parent.name == "_done":
                data = json.dumps(_drop_timing(json.loads(data)), sort_keys=True).encode()
            out[str(rel)] = data
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
#: ``landed(run_dir, halted, reference)``: None where the killed run stopped where its KillPoint
#: says, else what is wrong.
Landed = Callable[[Path, dict[str, Any], Path | None], str | None]


@dataclass(frozen=True)
class KillPoint:
    """Cut a run at the ``at``-th arrival at the :mod:`curator.halt` point ``point``; then
    ``landed(run_dir, halted, reference)`` says from the killed run's manifests and markers
    whether it stopped where ``name`` says (None), or what is wrong. ``halted`` is the record of
    ``halted.json`` (its ``key``: the shard or task that halted), ``reference`` the uninterrupted
    run (or None: the checks that need it are left out). The checks bear on the halted key
    (other workers may pass a point of their own, or two, before they block at the next), and
    on counts no other worker can lower."""

    name: str
    point: str
    at: int
    landed: Landed

    @property
    def halt(self) -> str:
        """The ``CURATOR_HALT`` setting."""
        return f"{self.point}@{self.at}"


def _phase_landed(phase: str, segment: int | None) -> Landed:
    """The halted task's marker not written (of ``segment``, or of any)."""
    def landed(run_dir: Path, halted: dict[str, Any], reference: Path | None) -> str | None:
        key = halted["key"]
        written = (marker(run_dir, segment, phase, key).exists() if segment is not None
                   else any(run_dir.glob(f"_work/segment-*/{phase}/_done/{key}.json")))
        return f"{phase}: the halted task {key}'s marker was written" if written else None

    return landed


def _shard_landed(segment: int, at: int, committing: bool, shards: int | None) -> Landed:
    """``committing``: the halted shard's manifest not written, the files the reference's
    manifest of it lists in place; else its manifest written, at least ``at`` of the segment's
    (each arrival wrote one first) and fewer than ``shards`` (all only if the other workers ran
    every shard left in the moment the halting one took to write ``halted.json``)."""
    seg = f"segment-{segment:02d}"

    def landed(run_dir: Path, halted: dict[str, Any], reference: Path | None) -> str | None:
        part, n = halted["key"], shards_done(run_dir, segment)
        written = manifest(run_dir, segment, part).exists()
        if committing:
            if written:
                return f"{seg}: the halted shard {part}'s manifest was written"
            files = shard_files(reference, segment, part) if reference is not None else []
            missing = [f for f in files if not (run_dir / f).is_file()]
            return f"{seg}: files of the halted {part} not in place: {missing}" if missing \
                else None
        if not written:
            return f"{seg}: the halted shard {part} has no manifest"
        if n < at or (shards is not None and n >= shards):
            return f"{seg}: {n} of {shards or '?'} manifests at the kill"
        return None

    return landed


def in_phase(segment: int, phase: str, tasks: int, at: int) -> KillPoint:
    """Halt the ``at``-th task of ``phase`` (of ``tasks``) that has written its files
    (``phase-task``), its marker not yet written: the kill finds the phase begun and not over."""
    return KillPoint(f"{phase}@{at}/{tasks}", f"phase-task:{phase}", at,
                     _phase_landed(phase, segment))


def in_shards(segment: int, shards: int, at: int, committing: bool = False) -> KillPoint:
    """Halt the ``at``-th shard of a shard segment (of ``shards``) to commit: its manifest just
    written (``shard-done``), or with ``committing`` its files renamed into place and its
    manifest not yet written (``shard-commit``)."""
    seg = f"segment-{segment:02d}"
    landed = _shard_landed(segment, at, committing, shards)
    if committing:
        return KillPoint(f"{seg}-commit@{at}/{shards}", f"shard-commit:{seg}", at, landed)
    return KillPoint(f"{seg}@{at}/{shards}", f"shard-done:{seg}", at, landed)


def in_trim(segment: int) -> KillPoint:
    """Halt a finished dataset stage between its record and the trim of its work folder: the
    kill finds the record written and the per-bucket work still there."""
    seg = f"segment-{segment:02d}"

    def landed(run_dir: Path, halted: dict[str, Any], reference: Path | None) -> str | None:
        if not (run_dir / "_manifests" / seg / "dataset.json").exists():
            return "the dataset record was not written"
        work = run_dir / "_work" / seg
        kept = {"out", "remove", "hash", "signatures", "bands", "match", "matches"}
        if not any(p.name not in kept for p in work.iterdir()):
            return "the work folder was already trimmed"
        return None

    return KillPoint(f"trim-{seg}", f"trim:{seg}", 1, landed)


def hook_point(setting: str) -> KillPoint:
    """The KillPoint of a bare ``CURATOR_HALT`` setting (``NAME`` or ``NAME@N``), checked as far
    as its name tells: a shard point as :func:`in_shards` (the segment's size unknown), a
    ``phase-task`` as :func:`in_phase` (in whichever segment); any other, only that the run did
    not end."""
    name, _, nth = setting.partition("@")
    at, (kind, _, scope) = int(nth or 1), name.partition(":")
    if kind in ("shard-commit", "shard-done"):
        landed = _shard_landed(int(scope.removeprefix("segment-")), at,
                               kind == "shard-commit", None)
    elif kind == "phase-task":
        landed = _phase_landed(scope, None)
    else:
        def landed(run_dir: Path, halted: dict[str, Any], reference: Path | None) -> None:
            return None
    return KillPoint(setting, name, at, landed)


def kill_at(config: Path, run_dir: Path, point: KillPoint | str, log: Path,
            reference: Path | None = None, deadline_s: float = 300) -> dict[str, Any]:
    """Start a run in ``run_dir`` (emptied first) that halts at ``point`` (a KillPoint, or a
    ``CURATOR_HALT`` setting: :func:`hook_point`), its halt folder beside ``log``, fresh;
    SIGKILL it there; check that it stopped where ``point`` says and wrote no ``stats.json``;
    return the halted record."""
    if isinstance(point, str):
        point = hook_point(point)
    if run_dir.exists():
        shutil.rmtree(run_dir)
    halt_dir = log.with_name(f"{log.stem}.halt")
    shutil.rmtree(halt_dir, ignore_errors=True)
    proc = start(config, run_dir, log, halt=point.halt, halt_dir=halt_dir)
    halted = halt_and_kill(proc, halt_dir, point.name, log, deadline_s)
    assert (halted["point"], halted["arrival"]) == (point.point, point.at), halted
    missed = point.landed(run_dir, halted, reference)
    if missed is None and (run_dir / "stats.json").exists():
        missed = "stats.json was written"
    if missed is not None:
        raise KillMissed(f"the kill at {point.name} ({halted}) landed elsewhere: {missed}\n"
                         f"{tail(log)}")
    return halted


def kill_and_resume(config: Path, run_dir: Path, point: KillPoint, log: Path, reference: Path,
                    deadline_s: float = 300) -> str:
    """:func:`kill_at` ``point``, then run the same command again (the hook off) to the end;
    return the resumed run's log."""
    kill_at(config, run_dir, point, log, reference, deadline_s)
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
    """Cut a shard segment (``phase`` empty: :func:`in_shards`) or a phase (:func:`in_phase`) at
    the ``at``-th of its ``tasks``."""
    return in_phase(segment, phase, tasks, at) if phase else in_shards(segment, tasks, at)


def fuzzy_points(rounds: int = 3) -> list[KillPoint]:
    """Every place of :func:`fuzzy_phases`, cut a quarter of the way through."""
    return [kill_point(seg, phase, n, n // 4) for seg, phase, n in fuzzy_phases(rounds)]
