"""``report.html``: one self-contained page (inline CSS and SVG, no script, no network) drawn
from ``stats.json``: funnel, removal reasons, language mix, lengths and scores before and after,
dedup clusters, contamination per task, time and throughput per stage."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

from curator.counts import per_second
from curator.report import show as shown
from curator.report.funnel import compute_line, load_stats, partial_line, phase_lines
from curator.report.svg import (
    AFTER,
    BEFORE,
    FAILED,
    KEPT,
    PALETTE,
    REMOVED,
    Segment,
    Series,
    Span,
    bars,
    histogram,
    lanes,
    legend,
)
from curator.store.run_dir import RunDir

Stage = dict[str, Any]
TOP_LANGUAGES = 8

STYLE = ("body{font-family:system-ui,sans-serif;margin:2em;color:#212529;max-width:1300px}"
         "h2{border-bottom:1px solid #dee2e6;padding-bottom:4px;margin-top:1.6em}"
         "table{border-collapse:collapse;font-size:14px}td,th{padding:3px 10px;text-align:right;"
         "border-bottom:1px solid #f1f3f5}td.l,th.l{text-align:left}"
         ".grid{display:flex;flex-wrap:wrap;gap:1.5em}figure{margin:0}"
         "figcaption{font-size:12px;color:#495057;max-width:420px;overflow-wrap:anywhere}"
         ".legend span{margin-right:1.2em;font-size:13px}.legend i{display:inline-block;"
         "width:11px;height:11px;margin-right:4px}.note{color:#495057;font-size:13px}")


#: Documents shown per example block (kept, and removed per stage).
EXAMPLES = 3


def write_report(run_dir: str | Path, stats: dict[str, Any] | None = None,
                 kept_folder: Path | None = None) -> Path:
    """Write ``report.html`` into the run directory and return its path; with ``kept_folder``
    (the last writer's Parquet parts) the examples show kept documents too."""
    stats = stats or load_stats(run_dir)
    path = RunDir(run_dir).report_file
    path.write_text(render_html(stats, examples(RunDir(run_dir), kept_folder)), encoding="utf-8")
    return path


def examples(run_dir: RunDir, kept_folder: Path | None, n: int = EXAMPLES) -> str:
    """Kept and removed documents side by side: the first ``n`` of what the run kept and of
    what each stage removed with its text kept (all of it with ``rejected: documents``, a 1 %
    sample otherwise), in file order, with their columns (scores, reasons); read a row group at
    a time, so a large run costs no more than a small one."""
    blocks = []
    if kept_folder is not None and kept_folder.is_dir():
        blocks.append(_example_block("kept", shown.first_documents(kept_folder, n)))
    for folder in run_dir.rejected_folders(None):
        rows = shown.first_documents(folder, n, with_text=True)
        if rows:
            blocks.append(_example_block(f"removed by {folder.name}", rows))
    if not blocks:
        return ""
    return ("<h2>Examples</h2><p class='note'>the first documents in the files' order; "
            "<code>curate show</code> prints more</p>" + "".join(blocks))


def _example_block(title: str, rows: list[dict[str, Any]]) -> str:
    items = "".join(
        f"<li><span class='note'>{escape(head)}</span><br>{escape(text.strip())}</li>"
        for head, text in (shown.describe(row) for row in rows))
    return f"<h3>{escape(title)}</h3><ul>{items}</ul>"


def render_html(stats: dict[str, Any], examples_html: str = "") -> str:
    stages: list[Stage] = stats["stages"]
    name = escape(str(stats.get("name", "")))
    sections = [_partial(stats), _summary(stats), _warnings(stages), _left(stats),
                _funnel(stages), _reasons(stages), _token_counts(stages), _languages(stages),
                _lengths(stages), _signals(stages), _dedup(stages), _contamination(stages),
                examples_html, _time(stages), _compute(stats), _workers(stats),
                _phases(stats)]
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>curator: {name}</title><style>{STYLE}</style></head><body>"
            f"<h1>curator run: {name}</h1>{''.join(s for s in sections if s)}</body></html>")


def _summary(stats: dict[str, Any]) -> str:
    stages = stats["stages"]
    if not stages:
        return "<p>No stages.</p>"
    first, last = stages[0], stages[-1]
    seconds = stats.get("seconds")
    entering = sum(s["in"] for s in stages if s.get("source")) or first["in"]  # every source's
    figures = [f"{entering:,} documents in, {last['kept']:,} kept"]
    if "bytes_kept" in first and "bytes_kept" in last:
        read = sum(s.get("bytes_kept", 0) for s in stages if s.get("source")) \
            or first["bytes_kept"]  # every source's
        figures.append(f"{_bytes(read)} read, {_bytes(last['bytes_kept'])} kept")
    if seconds:
        figures.append(f"{seconds:,.1f} s wall clock, {per_second(entering, seconds)} "
                       "documents/s")
    if "shards" in stats:
        figures.append(f"{stats['shards']:,} shards")
    return f"<p>{escape(' · '.join(figures))}</p>"


def _warnings(stages: list[Stage]) -> str:
    """What stages warned of (a blend that repeats a source too often, too few tokens...)."""
    items = "".join(f"<li>{escape(s['name'])}: {escape(w)}</li>"
                    for s in stages for w in s.get("warnings", []))
    return f"<h2>Warnings</h2><ul class='warnings'>{items}</ul>" if items else ""


def _partial(stats: dict[str, Any]) -> str:
    """The banner of a report made while the run is running or after it was stopped."""
    line = partial_line(stats)
    return f"<p class='partial'><strong>{escape(line)}</strong></p>" if line else ""


def _left(stats: dict[str, Any]) -> str:
    """The shards a run could not do (their input could not be had): the run is not complete."""
    left = stats.get("left") or []
    if not left:
        return ""
    rows = "".join(f"<tr><td class='l'>{escape(item['label'])}</td><td class='l'>"
                   f"{escape(item['reason'])}</td><td class='l'>{escape(item['url'])}</td>"
                   f"<td class='l'>{escape(item['error'])}</td></tr>" for item in left)
    return (f"<h2>Not complete: {len(left):,} shards left</h2><p>Their input could not be had; "
            "rerunning the same command tries them again.</p><table><tr><th class='l'>shard</th>"
            "<th class='l'>reason</th><th class='l'>URL</th><th class='l'>error</th></tr>"
            f"{rows}</table>")


def _funnel(stages: list[Stage]) -> str:
    rows = [(_stage_label(s),
             [Segment(s["kept"], KEPT, f"kept {s['kept']:,}"),
              Segment(s["removed"], REMOVED, f"removed {s['removed']:,}"),
              Segment(s["failed"], FAILED, f"failed {s['failed']:,}")],
             f"{s['kept']:,} kept") for s in stages]
    table = "".join(
        f"<tr><td class='l'>{escape(s['name'])}</td><td class='l'>{escape(s['type'])}</td>"
        f"<td>{s['in']:,}</td><td>{s['kept']:,}</td><td>{s['removed']:,}</td>"
        f"<td>{s['failed']:,}</td><td>{_bytes(s['bytes_kept']) if 'bytes_kept' in s else '-'}"
        f"</td><td>{_tokens(s)}</td><td class='l'>{escape(_reason_text(s))}</td>"
        f"<td>{s['seconds']:.2f}</td></tr>" for s in stages)
    return ("<h2>Funnel</h2>" + bars(rows, "funnel")
            + legend([("kept", KEPT), ("removed", REMOVED), ("failed", FAILED)])
            + "<table><tr><th class='l'>stage</th><th class='l'>type</th><th>in</th>"
            "<th>kept</th><th>removed</th><th>failed</th><th>bytes kept</th><th>tokens</th>"
            f"<th class='l'>removed by reason</th><th>seconds</th></tr>{table}</table>")


def _reasons(stages: list[Stage]) -> str:
    parts = []
    for s in stages:
        reasons = sorted(s["removed_by_reason"].items(), key=lambda kv: -kv[1])
        if reasons:
            rows = [(reason, [Segment(n, REMOVED, f"{reason}: {n:,}")], f"{n:,}")
                    for reason, n in reasons]
            parts.append(f"<h3>{escape(s['name'])}</h3>"
                         + bars(rows, f"reasons {s['name']}", width=420))
    return "<h2>Removal reasons</h2>" + "".join(parts) if parts else ""


def _languages(stages: list[Stage]) -> str:
    with_lang = [s for s in stages if s.get("languages")]
    if not with_lang:
        return ""
    top = list(with_lang[0]["languages"])[:TOP_LANGUAGES]  # most documents first
    colors = {lang: PALETTE[i % len(PALETTE)] for i, lang in enumerate(top)}
    rows = []
    for s in with_lang:
        langs = s["languages"]
        other = sum(n for lang, n in langs.items() if lang not in colors)
        segments = [Segment(langs.get(lang, 0), colors[lang], f"{lang}: {langs.get(lang, 0):,}")
                    for lang in top]
        segments.append(Segment(other, PALETTE[-1], f"other: {other:,}"))
        mix = ", ".join(f"{lang} {n / max(sum(langs.values()), 1):.0%}"
                        for lang, n in list(langs.items())[:3])
        rows.append((s["name"], segments, mix))
    return ("<h2>Language mix</h2><p class='note'>kept documents per language after each "
            "stage</p>" + bars(rows, "languages")
            + legend([*colors.items(), ("other", PALETTE[-1])]))


def _lengths(stages: list[Stage]) -> str:
    with_lengths = [s for s in stages if s.get("lengths")]
    if not with_lengths:
        return ""
    first, last = with_lengths[0], with_lengths[-1]
    edges = first["lengths"]["edges"]
    plot = histogram(edges, [Series(f"after {first['name']}", first["lengths"]["counts"], BEFORE),
                             Series(f"after {last['name']}", last["lengths"]["counts"], AFTER)],
                     "lengths", log=True, width=560)
    return ("<h2>Document lengths</h2><p class='note'>UTF-8 bytes of text per document</p>"
            + plot + legend([(f"before (after {first['name']})", BEFORE),
                             (f"after (after {last['name']})", AFTER)]))


def _signals(stages: list[Stage]) -> str:
    """Per filter: how many documents failed each rule, and each score before and after."""
    parts = []
    for s in stages:
        if not s.get("rules") and not s.get("histograms"):
            continue
        rules = ", ".join(f"{k}: {v:,}" for k, v in s.get("rules", {}).items())
        plots = []
        for score, h in s.get("histograms", {}).items():
            series = [Series("all", h["counts"], BEFORE)]
            if "kept" in h:
                series.append(Series("kept", h["kept"], AFTER))
            cuts = s.get("thresholds", {}).get(score, [])
            where = f"; threshold {', '.join(f'{c:g}' for c in cuts)}" if cuts else ""
            plot = histogram(h["edges"], series, score, log=_log_bins(h["edges"]), marks=cuts)
            plots.append(f"<figure>{plot}<figcaption>{escape(score)} ({sum(h['counts']):,} "
                         f"scored{escape(where)})</figcaption></figure>")
        parts.append(f"<h3>{escape(s['name'])}</h3><p>failed per rule: {escape(rules or '-')}"
                     f"</p><div class='grid'>{''.join(plots)}</div>")
    if not parts:
        return ""
    return ("<h2>Filter signals</h2>" + legend([("all scored (before)", BEFORE),
                                                 ("kept (after)", AFTER)]) + "".join(parts))


def _log_bins(edges: list[float]) -> bool:
    """Whether histogram bins grow geometrically (a log axis), as ScoreBins(log=True) makes."""
    return len(edges) > 2 and edges[0] > 0 and \
        abs(edges[2] / edges[1] - edges[1] / edges[0]) < 1e-6 * edges[1] / edges[0]


def _line_dedup(s: Stage, facts: dict[str, Any]) -> str:
    """Line dedup's totals and its changed documents per share of characters removed."""
    totals = ", ".join(f"{k.replace('_', ' ')}: {facts[k]:,}" for k in (
        "units", "duplicated_units", "units_removed", "chars_removed", "documents_changed",
        "documents_too_short") if isinstance(facts.get(k), int))
    shares = facts.get("removed_fraction") or {}
    rows = [(f"{k} removed", [Segment(n, REMOVED, f"{n:,} documents lost {k} of their "
                                                   "characters")], f"{n:,}")
            for k, n in shares.items()]
    plot = ("<p class='note'>changed documents per share of their characters removed</p>"
            + bars(rows, f"line dedup {s['name']}", width=360, label_width=140)) if rows else ""
    return (f"<h3>{escape(s['name'])}</h3><p>{escape(str(facts.get('unit', '')))} units · "
            f"{escape(totals)}</p>{plot}")


def _dedup(stages: list[Stage]) -> str:
    parts = []
    for s in stages:
        if isinstance(s.get("line_dedup"), dict):
            parts.append(_line_dedup(s, s["line_dedup"]))
            continue
        facts = s.get("dedup")
        if not isinstance(facts, dict):
            continue
        plain = {k: v for k, v in facts.items() if not isinstance(v, dict)}
        text = ", ".join(f"{k}: {v:,}" if isinstance(v, int) else f"{k}: {v}"
                         for k, v in plain.items())
        sizes = facts.get("cluster_sizes") or {}
        plot = ""
        if sizes:
            rows = [(f"size {k}", [Segment(n, PALETTE[0], f"{n:,} clusters of {k}")], f"{n:,}")
                    for k, n in sizes.items()]
            plot = "<p class='note'>clusters per size</p>" + bars(
                rows, f"cluster sizes {s['name']}", width=360, label_width=140)
        parts.append(f"<h3>{escape(s['name'])}</h3><p>{s['removed']:,} duplicates removed of "
                     f"{s['in']:,} · {escape(text)}</p>{plot}")
    return "<h2>Deduplication</h2>" + "".join(parts) if parts else ""


def _contamination(stages: list[Stage]) -> str:
    parts = []
    for s in stages:
        report = s.get("decontamination")
        if not isinstance(report, dict):
            continue
        tasks = report.get("tasks", {})
        rows = [(task, [Segment(t.get("documents", 0), REMOVED,
                                f"{task}: {t.get('documents', 0):,} documents")],
                 f"{t.get('documents', 0):,} docs, {t.get('spans', 0):,} spans")
                for task, t in sorted(tasks.items(), key=lambda kv: -kv[1].get("documents", 0))]
        totals = ", ".join(f"{k}: {report[k]:,}" for k in (
            "documents_cut", "documents_removed", "spans", "chars_removed") if k in report)
        parts.append(f"<h3>{escape(s['name'])}</h3><p>{escape(totals)}</p>"
                     + (bars(rows, f"contamination {s['name']}", width=420) if rows else "")
                     + _coverage(tasks))
    return ("<h2>Contamination per task</h2>" + "".join(parts)) if parts else ""


def _coverage(tasks: dict[str, dict[str, Any]]) -> str:
    """Per task: how many items and texts were checked and how many were too short to check
    (shorter than the task's whole-text minimum and than an n-gram)."""
    if not any("items_checked" in t for t in tasks.values()):
        return ""

    def cell(t: dict[str, Any], key: str) -> str:
        return f"{t[key]:,}" if isinstance(t.get(key), int) else "-"

    rows = "".join(
        f"<tr><td class='l'>{escape(task)}</td>"
        + "".join(f"<td>{cell(t, k)}</td>" for k in (
            "items", "items_checked", "items_too_short", "texts", "texts_checked",
            "texts_too_short"))
        + "<td class='l'>" + escape(", ".join(f"{n} {unit}" for unit, n in
                                               (t.get("min_whole") or {}).items()) or "-")
        + "</td></tr>" for task, t in tasks.items())
    return ("<p class='note'>coverage: items (a task example) and texts (a prompt field, or an "
            "item's fields joined) checked, and those too short to check: shorter than an "
            "n-gram and than the task's whole-text minimum (the 5th percentile of its texts' "
            "lengths, bounded); answers alone are matched as n-grams only</p>"
            "<table><tr><th class='l'>task</th><th>items</th><th>checked</th><th>too short</th>"
            "<th>texts</th><th>checked</th><th>too short</th><th class='l'>whole-text minimum"
            f"</th></tr>{rows}</table>")


def _time(stages: list[Stage]) -> str:
    rows = []
    for s in stages:
        phases = s.get("phases") or {}
        if phases:
            segments = [Segment(p["seconds"], PALETTE[i % len(PALETTE)],
                                f"{phase}: {p['seconds']:.2f} s", phase)
                        for i, (phase, p) in enumerate(phases.items())]
        else:
            segments = [Segment(s["seconds"], PALETTE[0], f"{s['seconds']:.2f} s")]
        rate = f", {per_second(s['in'], s['seconds'])} docs/s" if s["seconds"] > 0 else ""
        rows.append((s["name"], segments, f"{s['seconds']:.2f} s{rate}"))
    return ("<h2>Time per stage</h2><p class='note'>seconds per stage, summed over shards "
            "(workers run in parallel); dataset stages split into their phases</p>"
            + bars(rows, "timeline"))


def _compute(stats: dict[str, Any]) -> str:
    """CPU- and GPU-seconds per stage (a dataset stage's phases each), and the run's totals
    in CPU-, GPU- and node-hours."""
    stages = stats["stages"]
    gpu = any(s.get("gpu_seconds") for s in stages)
    total = sum(s.get("cpu_seconds", 0.0) for s in stages) or 1.0
    rows = []
    for s in stages:
        parts = [(s["name"], s)] + [(f"&nbsp;&nbsp;{escape(phase)}", p)
                                    for phase, p in (s.get("phases") or {}).items()]
        for i, (label, entry) in enumerate(parts):
            cpu = entry.get("cpu_seconds", 0.0)
            rows.append(f"<tr><td class='l'>{escape(label) if i == 0 else label}</td>"
                        f"<td>{entry['seconds']:,.2f}</td><td>{cpu:,.2f}</td>"
                        f"<td>{cpu / total:.1%}</td>"
                        + (f"<td>{entry.get('gpu_seconds', 0.0):,.2f}</td>" if gpu else "")
                        + "</tr>")
    line = compute_line(stats)
    return ("<h2>Compute</h2><p class='note'>CPU seconds: each worker process's CPU time while "
            "it ran the stage (its helper threads and sandbox processes included), summed over "
            "workers; GPU seconds: the wall time a stage held a GPU. "
            + (escape(line) if line else "") + "</p><table><tr><th class='l'>stage / phase</th>"
            "<th>seconds</th><th>CPU s</th><th>of CPU</th>"
            + ("<th>GPU s</th>" if gpu else "") + "</tr>" + "".join(rows) + "</table>")


def _workers(stats: dict[str, Any]) -> str:
    """The shard tasks this run ran, one lane per worker process, on the run's clock."""
    tasks = stats.get("timeline") or []
    phases = stats.get("phase_timeline") or []
    if not tasks and not phases:
        return ""
    lanes_of: dict[int, list[Span]] = {}
    for segment, start, end, pid in tasks:
        lanes_of.setdefault(pid, []).append(Span(
            start, end, PALETTE[segment % len(PALETTE)],
            f"segment {segment + 1}: {start:.2f} to {end:.2f} s (process {pid})"))
    rows = [(f"worker {i + 1}", spans) for i, spans in enumerate(lanes_of.values())]
    stage_lanes: dict[str, list[Span]] = {}
    for segment, stage, phase, start, end in phases:
        spans = stage_lanes.setdefault(stage, [])
        spans.append(Span(start, end, PALETTE[(segment + len(spans)) % len(PALETTE)],
                          f"{stage}: phase {phase}, {start:.2f} to {end:.2f} s"))
    rows += [(f"{stage} phases", spans) for stage, spans in stage_lanes.items()]
    segments = sorted({t[0] for t in tasks})
    return ("<h2>Workers over time</h2><p class='note'>each shard task this run ran, from its "
            "start to its end, one lane per worker process; below them each dataset stage's "
            "phases (hover for names); gaps are idle workers (cluster start, the last tasks)</p>"
            + legend([(f"segment {s + 1}", PALETTE[s % len(PALETTE)]) for s in segments])
            + lanes(rows, float(stats.get("seconds") or 0.0), "workers"))


def _token_counts(stages: list[Stage]) -> str:
    """What a trainer buys: per tokenize stage, tokens and documents per source (its
    ``source_field``: a language, a corpus) and split, with their shares."""
    out = []
    for s in stages:
        by_source = s.get("by_source")
        if not by_source:
            continue
        total_tokens = max(s.get("tokens") or 0, 1)
        total_docs = max(s.get("documents") or 0, 1)
        epochs = s.get("epochs", {})
        rows = []
        for source, splits in sorted(by_source.items(),
                                     key=lambda kv: -sum(v["tokens"] for v in kv[1].values())):
            for split, figures in sorted(splits.items()):
                times = epochs.get(source) if split == "train" else None
                rows.append(
                    f"<tr><td class='l'>{escape(source)}</td><td class='l'>{escape(split)}</td>"
                    f"<td>{figures['tokens']:,}</td><td>{figures['tokens'] / total_tokens:.1%}</td>"
                    f"<td>{figures['documents']:,}</td>"
                    f"<td>{figures['documents'] / total_docs:.1%}</td>"
                    f"<td>{'-' if times is None else f'{times:g}'}</td></tr>")
        repeated = s.get("repeated") or {}
        rehydrated = (f"; rehydration wrote {repeated['copies']:,} extra copies of documents "
                      f"({repeated['tokens']:,} tokens), counted above"
                      if repeated.get("copies") else "")
        out.append(f"<h2>Tokens: {escape(_stage_label(s))}</h2><p class='note'>{s['tokens']:,} "
                   f"tokens in {s['documents']:,} documents; per source and split; epochs: how "
                   "many times training on the blend goes through a source's train tokens"
                   f"{escape(rehydrated)}</p>"
                   "<table><tr><th class='l'>source</th><th class='l'>split</th><th>tokens</th>"
                   "<th>of tokens</th><th>documents</th><th>of documents</th><th>epochs</th></tr>"
                   + "".join(rows) + "</table>")
    return "".join(out)


def _phases(stats: dict[str, Any]) -> str:
    lines = phase_lines(stats)
    items = "".join(f"<li>{escape(line)}</li>" for line in lines)
    return f"<h2>Phases</h2><ul>{items}</ul>" if lines else ""


def _stage_label(stage: Stage) -> str:
    """The stage's name, with its type when the name differs."""
    return stage["name"] if stage["name"] == stage["type"] else f"{stage['name']} ({stage['type']})"


def _reason_text(stage: Stage) -> str:
    return ", ".join(f"{k}: {v:,}" for k, v in stage["removed_by_reason"].items())


def _tokens(stage: Stage) -> str:
    tokens = stage.get("tokens")
    return f"{tokens:,}" if isinstance(tokens, int) else "-"


def _bytes(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"
