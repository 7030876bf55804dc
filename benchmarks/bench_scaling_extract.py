"""Scaling of the extraction segment over worker count: ``curate run`` of read_warc →
extract_html (trafilatura) → langid → heuristic_filter → write_parquet at 1, 2, 4, ... workers,
each run pinned with ``taskset`` to as many cores as workers (driver, scheduler and workers
together), on real pages: the 481 HTML pages of the Zyte article benchmark and trafilatura's
evaluation set (../shared/corpus, or ``--corpus``), repeated ``--copies`` times with distinct URLs
into ``--files`` WARC files. No barrier: the segment issue 12 asks to scale once extraction
exists. Table: workers, seconds, pages/s, speed-up, efficiency; outputs must be byte-identical.

    PYTHONPATH=. python benchmarks/bench_scaling_extract.py --copies 8 --workers 1,2,4,8,16
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

import harness

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_extract import load_sets, wrap_pages
from bench_scaling import cpu_model, digest, run, utilisation

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = Path(os.environ.get("CURATOR_CORPUS", ROOT.parent / "shared" / "corpus"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--copies", type=int, default=4, help="Times each page is repeated.")
    parser.add_argument("--files", type=int, default=256, help="WARC files (shards).")
    parser.add_argument("--workers", default=None,
                        help="Comma-separated counts; default 1, 2, 4, ... up to the cores.")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results_scaling_extract.md")
    parser.add_argument("--base", default=None, metavar="W:SECONDS:RUN_S",
                        help="Baseline run of an earlier call on the same data (same digest), "
                             "e.g. 1:334.2:332.9; default the smallest worker count run here.")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    counts = [int(w) for w in args.workers.split(",")] if args.workers else \
        [2**i for i in range(cores.bit_length()) if 2**i <= cores]
    work = Path(tempfile.mkdtemp(prefix="bench-scaling-extract-"))
    sets = load_sets(args.corpus)
    pages = (sets["zyte"][0] + sets["trafilatura_eval"][0]) * args.copies
    wrap_pages(pages, work / "warc", args.files)
    config = work / "pipeline.yaml"
    config.write_text(f"""
name: bench-scaling-extract
stages:
  - {{type: read_warc, path: "{work / 'warc'}/*.warc.gz"}}
  - {{type: extract_html}}
  - {{type: langid}}
  - {{type: heuristic_filter}}
  - {{type: write_parquet}}
""")
    rows = {}
    for w in counts:
        out = work / f"run-{w}"
        seconds, stats = run(config, out, w)
        stage = {s["name"]: s for s in stats["stages"]}
        rows[w] = {"seconds": seconds, "run_s": stats["seconds"],
                   "extract_s": stage["extract_html"]["seconds"],
                   "kept": stage["write_parquet"]["kept"], "digest": digest(out),
                   "start_s": stats.get("executor_start_seconds", 0.0), **utilisation(stats, w)}
        print(f"{w:>3} workers: {seconds:7.1f} s", flush=True)
    if args.base:
        first, first_s, first_run = (float(x) for x in args.base.split(":"))
        base, base_run = first_s * first, first_run * first
    else:
        first = min(rows)
        base, base_run = rows[first]["seconds"] * first, rows[first]["run_s"] * first
    lines = ["# Scaling of the extraction segment (read_warc → extract_html → langid → "
             "heuristic_filter)", "",
             f"Machine: {os.cpu_count()} cores ({cpu_model()}), Python "
             f"{platform.python_version()}. Each run: `taskset -c 0-(W-1) curate run "
             "pipeline.yaml --workers W`.", "",
             f"Data: {len(pages)} real HTML pages ({len(pages) // args.copies} distinct, "
             f"{args.copies} copies with distinct URLs) in {args.files} WARC files.", "",
             *([f"Speed-ups against the {first:g}-worker run of an earlier call: "
                f"{args.base}.", ""] if args.base else []),
             "| workers | seconds | pages/s | speed-up | efficiency | run s | efficiency (run s) "
             "| cluster start s | task span s | tasks running (mean) | extract task-s | kept "
             "| output digest |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for w in sorted(rows):
        r = rows[w]
        speedup = base / r["seconds"]
        lines.append(f"| {w} | {r['seconds']:.1f} | {len(pages) / r['seconds']:,.1f} | "
                     f"{speedup:.2f} | {speedup / w:.0%} | {r['run_s']:.1f} | "
                     f"{base_run / r['run_s'] / w:.0%} | {r['start_s']:.1f} | {r['span_s']:.1f} | "
                     f"{r['busy']:.1f} | {r['extract_s']:.1f} | {r['kept']} | "
                     f"{r['digest']} |")
    same = len({r["digest"] for r in rows.values()}) == 1
    lines += ["", f"Outputs of all runs byte-identical: {'yes' if same else 'NO'}.", "",
              "Command: `PYTHONPATH=. python benchmarks/bench_scaling_extract.py "
              + " ".join(sys.argv[1:]) + "`", ""]
    harness.record(args.out, "\n".join(lines), figures={"pages": len(pages), "rows": rows})
    print("\n".join(lines))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
