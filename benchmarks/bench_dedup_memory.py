"""Peak memory of dedup through the product path as the corpus grows: `curate run` read_parquet →
fuzzy_dedup (or exact_dedup, or line_dedup) → write_parquet on a corpus of ``--gb`` and of
``--factor`` times that, per device; the peak RSS of every process of the run (driver, workers,
...) at each size, and the ratio. Flat means every process's ratio within 1.10.

    python benchmarks/bench_dedup_memory.py --gb 0.12 --factor 4 --devices cpu --workers 2

Input files of 30 MB by default, so that both corpora keep every worker busy from the start; with
150 MB files (``--part-mb 150``) the small corpus is one file, read by one task while the other
workers wait, and it was not flat on the H200 (results_dedup_memory.md).

The corpora are bench_dedup_product's (mostly unique recombined English and Japanese sentences,
planted near-duplicates), for line_dedup line_docs.py's (web pages with site boilerplate); each
process's peak is the kernel's high-water mark (VmHWM), read every 0.1 s while it runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

import harness

sys.path.insert(0, str(Path(__file__).resolve().parent))
import line_docs
from bench_dedup_product import SHARED, curate_run_sampled, device_env, make_corpus, write_pipeline

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 1.10


def run(stage: str, shingle: str, device: str, parts: Path, work: Path, workers: int) -> dict:
    out = work / f"run-{parts.name}-{device}"
    shutil.rmtree(out, ignore_errors=True)
    config = work / f"{parts.name}-{device}.yaml"
    write_pipeline(config, stage, device, parts, out, workers,
                   f", shingle: {shingle}" if stage == "fuzzy" else "")
    if stage == "line":  # no device to choose
        config.write_text(config.read_text().replace(", device: cpu", ""))
    wall, peaks = curate_run_sampled(config, device_env(device))
    roles: dict[str, float] = {}
    for role, mb in peaks.per_process.values():
        roles[role] = max(roles.get(role, 0.0), mb)
    stats = json.loads((out / "stats.json").read_text())
    entry = next(s for s in stats["stages"] if s["type"] == f"{stage}_dedup")
    return {"wall": wall, "roles": roles, "tree": peaks.tree, "in": entry["in"],
            "kept": entry["kept"], "facts": entry.get(f"{stage}_dedup", {})}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gb", type=float, default=0.12, help="GB of text of the smaller corpus")
    ap.add_argument("--factor", type=int, default=4)
    ap.add_argument("--devices", nargs="+", default=["cpu"], choices=["cpu", "gpu"])
    ap.add_argument("--stage", choices=["fuzzy", "exact", "line"], default="fuzzy")
    ap.add_argument("--shingle", choices=["char", "word"], default="word")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--part-mb", type=float, default=30.0, help="MB of text per input file")
    ap.add_argument("--corpus", type=Path, default=SHARED)
    ap.add_argument("--no-warm", dest="warm", action="store_false",
                    help="skip the warm-up runs on a tiny corpus (kernel caches)")
    ap.add_argument("--work", type=Path, default=ROOT / "bench-data" / "dedup-memory")
    ap.add_argument("--results", type=Path,
                    default=ROOT / "benchmarks" / "results_dedup_memory.md")
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    sizes = [args.gb, args.gb * args.factor]
    if args.stage == "line":
        if args.devices != ["cpu"]:
            raise SystemExit("line_dedup runs on the CPU only")
        make = line_docs.make_corpus
    else:
        make = make_corpus
    made, runs = {}, {}
    if args.warm:  # numba's and CuPy's kernel caches filled: compiling would raise the first peak
        tiny = args.work / "corpus-warm"
        make(tiny, 0.005, args.part_mb, 2, args.corpus, os.cpu_count() or 1)
        for device in args.devices:
            run(args.stage, args.shingle, device, tiny, args.work, args.workers)
    for gb in sizes:
        parts = args.work / f"corpus-{gb:g}gb"
        made[gb] = make(parts, gb, args.part_mb, 1, args.corpus, os.cpu_count() or 1)
        for device in args.devices:
            runs[gb, device] = run(args.stage, args.shingle, device, parts, args.work,
                                   args.workers)
            print(f"{gb:g} GB {device}: {runs[gb, device]}", flush=True)
    command = "python benchmarks/bench_dedup_memory.py " + " ".join(sys.argv[1:])
    lines = [f"# Peak memory of {args.stage}_dedup through `curate run` as the corpus grows", "",
             f"Command: `{command}`; {os.cpu_count()} cores, {args.workers} workers, "
             f"{args.stage} dedup" + (f" ({args.shingle} shingles)" if args.stage == "fuzzy"
                                      else "") + ".", "",
             "| device | corpus GB | documents | whole run s | driver MiB | largest worker MiB | "
             "largest process MiB | tree sum MiB |", "|---|---|---|---|---|---|---|---|"]
    verdicts = []
    for device in args.devices:
        for gb in sizes:
            r = runs[gb, device]
            roles = r["roles"]
            lines.append(f"| {device} | {made[gb]['bytes'] / 1e9:.3f} | {r['in']:,} | "
                         f"{r['wall']:.1f} | {roles.get('driver', 0):.0f} | "
                         f"{roles.get('worker', 0):.0f} | {max(roles.values()):.0f} | "
                         f"{r['tree']:.0f} |")
        small, big = runs[sizes[0], device], runs[sizes[1], device]
        ratios = {role: big["roles"].get(role, 0) / max(mb, 1e-9)
                  for role, mb in small["roles"].items() if role in ("driver", "worker")}
        flat = all(v <= LIMIT for v in ratios.values())
        tree = big["tree"] / max(small["tree"], 1e-9)
        verdicts.append(f"* {device}: {args.factor}x the text → " + ", ".join(
            f"{role} {v:.2f}x" for role, v in ratios.items()) +
            f": **{'flat' if flat else 'not flat'}** (limit {LIMIT:.2f}x for every process); "
            f"tree sum {tree:.2f}x" + (
                f"; shuffle buckets {small['facts']['buckets']} → {big['facts']['buckets']}"
                if "buckets" in small["facts"] else "") + ".")
    lines += ["", *verdicts, "", "Peak RSS of each process is the kernel's high-water mark "
              "(VmHWM), read every 0.1 s while it runs; the tree sum is sampled every 0.1 s (a "
              "lower bound: spikes between samples are missed). `worker` is the largest worker "
              "process (and the fork server they come from)."]
    harness.record(args.results, "\n".join(lines),
                   figures={f"{gb:g} GB {device}": r for (gb, device), r in runs.items()})
    print("\n".join(lines))


if __name__ == "__main__":
    main()
