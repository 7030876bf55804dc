"""Where the exact_dedup hash phase spends its time, on the parts a `curate run` left.

    python benchmarks/prof_exact_hash.py RUN_DIR [--threads 16 1]

Over the run's segment-00 parts in a thread pool, as the phase's tasks run: reading the
columns; the digests of the normalised text on the CPU (Arrow lower case, the numba whitespace
collapse, the bulk hash), on the GPU with the text normalised on the CPU first, and normalised
and hashed on the GPU; then the phase's task function on each device. Wall seconds and GB/s.
With ``--dask``, the task function also through the runtime's own threaded Dask cluster as a
phase maps it (``_keyed``: each task in ``memory_returned``; GPU tasks ask for ``GPU``), without
``memory_returned``, and with a 1 ms GIL switch interval: what the product adds to the pool.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from curator.batch import ID, TEXT
from curator.io.parquet import read_part
from curator.runtime.executors import ExecutorPool
from curator.runtime.phases import _keyed
from curator.stages.dedup.exact import ExactDedup, _hash_part, _HashTask, normalise_text


def _timed(fn, items, threads: int) -> tuple[float, list]:
    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        out = list(pool.map(fn, items))
    return time.perf_counter() - started, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--threads", type=int, nargs="+", default=[16, 1])
    ap.add_argument("--devices", nargs="+", default=["cpu", "gpu"])
    ap.add_argument("--dask", action="store_true")
    args = ap.parse_args()
    parts = sorted((args.run_dir / "_work" / "segment-00").glob("*.parquet"))
    gb = sum(p.stat().st_size for p in parts) / 1e9
    print(f"{len(parts)} parts, {gb:.2f} GB on disk")
    from curator.kernels.doc_hash import doc_hashes

    ways = {"cpu": lambda t: doc_hashes(normalise_text(t))}
    if "gpu" in args.devices:
        from curator.kernels.doc_hash_gpu import doc_hashes_gpu

        ways["gpu, normalised on the cpu"] = lambda t: doc_hashes_gpu(normalise_text(t))
        ways["gpu, normalised on the gpu"] = lambda t: doc_hashes_gpu(t, normalise=True)
    for device in args.devices:
        ExactDedup(device=device).warm_up()
    work = Path(tempfile.mkdtemp(prefix="profexact-"))
    for threads in args.threads:
        wall, tables = _timed(lambda p: read_part(str(p), [TEXT, ID]), parts, threads)
        print(f"threads {threads:2d}: read {wall:.2f} s", end="")
        texts = [t.column(TEXT).combine_chunks() for t in tables]
        del tables
        for name, way in ways.items():
            wall, _ = _timed(way, texts, threads)
            print(f" | {name} {wall:.2f} s ({gb / wall:.1f} GB/s)", end="")
        del texts
        for device in args.devices:
            tasks = [_HashTask(i, str(p), str(work), 16, True, "xxh3_128", None, device)
                     for i, p in enumerate(parts)]
            wall, _ = _timed(_hash_part, tasks, threads)
            print(f" | _hash_part {device} {wall:.2f} s", end="")
            shutil.rmtree(work / "hash", ignore_errors=True)
        print()
    if args.dask:
        _through_dask(parts, work, args.devices, max(args.threads))
    shutil.rmtree(work, ignore_errors=True)


def _plain(item: tuple) -> tuple[str, dict]:
    fn, task, key = item
    return key, fn(task)


def _through_dask(parts: list[Path], work: Path, devices: list[str], threads: int) -> None:
    with ExecutorPool("dask", threads, None, None, False) as pool:
        executor = pool.get(False)
        for label, wrapper, interval in [("dask", _keyed, None), ("dask, no memory_returned",
                                         _plain, None), ("dask, 1 ms switch", _keyed, 0.001)]:
            before = sys.getswitchinterval()
            if interval:
                sys.setswitchinterval(interval)
            for device in devices:
                tasks = [(_hash_part, _HashTask(i, str(p), str(work), 16, True, "xxh3_128",
                                                None, device), f"part-{i:05d}")
                         for i, p in enumerate(parts)]
                started = time.perf_counter()
                list(executor.map(wrapper, tasks, [t[2] for t in tasks],
                                  {"GPU": 1} if device == "gpu" else {}))
                print(f"{label}, {device}: _hash_part {time.perf_counter() - started:.2f} s")
                shutil.rmtree(work / "hash", ignore_errors=True)
            sys.setswitchinterval(before)


if __name__ == "__main__":
    main()
