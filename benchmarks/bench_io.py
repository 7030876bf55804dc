"""Core runtime benchmark: read JSONL → write Parquet, curator against plain pyarrow.

Run by ``make bench``. Generates >= 1 GB of JSONL from the bundled real sample (ids, metadata),
then, side by side in one run and alternating (A B A B ...):
  * plain pyarrow: ``pq.write_table(pyarrow.json.read_json(file))`` for every file;
  * curator: ``curate run`` of a read_jsonl → write_parquet pipeline (Dask LocalCluster, one
    worker per core, cluster start-up included).
Peak memory is the largest summed RSS of the process tree (driver, scheduler, workers), sampled
every 20 ms. The 4x input measures whether memory grows with the corpus.
Figures are appended to benchmarks/results.md (``--out``) through ``harness.record``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import harness
import psutil

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench-data" / "io"
FILE_BYTES = 128 << 20


def generate(n_files: int) -> None:
    """Write ``n_files`` JSONL files of ~128 MB built from the real sample documents."""
    docs = []
    for path in sorted((ROOT / "data" / "sample").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            docs += [json.loads(line) for line in f]
    DATA.mkdir(parents=True, exist_ok=True)
    serial = 0
    for i in range(n_files):
        path = DATA / f"shard-{i:03d}.jsonl"
        if path.exists() and path.stat().st_size >= FILE_BYTES:
            continue
        with open(path, "w", encoding="utf-8") as out:
            written = 0
            while written < FILE_BYTES:
                doc = docs[serial % len(docs)]
                line = json.dumps({"id": f"{i}-{serial}", "text": doc["text"],
                                   "source": doc["id"], "copy": serial // len(docs)},
                                  ensure_ascii=False) + "\n"
                out.write(line)
                written += len(line.encode())
                serial += 1


def warm_cache(paths: list[Path]) -> None:
    """Read the inputs once so that neither side pays for the first read from disk."""
    for path in paths:
        with open(path, "rb") as f:
            while f.read(64 << 20):
                pass


def files(n: int) -> list[Path]:
    return [DATA / f"shard-{i:03d}.jsonl" for i in range(n)]


def measure(cmd: list[str]) -> tuple[float, int]:
    """Wall seconds and peak summed RSS of the process tree of ``cmd``."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        parent = psutil.Process(proc.pid)
        while not done.is_set():
            try:
                tree = [parent, *parent.children(recursive=True)]
                peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
            except psutil.Error:
                pass
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    done.set()
    sampler.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd} failed: {err.decode()[-2000:]}")
    return time.perf_counter() - start, peak


BASELINE = """
import sys, pyarrow.json as pj, pyarrow.parquet as pq
from pathlib import Path
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
for i, f in enumerate(sys.argv[2:]):
    pq.write_table(pj.read_json(f), out / f"part-{i:05d}.parquet")
"""


def baseline_cmd(inputs: list[Path], out: Path) -> list[str]:
    return [sys.executable, "-c", BASELINE, str(out), *map(str, inputs)]


def curator_cmd(inputs: list[Path], out: Path, workers: int) -> list[str]:
    config = out.with_suffix(".yaml")
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({
        "name": "bench-io", "executor": {"type": "dask", "workers": workers},
        "stages": [{"type": "read_jsonl", "path": [str(p) for p in inputs]},
                   {"type": "write_parquet"}]}))
    return [sys.executable, "-m", "curator", "run", str(config), "--output", str(out),
            "--force"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=8, help="1x input: files of 128 MB")
    parser.add_argument("--pairs", type=int, default=3, help="A/B pairs at 1x")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results.md",
                        help="results file: this run's section is appended")
    args = parser.parse_args()
    generate(args.files * 4)
    one_x, four_x = files(args.files), files(args.files * 4)
    size_1x = sum(p.stat().st_size for p in one_x)
    scratch = ROOT / "bench-data" / "out"
    warm_cache(four_x)
    rows = []
    for pair in range(args.pairs):
        for name, cmd in (("pyarrow", baseline_cmd(one_x, scratch / "pa")),
                          ("curator", curator_cmd(one_x, scratch / "cur", args.workers))):
            shutil.rmtree(scratch / ("pa" if name == "pyarrow" else "cur"), ignore_errors=True)
            scratch.mkdir(parents=True, exist_ok=True)
            seconds, peak = measure(cmd)
            rows.append((pair, name, seconds, peak))
            print(f"pair {pair} {name}: {seconds:.2f} s, {size_1x / seconds / 1e6:.0f} MB/s, "
                  f"peak {peak / 2**20:.0f} MiB", flush=True)
    ratios = [b[2] / c[2] for b, c in zip(rows[::2], rows[1::2], strict=True)]
    shutil.rmtree(scratch / "cur", ignore_errors=True)
    seconds_4x, peak_4x = measure(curator_cmd(four_x, scratch / "cur", args.workers))
    shutil.rmtree(scratch / "pa", ignore_errors=True)
    baseline_4x, _ = measure(baseline_cmd(four_x, scratch / "pa"))
    size_4x = sum(p.stat().st_size for p in four_x)
    peak_1x = statistics.median(r[3] for r in rows if r[1] == "curator")
    report(args, size_1x, size_4x, rows, ratios, (seconds_4x, baseline_4x), peak_1x, peak_4x)
    shutil.rmtree(scratch, ignore_errors=True)


def report(args, size_1x, size_4x, rows, ratios, seconds_4x, peak_1x, peak_4x) -> None:
    seconds_4x, baseline_4x = seconds_4x
    med = {name: statistics.median(r[2] for r in rows if r[1] == name)
           for name in ("pyarrow", "curator")}
    lines = [
        "## Core runtime: read JSONL → write Parquet (`python benchmarks/bench_io.py`)",
        "",
        f"Machine: {os.cpu_count()} cores; input {size_1x / 1e9:.2f} GB of JSONL "
        f"({args.files} files of 128 MB, page cache warm) built from the bundled real sample; "
        f"curator: `curate run`, a Dask LocalCluster of {args.workers} workers (threads, as "
        f"every stage here releases the GIL), start-up and shutdown included; "
        f"{args.pairs} A/B pairs.",
        "",
        "| | median seconds | MB/s | median peak RSS (tree) |",
        "|---|---|---|---|",
    ]
    for name in ("pyarrow", "curator"):
        peak = statistics.median(r[3] for r in rows if r[1] == name)
        lines.append(f"| {name} | {med[name]:.2f} | {size_1x / med[name] / 1e6:.0f} | "
                     f"{peak / 2**20:.0f} MiB |")
    lines += [
        "",
        f"Throughput ratio curator / pyarrow, pair by pair: "
        f"{', '.join(f'{r:.2f}' for r in ratios)} (median **{statistics.median(ratios):.2f}x**; "
        "goal >= 0.8x).",
        "",
        f"At 4x input ({size_4x / 1e9:.2f} GB, one run each): curator {seconds_4x:.1f} s, "
        f"pyarrow {baseline_4x:.1f} s: throughput ratio **{baseline_4x / seconds_4x:.2f}x**.",
        "",
        f"Memory: curator on 4x input: peak "
        f"{peak_4x / 2**20:.0f} MiB vs {peak_1x / 2**20:.0f} MiB on 1x "
        f"(ratio **{peak_4x / peak_1x:.2f}**; goal within 10%).",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    harness.record(args.out, text)


if __name__ == "__main__":
    main()
