"""The funnel of a run: a rich table for the terminal and ``report.html`` with an SVG plot."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from rich.table import Table

BAR_WIDTH = 560


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
    return table


def phase_lines(stats: dict[str, Any]) -> list[str]:
    """One line per dataset stage: each phase's seconds and tasks, in the order they ran."""
    return [f"{s['name']} phases: " + ", ".join(
        f"{name} {p['seconds']:.2f} s ({p['tasks']} tasks)" for name, p in s["phases"].items())
        for s in stats["stages"] if s.get("phases")]


def _svg(stages: list[dict[str, Any]]) -> str:
    top = max([s["in"] for s in stages] + [1])
    row, rows = 34, []
    for i, s in enumerate(stages):
        y = 10 + i * row
        kept = BAR_WIDTH * s["kept"] / top
        removed = BAR_WIDTH * s["removed"] / top
        failed = BAR_WIDTH * s["failed"] / top
        label = html.escape(f"{s['name']} ({s['type']})")
        rows.append(
            f'<text x="0" y="{y + 17}" font-size="13">{label}</text>'
            f'<rect x="220" y="{y}" width="{kept:.1f}" height="24" fill="#2b8a3e">'
            f'<title>kept {s["kept"]:,}</title></rect>'
            f'<rect x="{220 + kept:.1f}" y="{y}" width="{removed:.1f}" height="24" '
            f'fill="#e8590c"><title>removed {s["removed"]:,}</title></rect>'
            f'<rect x="{220 + kept + removed:.1f}" y="{y}" width="{failed:.1f}" height="24" '
            f'fill="#c92a2a"><title>failed {s["failed"]:,}</title></rect>'
            f'<text x="{228 + kept + removed + failed:.1f}" y="{y + 17}" font-size="12">'
            f'{s["kept"]:,} kept</text>')
    height = 20 + len(stages) * row
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{BAR_WIDTH + 330}" '
            f'height="{height}" role="img" aria-label="funnel">{"".join(rows)}</svg>')


def _histogram_svg(score: str, histogram: dict[str, Any]) -> str:
    """Bars of one score's histogram; each bar's tooltip gives its range and count."""
    counts, edges = histogram["counts"], histogram["edges"]
    top = max([*counts, 1])
    width, height = 12, 80
    bars = "".join(
        f'<rect x="{i * width}" y="{height - height * c / top:.1f}" width="{width - 2}" '
        f'height="{height * c / top:.1f}" fill="#1971c2"><title>{edges[i]:.4g} to '
        f'{edges[i + 1]:.4g}: {c:,}</title></rect>' for i, c in enumerate(counts))
    return (f'<figure><svg xmlns="http://www.w3.org/2000/svg" width="{len(counts) * width}" '
            f'height="{height}" role="img" aria-label="{html.escape(score)}">{bars}</svg>'
            f"<figcaption>{html.escape(score)}: {edges[0]:.4g} to {edges[-1]:.4g}</figcaption>"
            "</figure>")


def _signals(stages: list[dict[str, Any]]) -> str:
    """Per filter: how many documents failed each rule, and a histogram per score."""
    parts = []
    for s in stages:
        if not s.get("rules") and not s.get("histograms"):
            continue
        rules = ", ".join(f"{html.escape(k)}: {v:,}" for k, v in s.get("rules", {}).items())
        plots = "".join(_histogram_svg(k, h) for k, h in s.get("histograms", {}).items())
        parts.append(f"<h3>{html.escape(s['name'])}</h3><p>failed per rule: {rules or '-'}</p>"
                     f"<div style='display:flex;gap:2em'>{plots}</div>")
    return "<h2>Filter signals</h2>" + "".join(parts) if parts else ""


def render_html(stats: dict[str, Any]) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(s['name'])}</td><td>{html.escape(s['type'])}</td>"
        f"<td>{s['in']:,}</td><td>{s['kept']:,}</td><td>{s['removed']:,}</td>"
        f"<td>{s['failed']:,}</td><td>{html.escape(json.dumps(s['removed_by_reason']))}</td>"
        f"<td>{s['seconds']:.2f}</td></tr>" for s in stats["stages"])
    name = html.escape(str(stats.get("name", "")))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>curator: {name}</title>"
            "<style>body{font-family:sans-serif;margin:2em}td,th{padding:4px 10px;"
            "text-align:right}td:first-child,td:nth-child(2){text-align:left}</style></head>"
            f"<body><h1>curator run: {name}</h1><h2>Funnel</h2>{_svg(stats['stages'])}"
            "<p>green: kept · orange: removed · red: failed</p><table><tr><th>stage</th>"
            "<th>type</th><th>in</th><th>kept</th><th>removed</th><th>failed</th>"
            f"<th>removed by reason</th><th>seconds</th></tr>{rows}</table>"
            f"{_phases(stats)}{_signals(stats['stages'])}</body></html>")


def _phases(stats: dict[str, Any]) -> str:
    lines = phase_lines(stats)
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    return f"<h2>Phases</h2><ul>{items}</ul>" if lines else ""


def write_report(run_dir: str | Path, stats: dict[str, Any] | None = None) -> Path:
    """Write ``report.html`` into the run directory and return its path."""
    stats = stats or load_stats(run_dir)
    path = Path(run_dir) / "report.html"
    path.write_text(render_html(stats), encoding="utf-8")
    return path
