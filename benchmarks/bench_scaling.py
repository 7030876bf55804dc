"""Scaling of the CPU-heavy segment over worker count: ``curate run`` of read_parquet →
heuristic_filter → fuzzy_dedup (device cpu) → write_parquet at 1, 2, 4, 8, 16 workers, each run
pinned with ``taskset`` to as many cores as workers (driver, scheduler and workers together), on
generated but realistic English documents: sentences of the real texts in
../shared/corpus/text_corpus recombined into new documents with a few word swaps (mostly unique),
plus planted near duplicates (edited copies) for fuzzy_dedup to find. Table: workers, seconds,
docs/s, speed-up, parallel efficiency; the outputs of all runs must be byte-identical.

    PYTHONPATH=. python benchmarks/bench_scaling.py [--mb 64] [--workers 1,2,4,8,16]
        [--out benchmarks/results_scaling.md] [--work DIR]

With ``--work DIR`` the data and each run's figures are kept there, and a later invocation with
the same data arguments adds its rows to the table (``--workers 1``, then ``--workers 2,4,8,16``:
each within a command time limit).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dedup_data import english_docs, near_duplicate

ROOT = Path(__file__).resolve().parents[1]
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def sentences(docs: list[str]) -> list[str]:
    """The real sentences of the corpus (whitespace normalised, 30 to 400 characters)."""
    out = []
    for doc in docs:
        for s in _SENTENCE.split(doc):
            s = " ".join(s.split())
            if 30 <= len(s) <= 400:
                out.append(s)
    return out


def new_document(pool: list[str], rng: random.Random) -> str:
    """6 to 40 real sentences drawn at random, in paragraphs, with a few adjacent words swapped."""
    picked = [rng.choice(pool) for _ in range(rng.randint(6, 40))]
    words = " ".join(picked).split(" ")
    for _ in range(max(1, len(words) // 50)):
        i = rng.randrange(len(words) - 1)
        words[i], words[i + 1] = words[i + 1], words[i]
    text, paragraphs, start = " ".join(words), [], 0
    while start < len(text):  # paragraphs of ~600 characters at sentence ends
        cut = text.find(". ", start + 600)
        end = len(text) if cut < 0 else cut + 1
        paragraphs.append(text[start:end].strip())
        start = end + 1
    return "\n\n".join(paragraphs)


def build(folder: Path, megabytes: int, shards: int, near_rate: float, seed: int) -> dict:
    """Parquet shards of about ``megabytes`` of text; ``near_rate`` of documents are edited
    copies (1% of words) of an earlier one."""
    rng = random.Random(seed)
    pool = sentences(english_docs())
    docs: list[str] = []
    size, planted = 0, 0
    while size < megabytes * 1_000_000:
        if docs and rng.random() < near_rate:
            text = near_duplicate(rng.choice(docs), 0.01, rng)
            planted += 1
        else:
            text = new_document(pool, rng)
        docs.append(text)
        size += len(text.encode())
    order = list(range(len(docs)))
    rng.shuffle(order)
    folder.mkdir(parents=True, exist_ok=True)
    for s in range(shards):
        ids = order[s::shards]
        table = pa.table({"id": [f"doc-{i:08d}" for i in ids], "text": [docs[i] for i in ids]})
        pq.write_table(table, folder / f"part-{s:04d}.parquet")
    return {"docs": len(docs), "bytes": size, "planted": planted, "sentences": len(pool)}


def run(config: Path, output: Path, workers: int) -> tuple[float, dict]:
    """One ``curate run`` on cores 0..workers-1; wall seconds and stats.json."""
    cmd = [sys.executable, "-m", "curator", "run", str(config), "--workers", str(workers),
           "--output", str(output)]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", f"0-{workers - 1}", *cmd]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"curate run failed at {workers} workers:\n{done.stderr[-3000:]}")
    return seconds, json.loads((output / "stats.json").read_text())


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def output_bytes(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((run_dir / "write_parquet").glob("*"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=64, help="Megabytes of text to generate.")
    parser.add_argument("--shards", type=int, default=64)
    parser.add_argument("--workers", default=None,
                        help="Comma-separated counts; default 1, 2, 4, ... up to the cores.")
    parser.add_argument("--near", type=float, default=0.05, help="Share of near duplicates.")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results_scaling.md")
    parser.add_argument("--work", type=Path, default=None, help="Keep data and runs here.")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    counts = [int(w) for w in args.workers.split(",")] if args.workers else \
        [2**i for i in range(cores.bit_length()) if 2**i <= cores]
    if max(counts) > (os.cpu_count() or 1):
        raise SystemExit(f"{max(counts)} workers but {os.cpu_count()} cores here")
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-scaling-"))
    data = load_or_build(work, args)
    config = work / "pipeline.yaml"
    config.write_text(f"""
name: bench-scaling
stages:
  - {{type: read_parquet, path: "{work / 'data'}/*.parquet"}}
  - {{type: heuristic_filter}}
  - {{type: fuzzy_dedup, device: cpu}}
  - {{type: write_parquet}}
""")
    done_file = work / "results.json"  # runs of earlier invocations on the same --work data
    rows = {int(k): v for k, v in json.loads(done_file.read_text()).items()} \
        if done_file.exists() else {}
    for w in counts:
        out = work / f"run-{w}"
        shutil.rmtree(out, ignore_errors=True)
        seconds, stats = run(config, out, w)
        stage = {s["name"]: s for s in stats["stages"]}
        rows[w] = {"seconds": seconds, "run_s": stats["seconds"],
                   "heuristic_s": stage["heuristic_filter"]["seconds"],
                   "fuzzy_s": stage["fuzzy_dedup"]["seconds"],
                   "removed": [stage["heuristic_filter"]["removed"],
                               stage["fuzzy_dedup"]["removed"]],
                   "digest": digest(out)}
        done_file.write_text(json.dumps(rows))
        print(f"{w:>3} workers: {seconds:7.1f} s", flush=True)
    table = render(rows, data, args)
    harness.record(args.out, table, figures={"data": data, "rows": rows})
    print(table)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


def load_or_build(work: Path, args: argparse.Namespace) -> dict:
    """The data of an earlier invocation with the same arguments, or new data."""
    key = {"mb": args.mb, "shards": args.shards, "near": args.near, "seed": args.seed}
    meta = work / "data.json"
    if meta.exists() and json.loads(meta.read_text())["key"] == key:
        return json.loads(meta.read_text())["data"]
    shutil.rmtree(work / "data", ignore_errors=True)
    (work / "results.json").unlink(missing_ok=True)
    started = time.perf_counter()
    data = build(work / "data", args.mb, args.shards, args.near, args.seed)
    print(f"data: {data['docs']} documents, {data['bytes'] / 1e6:.1f} MB in {args.shards} "
          f"Parquet shards, {data['planted']} planted near duplicates "
          f"({time.perf_counter() - started:.1f} s)", flush=True)
    meta.write_text(json.dumps({"key": key, "data": data}))
    return data


def utilisation(stats: dict, workers: int) -> dict[str, float]:
    """From stats.json's task timeline: the span from the first task's start to the last one's
    end, and the mean number of tasks running in it (``workers`` when no worker ever waits)."""
    tasks = stats["timeline"]
    span = max(t[2] for t in tasks) - min(t[1] for t in tasks)
    busy = sum(t[2] - t[1] for t in tasks)
    return {"span_s": span, "busy": busy / span if span else float(workers)}


def digest(run_dir: Path) -> str:
    h = hashlib.sha256()
    for name, blob in output_bytes(run_dir).items():
        h.update(name.encode() + hashlib.sha256(blob).digest())
    return h.hexdigest()[:16]


def render(rows: dict[int, dict], data: dict, args: argparse.Namespace) -> str:
    first = min(rows)
    base, base_run = rows[first]["seconds"] * first, rows[first]["run_s"] * first
    lines = [
        "# Scaling of the CPU-heavy segment (heuristic_filter + fuzzy_dedup on CPU)", "",
        f"Machine: {platform.node()}, {os.cpu_count()} cores ({cpu_model()}), "
        f"Python {platform.python_version()}. Each run: `taskset -c 0-(W-1) curate run "
        "pipeline.yaml --workers W` (the product path; driver, scheduler and workers share "
        "the W cores).", "",
        f"Data: {data['docs']} English documents, {data['bytes'] / 1e6:.1f} MB in "
        f"{args.shards} Parquet shards, generated from {data['sentences']} real sentences of "
        "text_corpus (books, speeches, reviews) recombined with word swaps; "
        f"{data['planted']} planted near duplicates (1% of words edited).", "",
        "Pipeline: read_parquet → heuristic_filter (default presets) → fuzzy_dedup "
        "(device cpu) → write_parquet.", "",
        "| workers | seconds | docs/s | speed-up | efficiency | run s | efficiency (run s) "
        "| heuristic task-s | fuzzy s | removed (heuristic, fuzzy) | output digest |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for w in sorted(rows):
        r = rows[w]
        speedup = base / r["seconds"]
        lines.append(
            f"| {w} | {r['seconds']:.1f} | {data['docs'] / r['seconds']:,.0f} | {speedup:.2f} | "
            f"{speedup / w:.0%} | {r['run_s']:.1f} | {base_run / r['run_s'] / w:.0%} | "
            f"{r['heuristic_s']:.1f} | {r['fuzzy_s']:.1f} | {r['removed'][0]}, "
            f"{r['removed'][1]} | {r['digest']} |")
    same = len({r["digest"] for r in rows.values()}) == 1
    lines += ["", f"Outputs of all runs byte-identical: {'yes' if same else 'NO'}.", "",
              "seconds: wall time of the whole command (interpreter start, cluster start, run); "
              "run s: inside the run (stats.json `seconds`: cluster start included, interpreter "
              "start not). Speed-up = (seconds at the smallest worker count * that count) / "
              "seconds; efficiency = speed-up / workers. From stats.json: heuristic task-s is "
              "the sum over its shard tasks (CPU-bound: flat when scaling is perfect), fuzzy s "
              "the dedup barrier's wall time.", "",
              "Command: `PYTHONPATH=. python benchmarks/bench_scaling.py "
              + " ".join(sys.argv[1:]) + "` (rows of earlier invocations with the same --work "
              "and data arguments are kept)", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
