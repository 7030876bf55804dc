"""The runs under the served folders: which there are, how each stands (running, done, failed,
interrupted), its live progress and its figures. Reads only what ``curate run`` writes in a run
folder (``run.json``, the lock, ``progress.json``, ``stats.json``, ``run.log``); never imports a
run's plugin code."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

from curator.commit import DamagedRecord
from curator.pipeline import resolve_names
from curator.runtime.driver.run_lock import live_holder
from curator.store.run_dir import RunDir

#: How much of the end of ``run.log`` a run's page shows, and is read to judge a run without
#: ``progress.json`` (a run of an older curator).
LOG_TAIL_BYTES = 64 << 10
LOG_TAIL_LINES = 60
#: The ways a run stops that are interruptions (Ctrl-C, a job's time limit), not failures.
INTERRUPTIONS = re.compile(r"KeyboardInterrupt|interrupt|SIGTERM|signal|killed", re.I)
STARTED = re.compile(r" INFO run of .* started \(curator ")
ENDED = re.compile(r" (?:INFO run finished|ERROR run stopped: (?P<why>.*))$")


def find_runs(roots: list[Path]) -> dict[str, Path]:
    """Each run under ``roots`` (a served folder that is a run itself, or its sub-folders that
    are), by name: the folder's name, or ``<served folder>/<name>`` where two served folders
    hold runs of one name. Symbolic links that lead out of their served folder are left out."""
    found: list[tuple[Path, Path]] = []
    for root in roots:
        root = root.resolve()
        candidates = [root] if RunDir(root).is_run() else sorted(
            p for p in _children(root) if RunDir(p).is_run())
        found += [(root, p) for p in candidates if p.resolve().is_relative_to(root)]
    names: dict[str, int] = {}
    for _, path in found:
        names[path.name] = names.get(path.name, 0) + 1
    return {(path.name if names[path.name] == 1 else f"{root.name}/{path.name}"): path.resolve()
            for root, path in found}


def _children(root: Path) -> list[Path]:
    try:
        return [p for p in root.iterdir() if p.is_dir()]
    except OSError:
        return []


def _json_object(file: Path) -> dict[str, Any] | None:
    """A JSON object file the run writes (None when it is not there or cannot be read)."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def run_progress(path: Path) -> dict[str, Any] | None:
    """The run's ``progress.json`` (None when it has none or it cannot be read)."""
    return _json_object(RunDir(path).progress_file)


def run_status(path: Path, progress: dict[str, Any] | None,
               stale_after_s: float = 600.0) -> tuple[str, str | None]:
    """(status, one-line error): ``running`` while the lock's holder lives; else how the last
    run ended, by ``progress.json`` or, for older runs, ``run.log``."""
    if live_holder(path, stale_after_s) is not None:
        return "running", None
    state, error = (progress or {}).get("state"), (progress or {}).get("error")
    if state is None:
        state, error = _ending_in_log(path)
    if state == "finished":
        return "done", None
    if state == "stopped":
        return ("interrupted" if INTERRUPTIONS.search(error or "") else "failed"), error
    return "interrupted", None  # killed: the lock's holder is gone and no end was written


def _ending_in_log(path: Path) -> tuple[str | None, str | None]:
    """("finished" | "stopped" | None, error) from the last run's lines in ``run.log``."""
    state: tuple[str | None, str | None] = (None, None)
    for line in _log_tail(path):
        if STARTED.search(line):
            state = (None, None)
        elif match := ENDED.search(line):
            why = match.group("why")
            state = ("finished", None) if why is None else ("stopped", why)
    if state[0] is None and RunDir(path).stats_file.exists():
        return "finished", None
    return state


def _log_tail(path: Path) -> list[str]:
    try:
        with open(RunDir(path).log_file, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - LOG_TAIL_BYTES))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return []
    return lines[1:] if len(lines) > 1 else lines  # the first may be cut


def _stats(path: Path) -> dict[str, Any] | None:
    return _json_object(RunDir(path).stats_file)


def _config(path: Path) -> dict[str, Any]:
    try:
        return RunDir(path).recorded_config()
    except (OSError, DamagedRecord, KeyError, TypeError, ValueError):
        return {}


def run_summary(path: Path, name: str | None = None) -> dict[str, Any]:
    """One line of the runs page: name, status, progress, start, duration, documents in and
    kept, tokens, where it runs (host), and the error of a failed run."""
    progress = run_progress(path)
    config = _config(path)
    status, error = run_status(path, progress, float(config.get("lock_stale_s", 600.0)))
    stats = _stats(path) if status != "running" else None
    stages = (stats or {}).get("stages") or []
    started = (progress or {}).get("started")
    ended = (progress or {}).get("updated") if status != "running" else time.time()
    if stats is not None and progress is None:
        duration = stats.get("seconds")
    else:
        duration = round(ended - started, 1) if started and ended else None
    return {
        "name": name or path.name, "status": status, "error": error,
        "progress": progress, "started": started, "duration_s": duration,
        "docs_in": stages[0].get("in") if stages else (progress or {}).get("docs_in"),
        "docs_kept": _kept(stages),
        "tokens": sum(s.get("tokens", 0) for s in stages) if stages else None,
        "host": (progress or {}).get("host"), "pipeline": config.get("name"),
        "executor": _executor(config), "stages": len(config.get("stages") or ()),
    }


def _executor(config: dict[str, Any]) -> str:
    """``dask, 2 workers`` from the recorded configuration (the default: a local Dask cluster)."""
    executor = config.get("executor") if isinstance(config.get("executor"), dict) else {}
    workers = executor.get("workers")
    return str(executor.get("type", "dask")) + (f", {workers} workers" if workers else "")


def _kept(stages: list[dict[str, Any]]) -> int | None:
    """Documents kept by the last stage that is not a tokenizer (what the run produced)."""
    counted = [s for s in stages if s.get("type") != "tokenize"] or stages
    return counted[-1].get("kept") if counted else None


def run_plan(path: Path) -> list[dict[str, Any]]:
    """The run's stages in order, by name and type, with the segment each ran in (from the
    manifests the run wrote; no stage code is loaded)."""
    config = _config(path)
    raw = [s for s in config.get("stages") or () if isinstance(s, dict)]
    names = resolve_names([(s.get("name"), str(s.get("type", "?"))) for s in raw])
    segment_of = RunDir(path).stage_segments()
    return [{"name": name, "type": str(s.get("type", "?")),
             "segment": segment_of.get(name, (None, ""))[0]}
            for name, s in zip(names, raw, strict=True)]


def run_detail(path: Path, name: str | None = None) -> dict[str, Any]:
    """A run's page: its summary, plan, stats (None while it runs), timelines and the end of
    its log."""
    summary = run_summary(path, name)
    stats = _stats(path) if summary["status"] != "running" else None
    return {"summary": summary, "plan": run_plan(path), "stats": stats,
            "timeline": (stats or {}).get("timeline"),
            "phase_timeline": (stats or {}).get("phase_timeline"),
            "log_tail": _log_tail(path)[-LOG_TAIL_LINES:],
            "report": RunDir(path).report_file.exists()}
