"""The machine's own ceiling for the extraction segment's scaling: N independent processes, each
pinned to one core (0..N-1), each extracting the same real pages with trafilatura called
directly: no curator, no Dask, nothing shared. The speed-up these processes reach is the most a
pipeline can reach on these cores (turbo, shared caches, hyper-threads); a pure-Python loop run
the same way shows the same for work that touches no memory.

    PYTHONPATH=. python benchmarks/bench_cpu_ceiling.py --workers 1,2,4,8,16
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import sys
import time
from pathlib import Path

import harness
import trafilatura

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_extract import DIRECT, load_sets
from bench_scaling import cpu_model

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = Path(os.environ.get("CURATOR_CORPUS", ROOT.parent / "shared" / "corpus"))
PAGES: list[str] = []


def _extract(core: int) -> float:
    os.sched_setaffinity(0, {core})
    started = time.perf_counter()
    for page in PAGES:
        trafilatura.extract(page, **DIRECT)
    return time.perf_counter() - started


def _loop(core: int) -> float:
    os.sched_setaffinity(0, {core})
    started = time.perf_counter()
    total = 0
    for i in range(30_000_000):
        total += i & 7
    return time.perf_counter() - started


def ceiling(job, counts: list[int]) -> dict[int, float]:
    """Wall seconds of N pinned processes doing the same job at once, for each N."""
    walls = {}
    for n in counts:
        with mp.get_context("fork").Pool(n) as pool:
            started = time.perf_counter()
            pool.map(job, range(n), chunksize=1)
            walls[n] = time.perf_counter() - started
        print(f"{job.__name__} {n:>3}: {walls[n]:.2f} s", flush=True)
    return walls


def table(title: str, walls: dict[int, float]) -> list[str]:
    first = min(walls)
    lines = [f"### {title}", "", "| processes | seconds | speed-up | efficiency |",
             "|---:|---:|---:|---:|"]
    for n, wall in sorted(walls.items()):
        speedup = (n / wall) / (first / walls[first])
        lines.append(f"| {n} | {wall:.2f} | {speedup:.2f} | {speedup / n:.0%} |")
    return [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--pages", type=int, default=200, help="Pages each process extracts.")
    parser.add_argument("--workers", default="1,2,4,8,16")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results_cpu_ceiling.md")
    args = parser.parse_args()
    counts = [int(w) for w in args.workers.split(",")]
    sets = load_sets(args.corpus)
    PAGES.extend((sets["zyte"][0] + sets["trafilatura_eval"][0])[:args.pages])
    extract = ceiling(_extract, counts)
    loop = ceiling(_loop, counts)
    lines = ["# The machine's scaling ceiling", "",
             f"Machine: {os.cpu_count()} cores ({cpu_model()}), Python "
             f"{platform.python_version()}. N processes at once, process i pinned to core i; "
             "speed-up = N x (seconds with 1) / (seconds with N).", "",
             *table(f"trafilatura.extract on the same {len(PAGES)} real pages in each process",
                    extract),
             *table("pure-Python integer loop (30 M iterations) in each process", loop),
             f"Command: `PYTHONPATH=. python benchmarks/bench_cpu_ceiling.py "
             f"--workers {args.workers} --pages {args.pages}`", ""]
    harness.record(args.out, "\n".join(lines),
                   figures={"trafilatura_s": extract, "loop_s": loop})
    print("\n".join(lines))


if __name__ == "__main__":
    main()
