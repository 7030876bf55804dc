"""The funnel of a run for the terminal: ``stats.json`` loaded, a rich table, phase lines."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from rich.table import Table


def load_stats(run_dir: str | Path) -> dict[str, Any]:
    path = Path(run_dir) / "stats.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: is {run_dir} a finished curator run?")
    return json.loads(path.read_text(encoding="utf-8"))


def funnel_table(stats: dict[str, Any]) -> Table:
    table = Table(title=f"curator run '{stats.get('name', '')}'")
    for column in ("stage", "type", "in", "kept", "removed", "failed", "reasons", "seconds"):
        table.add_column(column, justify="right" if column not in ("stage", "type") else "left")
    for s in stats["stages"]:
        reasons = ", ".join(f"{k}: {v}" for k, v in s["removed_by_reason"].items())
        table.add_row(s["name"], s["type"], f"{s['in']:,}", f"{s['kept']:,}", f"{s['removed']:,}",
                      f"{s['failed']:,}", reasons, f"{s['seconds']:.2f}")
    left = stats.get("left") or []
    if left:
        reasons = Counter(item["reason"] for item in left)
        table.caption = (f"not complete: {len(left):,} shards left ("
                         + ", ".join(f"{k}: {v}" for k, v in sorted(reasons.items())) + ")")
    return table


def phase_lines(stats: dict[str, Any]) -> list[str]:
    """One line per dataset stage: each phase's seconds and tasks, in the order they ran."""
    return [f"{s['name']} phases: " + ", ".join(
        f"{name} {p['seconds']:.2f} s ({p['tasks']} tasks)" for name, p in s["phases"].items())
        for s in stats["stages"] if s.get("phases")]
