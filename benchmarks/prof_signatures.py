"""Where the fuzzy_dedup signatures phase spends its time, on the parts a `curate run` left.

    python benchmarks/prof_signatures.py RUN_DIR [--device gpu] [--threads 16 8 4]

Runs the phase's three steps over the run's segment-00 parts in a thread pool, as the phase's
tasks do (read the text column; hash and group the band rows by shuffle bucket; write them),
each step alone and all three chained, and prints the wall time of each and the per-step task
seconds; then the phase's task function itself.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import harness

from curator.runtime.worker.memory import memory_returned
from curator.stages.dedup.fuzzy import FuzzyDedup
from curator.stages.dedup.fuzzy.signatures import (
    SignatureTask,
    part_band_rows,
    read_text,
    signature_part,
    write_band_rows,
)

RETURNED = False  # each task in ``memory_returned``, as a phase's tasks run


def _timed(fn, items, threads: int) -> tuple[float, list]:
    def run(item):
        if not RETURNED:
            return fn(item)
        with memory_returned():
            return fn(item)

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        out = list(pool.map(run, items))
    return time.perf_counter() - started, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--device", default="gpu")
    ap.add_argument("--threads", type=int, nargs="+", default=[16, 8, 4])
    ap.add_argument("--memory-returned", action="store_true",
                    help="then again with each task in memory_returned (a phase's tasks are)")
    harness.add_results_argument(ap)
    args = ap.parse_args()
    with harness.Recording(args.results):
        profile(args)


def profile(args: argparse.Namespace) -> None:
    global RETURNED
    parts = sorted((args.run_dir / "_work" / "segment-00").glob("*.parquet"))
    gb = sum(p.stat().st_size for p in parts) / 1e9
    stage = FuzzyDedup(device=args.device)
    params = stage.minhash_params()
    stage.model_copy().warm_up()
    work = Path(tempfile.mkdtemp(prefix="profsig-"))
    tasks = [SignatureTask(p.stem, str(p), str(work), params, args.device, False)
             for p in parts]
    print(f"{len(parts)} parts, {gb:.2f} GB on disk, device {args.device}")
    for returned, threads in [(r, t) for r in ([False, True] if args.memory_returned
                                                 else [False]) for t in args.threads]:
        RETURNED = returned
        print("memory_returned " if returned else "", end="")
        wall, texts = _timed(lambda t: read_text(t.path, t.device), tasks, threads)
        print(f"threads {threads:2d}: read {wall:.2f} s", end="")
        pairs = list(zip(tasks, texts, strict=True))
        wall, rows = _timed(lambda tx: part_band_rows(*tx)[1], pairs, threads)
        print(f" | hash+group {wall:.2f} s", end="")
        del texts, pairs
        pairs = list(zip(tasks, rows, strict=True))
        wall, _ = _timed(lambda tr: write_band_rows(tr[0], None, tr[1]), pairs, threads)
        print(f" | write {wall:.2f} s", end="")
        del rows, pairs
        shutil.rmtree(work / "bands", ignore_errors=True)

        def chained(task: SignatureTask) -> tuple[float, float, float]:
            t0 = time.perf_counter()
            text = read_text(task.path, task.device)
            t1 = time.perf_counter()
            _, rows = part_band_rows(task, text)
            t2 = time.perf_counter()
            write_band_rows(task, None, rows)
            return t1 - t0, t2 - t1, time.perf_counter() - t2

        wall, steps = _timed(chained, tasks, threads)
        sums = [sum(s[i] for s in steps) for i in range(3)]
        print(f" | chained {wall:.2f} s (task s: read {sums[0]:.1f}, hash+group {sums[1]:.1f},"
              f" write {sums[2]:.1f})", end="")
        shutil.rmtree(work / "bands", ignore_errors=True)
        wall, _ = _timed(signature_part, tasks, threads)
        print(f" | signature_part {wall:.2f} s = {gb / wall:.2f} GB/s")
        shutil.rmtree(work / "bands", ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
