"""The funnel of a run for the terminal: ``stats.json`` loaded, a rich table, phase lines."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from rich.table import Table

from curator.store.run_dir import RunDir


def load_stats(run_dir: str | Path) -> dict[str, Any]:
    path = RunDir(run_dir).stats_file
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: is {run_dir} a finished curator run?")
    return json.loads(path.read_text(encoding="utf-8"))


def partial_line(stats: dict[str, Any]) -> str | None:
    """What a partial report covers (a run that is running or was stopped), or None."""
    partial = stats.get("partial")
    if partial is None:
        return None
    shards = ", ".join(f"{seg} {n:,}" for seg, n in partial["shards_committed"].items())
    finished = ", ".join(partial["dataset_stages_finished"]) or "none"
    return (f"partial: the run is running or was stopped; shards committed so far: {shards}; "
            f"dataset stages finished: {finished}")


def funnel_table(stats: dict[str, Any]) -> Table:
    table = Table(title=f"curator run '{stats.get('name', '')}'")
    gpu = any(s.get("gpu_seconds") for s in stats["stages"])
    for column in ("stage", "type", "in", "kept", "removed", "failed", "reasons", "seconds",
                   "CPU s", *(["GPU s"] if gpu else [])):
        table.add_column(column, justify="right" if column not in ("stage", "type") else "left")
    for s in stats["stages"]:
        reasons = ", ".join(f"{k}: {v}" for k, v in s["removed_by_reason"].items())
        table.add_row(s["name"], s["type"], f"{s['in']:,}", f"{s['kept']:,}", f"{s['removed']:,}",
                      f"{s['failed']:,}", reasons, f"{s['seconds']:.2f}",
                      f"{s.get('cpu_seconds', 0.0):.2f}",
                      *([f"{s.get('gpu_seconds', 0.0):.2f}"] if gpu else []))
    table.caption = compute_line(stats)
    if partial_line(stats):
        table.caption = partial_line(stats)
    left = stats.get("left") or []
    if left:
        reasons = Counter(item["reason"] for item in left)
        table.caption = (f"not complete: {len(left):,} shards left ("
                         + ", ".join(f"{k}: {v}" for k, v in sorted(reasons.items())) + ")")
    return table


def compute_line(stats: dict[str, Any]) -> str | None:
    """What the run cost in the units a cluster budgets: CPU- and GPU-hours its stages took
    (summed over workers), and node-hours (wall clock times the nodes its workers ran on)."""
    if "seconds" not in stats:
        return None
    cpu = sum(s.get("cpu_seconds", 0.0) for s in stats["stages"])
    gpu = sum(s.get("gpu_seconds", 0.0) for s in stats["stages"])
    nodes = int(stats.get("nodes", 1))
    node_hours = stats["seconds"] * nodes / 3600
    return (f"compute: {_hours(cpu)} CPU-hours ({cpu:,.1f} CPU-s)"
            + (f", {_hours(gpu)} GPU-hours ({gpu:,.1f} GPU-s)" if gpu else "")
            + f"; {_hours(node_hours * 3600)} node-hours ({stats['seconds']:,.1f} s wall x "
            f"{nodes} node{'s' if nodes != 1 else ''})")


def _hours(seconds: float) -> str:
    """Hours with three significant digits (a small run's cost still reads as a number)."""
    return f"{seconds / 3600:.3g}"


def phase_lines(stats: dict[str, Any]) -> list[str]:
    """One line per dataset stage: each phase's seconds, CPU seconds and tasks, in the order
    they ran."""
    return [f"{s['name']} phases: " + ", ".join(
        f"{name} {p['seconds']:.2f} s"
        + (f", {p['cpu_seconds']:.2f} CPU-s" if "cpu_seconds" in p else "")
        + f" ({p['tasks']} tasks)" for name, p in s["phases"].items())
        for s in stats["stages"] if s.get("phases")]


def reuse_lines(reuse: dict[str, Any]) -> list[str]:
    """What a run reused, per segment (``stats.json``'s ``reuse``); nothing for a run that
    reused nothing."""
    lines = []
    for segment, entry in reuse.items():
        if "phases" in entry:
            phases = entry["phases"]
            reused = [name for name, p in phases.items() if p["reused"] == p["tasks"] > 0]
            if reused:
                lines.append(f"{segment}: phases reused: {', '.join(reused)} "
                             f"({len(reused)} of {len(phases)})")
            continue
        parts = []
        if entry.get("reused"):
            parts.append(f"{entry['reused']} shards reused, {entry['ran']} run")
        if entry.get("checkpoint"):
            parts.append(f"checkpoint read (stages before it not run): "
                         f"{entry['checkpoint']['shards']}")
        for what, label in (("scores", "scores kept"), ("writers", "writer files kept")):
            if entry.get(what):
                parts.append(f"{label}: " + ", ".join(f"{k} {n}" for k, n in
                                                       entry[what].items()))
        if parts:
            lines.append(f"{segment}: " + "; ".join(parts))
    return lines
