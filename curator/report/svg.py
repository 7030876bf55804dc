"""Plot primitives as inline SVG strings: horizontal stacked bars, histograms and lanes of
spans on a time axis.

Every text that reaches the markup is escaped here; callers pass plain strings."""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

PALETTE = ("#1971c2", "#e8590c", "#2b8a3e", "#9c36b5", "#f08c00", "#0c8599", "#c2255c",
           "#5c940d", "#364fc7", "#868e96")
KEPT, REMOVED, FAILED = "#2b8a3e", "#e8590c", "#c92a2a"
BEFORE, AFTER = "#a5d8ff", "#1971c2"


@dataclass(frozen=True)
class Segment:
    """One piece of a stacked bar: its value, colour, tooltip and a word written inside it
    when it fits."""

    value: float
    color: str
    title: str
    text: str = ""


@dataclass(frozen=True)
class Span:
    """One interval on a lane: from ``start`` to ``end`` seconds."""

    start: float
    end: float
    color: str
    title: str


@dataclass(frozen=True)
class Series:
    """One set of histogram counts drawn over shared edges."""

    name: str
    counts: list[int]
    color: str


def bars(rows: list[tuple[str, list[Segment], str]], label: str, width: int = 560,
         label_width: int = 280) -> str:
    """One horizontal stacked bar per row (label, segments, note written after the bar),
    scaled to the largest row total. Each bar is a ``<g class="bar">``."""
    top = max([sum(s.value for s in segments) for _, segments, _ in rows] + [1e-12])
    row, parts = 30, []
    for i, (name, segments, note) in enumerate(rows):
        y = 6 + i * row
        x = float(label_width)
        rects = []
        for s in segments:
            w = width * s.value / top
            if w > 0:
                rects.append(f'<rect x="{x:.1f}" y="{y}" width="{max(w, 0.5):.1f}" height="22" '
                             f'fill="{s.color}"><title>{escape(s.title)}</title></rect>')
            if s.text and w > 7 * len(s.text) + 6:
                rects.append(f'<text x="{x + 3:.1f}" y="{y + 15}" font-size="11" fill="#fff">'
                             f"{escape(s.text)}</text>")
            x += w
        shown = _clip(name, int(label_width / 7.6))
        parts.append(f'<g class="bar" data-label="{escape(name)}">'
                     f'<text x="{label_width - 8}" y="{y + 16}" font-size="13" '
                     f'text-anchor="end">{escape(shown)}</text>{"".join(rects)}'
                     f'<text x="{x + 6:.1f}" y="{y + 16}" font-size="12">{escape(note)}</text>'
                     "</g>")
    return _svg(label, label_width + width + 200, 12 + len(rows) * row, "".join(parts))


def histogram(edges: list[float], series: list[Series], label: str, log: bool = False,
              width: int = 360, height: int = 120, marks: list[float] = ()) -> str:
    """Bars per bin, the series overlaid in order (draw the larger first); x axis labelled
    with the range's ends and middle, y with the largest count. Each bin's tooltip gives its
    range and every series' count; ``marks`` (a filter's thresholds) are dashed lines."""
    n = len(edges) - 1
    top = max([c for s in series for c in s.counts] + [1])
    step = width / max(n, 1)
    left, parts = 44, []
    for s in series:
        for i, c in enumerate(s.counts):
            if c <= 0:
                continue
            h = (height - 4) * c / top
            tip = f"{_num(edges[i])} to {_num(edges[i + 1])}: " + ", ".join(
                f"{t.name} {t.counts[i]:,}" for t in series)
            parts.append(f'<rect class="bin" x="{left + i * step:.1f}" y="{height - h:.1f}" '
                         f'width="{max(step - 1, 1):.1f}" height="{h:.1f}" fill="{s.color}">'
                         f"<title>{escape(tip)}</title></rect>")
    for mark in marks:
        x = left + _bin_position(edges, mark, log) * step
        parts.append(f'<line class="threshold" x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{height}" '
                     f'stroke="#c92a2a" stroke-dasharray="4 3"><title>threshold '
                     f'{escape(_num(mark))}</title></line>')
    middle = edges[n // 2]
    axis = (f'<line x1="{left}" y1="{height}" x2="{left + width}" y2="{height}" stroke="#495057"/>'
            f'<text x="{left - 4}" y="12" font-size="11" text-anchor="end">{top:,}</text>'
            f'<text x="{left - 4}" y="{height}" font-size="11" text-anchor="end">0</text>'
            f'<text x="{left}" y="{height + 14}" font-size="11">{escape(_num(edges[0]))}</text>'
            f'<text x="{left + width / 2:.1f}" y="{height + 14}" font-size="11" '
            f'text-anchor="middle">{escape(_num(middle))}{" (log)" if log else ""}</text>'
            f'<text x="{left + width}" y="{height + 14}" font-size="11" '
            f'text-anchor="end">{escape(_num(edges[-1]))}</text>')
    return _svg(label, left + width + 10, height + 20, "".join(parts) + axis)


def _bin_position(edges: list[float], value: float, log: bool) -> float:
    """Where ``value`` falls on the bins, in bins from the first edge (clamped to the axis;
    within a bin, linear, or logarithmic for log bins)."""
    if value <= edges[0]:
        return 0.0
    for i in range(len(edges) - 1):
        lo, hi = edges[i], edges[i + 1]
        if value <= hi:
            if log and lo > 0:
                return i + math.log(value / lo) / math.log(hi / lo)
            return i + (value - lo) / (hi - lo)
    return float(len(edges) - 1)


def lanes(rows: list[tuple[str, list[Span]]], total: float, label: str, width: int = 560,
          label_width: int = 120) -> str:
    """One lane per row (``<g class="bar">``), each span drawn where it lies on a time axis
    from 0 to ``total`` seconds."""
    total = max(total, max([sp.end for _, spans in rows for sp in spans] + [1e-12]))
    row, parts = 26, []
    for i, (name, spans) in enumerate(rows):
        y = 6 + i * row
        rects = "".join(
            f'<rect x="{label_width + width * sp.start / total:.1f}" y="{y}" '
            f'width="{max(width * (sp.end - sp.start) / total, 0.5):.1f}" height="18" '
            f'fill="{sp.color}"><title>{escape(sp.title)}</title></rect>' for sp in spans)
        parts.append(f'<g class="bar" data-label="{escape(name)}">'
                     f'<text x="{label_width - 8}" y="{y + 14}" font-size="12" '
                     f'text-anchor="end">{escape(_clip(name, int(label_width / 7.6)))}</text>'
                     f"{rects}</g>")
    bottom = 10 + len(rows) * row
    axis = (f'<line x1="{label_width}" y1="{bottom}" x2="{label_width + width}" y2="{bottom}" '
            f'stroke="#495057"/><text x="{label_width}" y="{bottom + 14}" font-size="11">0 s</text>'
            f'<text x="{label_width + width}" y="{bottom + 14}" font-size="11" '
            f'text-anchor="end">{escape(_num(total))} s</text>')
    return _svg(label, label_width + width + 20, bottom + 20, "".join(parts) + axis)


def legend(items: list[tuple[str, str]]) -> str:
    """A line of colour swatches with their names (HTML)."""
    return '<p class="legend">' + " ".join(
        f'<span><i style="background:{color}"></i>{escape(name)}</span>'
        for name, color in items) + "</p>"


def _svg(label: str, width: float, height: float, body: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
            f'role="img" aria-label="{escape(label)}">{body}</svg>')


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _num(x: float) -> str:
    """A short figure for an axis: 12, 0.35, 1.2k, 3.4M."""
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"
