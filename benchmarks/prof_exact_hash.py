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

import harness

from curator.batch import ID, TEXT
from curator.io.parquet import read_part
from curator.runtime.cluster.executors import ExecutorPool
from curator.runtime.driver.phases import _keyed
from curator.stages.dedup.exact import ExactDedup, _hash_part, _HashTask, normalise_text

_POOLS: dict[int, ThreadPoolExecutor] = {}


def _timed(fn, items, threads: int) -> tuple[float, list]:
    """Wall seconds of ``fn`` over ``items`` on a pool kept for the run (its threads keep their
    pinned buffers, as a Dask worker's do), after one untimed pass over a few items."""
    pool = _POOLS.setdefault(threads, ThreadPoolExecutor(threads))
    list(pool.map(fn, items[:threads]))
    started = time.perf_counter()
    out = list(pool.map(fn, items))
    return time.perf_counter() - started, out


def _pageable(text) -> tuple:
    """The GPU digests with a plain (pageable) copy of the text, as before ``host_staging``."""
    import cupy as cp

    from curator.kernels.doc_hash_gpu import doc_hashes_device
    from curator.kernels.normalise_gpu import normalise_device
    from curator.kernels.shingles import string_buffers

    buf = string_buffers(text)
    lo, hi = int(buf.starts.min()), int(buf.ends.max())
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        data = cp.asarray(buf.data[lo:max(hi, lo + 1)])
        normalised = normalise_device(data, cp.asarray(buf.starts), cp.asarray(buf.ends), lo)
        high, low = doc_hashes_device(*normalised)
        return high.get(stream=stream), low.get(stream=stream)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--threads", type=int, nargs="+", default=[16, 1])
    ap.add_argument("--devices", nargs="+", default=["cpu", "gpu"])
    ap.add_argument("--dask", action="store_true")
    harness.add_results_argument(ap)
    args = ap.parse_args()
    with harness.Recording(args.results):
        profile(args)


def profile(args: argparse.Namespace) -> None:
    parts = sorted((args.run_dir / "_work" / "segment-00").glob("*.parquet"))
    gb = sum(p.stat().st_size for p in parts) / 1e9
    print(f"{len(parts)} parts, {gb:.2f} GB on disk")
    from curator.kernels.doc_hash import doc_hashes

    ways = {"cpu": lambda t: doc_hashes(normalise_text(t))}
    if "gpu" in args.devices:
        from curator.kernels.doc_hash_gpu import doc_hashes_gpu

        ways["gpu, normalised on the cpu"] = lambda t: doc_hashes_gpu(normalise_text(t))
        ways["gpu, normalised on the gpu"] = lambda t: doc_hashes_gpu(t, normalise=True)
        ways["the same, pageable copy"] = _pageable
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
            tasks = [_HashTask(f"part-{i:05d}", str(p), str(work), True, "xxh3_128", None,
                               device) for i, p in enumerate(parts)]
            wall, _ = _timed(_hash_part, tasks, threads)
            print(f" | _hash_part {device} {wall:.2f} s", end="")
            shutil.rmtree(work / "hash", ignore_errors=True)
        print()
    if args.dask:
        _through_dask(parts, work, args.devices, max(args.threads))
    shutil.rmtree(work, ignore_errors=True)
    for pool in _POOLS.values():
        pool.shutdown()


def _plain(item: tuple) -> tuple[str, object]:
    fn, task, key, _, _ = item
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
                tasks = [(_hash_part, _HashTask(f"part-{i:05d}", str(p), str(work), True,
                                                "xxh3_128", None, device), f"part-{i:05d}",
                          "hash", str(work)) for i, p in enumerate(parts)]
                resources = {"GPU": 1} if device == "gpu" else {}
                list(executor.map(wrapper, tasks[:threads], [t[2] for t in tasks[:threads]],
                                  resources))  # untimed: each thread's first task
                started = time.perf_counter()
                list(executor.map(wrapper, tasks, [t[2] for t in tasks], resources))
                print(f"{label}, {device}: _hash_part {time.perf_counter() - started:.2f} s")
                shutil.rmtree(work / "hash", ignore_errors=True)
            sys.setswitchinterval(before)


if __name__ == "__main__":
    main()
