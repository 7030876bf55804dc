"""The product path of dedup, timed on a realistic corpus: `curate run` read_parquet → fuzzy_dedup
(or exact_dedup) → write_parquet, once per device, side by side in one call.

    python benchmarks/bench_dedup_product.py --gb 4 --devices cpu gpu --stage fuzzy --workers 16

1. Builds the corpus (``--gb`` of UTF-8 text) as Parquet parts of ``--part-mb`` each, on every
   core: mostly unique documents, each a random recombination of real English and Japanese
   sentences with word-level mutations (85%), and planted near-duplicates of other documents,
   anywhere in the corpus, with about 1% of their words (or characters) edited (15%); the
   cluster map (near-duplicate → original) is written beside the parts. Sentences come from
   ``--corpus DIR`` (a ``pool.json.gz`` written by ``--save-pool``, or the layout of
   /work/shared/corpus), else /work/shared/corpus.
2. For each device runs the real CLI, ``python -m curator run`` (the stage's ``device`` set;
   the CPU run hides the GPUs, so its local cluster has ``--workers`` CPU workers only; the GPU
   run's cluster adds its GPU workers (see gpu-wN); ``gpu2`` is the GPU run with two GPU worker
   processes sharing device 0, ``CUDA_VISIBLE_DEVICES=0,0`` (one worker each); ``gpu-wN`` the
   GPU run with N GPU worker processes per card (``executor: {workers_per_gpu: N}``; ``gpu`` takes
   the product's default);
   ``gpu-xN`` the run on the node's first N cards, for scaling over a node's GPUs: TB/h per GPU
   and its share of one GPU's; ``cpu-threads``, ``gpu-threads``, ``cpu-processes`` and
   ``gpu-processes`` set the workers' kind (otherwise the product decides: threads up to 4
   workers when every stage releases the GIL); a name ending in ``-unfused`` runs with
   ``CURATOR_FUSE_WRITER=0``, in ``-arrow`` with ``CURATOR_CUDF=0``), and records its wall
   time, the stage's seconds and per-phase times from stats.json, and the peak RSS of every
   process of the run's tree (sampled: driver, scheduler and workers; the largest process and
   the largest tree sum).
3. Checks that the devices' outputs are identical (the sorted kept ids, the output files' bytes)
   and writes ``benchmarks/results_dedup_product.md``: TB/h of the stage and of the whole run,
   ratio gpu/cpu, and for fuzzy dedup how many planted near-duplicates joined their original.

Before the timed runs each device runs once on a tiny corpus (``--no-warm`` skips it), so that
numba's and CuPy's on-disk kernel caches are filled as on any machine after its first run; the
first run on a fresh machine compiles them in every worker process at once.
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing as mp
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

import harness
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import xxhash

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "corpus"
if not SHARED.exists():
    SHARED = Path("/work/shared/corpus")
RESULTS = ROOT / "benchmarks" / "results_dedup_product.md"
#: Suffixes of a run name and the environment they set: ``-unfused``, the writer decodes and
#: encodes the stage's parts again; ``-arrow``, the GPU reads the text with Arrow and copies it
#: over even where cuDF is installed.
VARIANTS = {"-unfused": {"CURATOR_FUSE_WRITER": "0"}, "-arrow": {"CURATOR_CUDF": "0"}}
UNIQUE = 0.85
EDIT_RATE = 0.01
_JAPANESE = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
_EN_SPLIT = re.compile(r"(?<=[.!?])\s+")
_JA_SPLIT = re.compile("(?<=[\u3002\uff01\uff1f])")  # after a Japanese full stop, ! or ?

POOL: dict[str, list[str]] = {}  # sentences per language, set before the workers fork


# ------------------------------------------------------------------------------------ corpus
def _jsonl_texts(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [d.get("text", "") for d in map(json.loads, f) if isinstance(d, dict)]


def _source_texts(corpus: Path) -> list[str]:
    """English reviews, speeches and Gutenberg books, Japanese Wikipedia and Aozora texts."""
    texts: list[str] = []
    for pattern in ("text_corpus/**/*.jsonl.gz", "japanese/wiki_paragraphs/*.jsonl.gz"):
        for path in sorted(corpus.glob(pattern)):
            texts += _jsonl_texts(path)
    for pattern in ("text_corpus/gutenberg/*.txt.gz", "japanese/aozora/**/*.txt.gz"):
        for path in sorted(corpus.glob(pattern)):
            with gzip.open(path, "rb") as f:
                texts.append(f.read().decode("utf-8", errors="replace"))
    return texts


def build_pool(corpus: Path) -> dict[str, list[str]]:
    """Sentences of the corpus per language (deduplicated, 20 to 600 characters)."""
    pool_file = corpus / "pool.json.gz"
    if pool_file.exists():
        with gzip.open(pool_file, "rt", encoding="utf-8") as f:
            return json.load(f)
    en: set[str] = set()
    ja: set[str] = set()
    for text in _source_texts(corpus):
        for para in re.split(r"\n\s*\n|\n", text.replace("\r", "\n")):
            para = " ".join(para.split())
            if _JAPANESE.search(para):
                ja.update(s for s in _JA_SPLIT.split(para) if 20 <= len(s) <= 600)
            else:
                en.update(s for s in _EN_SPLIT.split(para) if 20 <= len(s) <= 600)
    if len(en) < 1000 or len(ja) < 1000:
        raise SystemExit(f"{corpus}: too few sentences (en {len(en)}, ja {len(ja)}); pass "
                         "--corpus with a pool.json.gz (--save-pool) or /work/shared/corpus")
    return {"en": sorted(en), "ja": sorted(ja)}


def _mutate(sentence: str, rng: random.Random, japanese: bool) -> str:
    """A word-level mutation (two neighbouring words swapped, a word repeated or dropped)."""
    units = list(sentence) if japanese else sentence.split(" ")
    if len(units) < 3:
        return sentence
    i = rng.randrange(len(units) - 1)
    r = rng.random()
    if r < 0.4:
        units[i], units[i + 1] = units[i + 1], units[i]
    elif r < 0.7:
        units.insert(i, units[i])
    else:
        del units[i]
    return ("" if japanese else " ").join(units)


def _unique_doc(seed: int, part: int, k: int) -> str:
    """Document k of part ``part``: recombined sentences of one language, mutated."""
    rng = random.Random(seed * 1_000_003 + part * 10_000_019 + k)
    japanese = rng.random() < 0.3
    pool = POOL["ja" if japanese else "en"]
    n = max(2, int(rng.lognormvariate(3.0, 0.7)))  # median 20 sentences, a long tail
    sentences = [_mutate(s, rng, japanese) if rng.random() < 0.15 else s
                 for s in rng.choices(pool, k=n)]
    joiner = "" if japanese else " "
    cut = rng.sample(range(1, n), min(n - 1, n // 6))  # paragraphs
    out, start = [], 0
    for c in sorted(cut):
        out.append(joiner.join(sentences[start:c]))
        start = c
    out.append(joiner.join(sentences[start:]))
    return "\n\n".join(out)


def _near_duplicate(text: str, rng: random.Random) -> str:
    japanese = _JAPANESE.search(text[:200]) is not None
    units = list(text) if japanese else text.split(" ")
    for _ in range(max(1, int(len(units) * EDIT_RATE))):
        i = rng.randrange(len(units))
        units[i] = rng.choice(units)
    return ("" if japanese else " ").join(units)


def doc_id(part: int, k: int) -> str:
    return f"p{part:05d}-{k:07d}"


def _is_unique(seed: int, part: int, k: int) -> bool:
    return random.Random(seed * 7_000_003 + part * 1_000_033 + k).random() < UNIQUE


@dataclass(frozen=True)
class _PartJob:
    part: int
    parts: int
    docs: int
    seed: int
    folder: str


def _write_part(job: _PartJob) -> tuple[int, int, list[tuple[str, str]]]:
    texts, planted = [], []
    for k in range(job.docs):
        if _is_unique(job.seed, job.part, k):
            texts.append(_unique_doc(job.seed, job.part, k))
            continue
        rng = random.Random(job.seed * 5_000_011 + job.part * 1_000_037 + k)
        while True:  # the original: a unique document anywhere in the corpus
            p, j = rng.randrange(job.parts), rng.randrange(job.docs)
            if _is_unique(job.seed, p, j):
                break
        texts.append(_near_duplicate(_unique_doc(job.seed, p, j), rng))
        planted.append((doc_id(job.part, k), doc_id(p, j)))
    table = pa.table({"id": [doc_id(job.part, k) for k in range(job.docs)],
                      "text": pa.array(texts, pa.large_string())})
    pq.write_table(table, Path(job.folder) / f"part-{job.part:05d}.parquet",
                   row_group_size=16384, compression="zstd")
    return job.part, sum(len(t.encode()) for t in texts), planted


def make_corpus(folder: Path, gb: float, part_mb: float, seed: int, corpus: Path,
                processes: int) -> dict:
    """Write the Parquet parts and ``clusters.parquet``; returns what was made."""
    global POOL
    POOL = build_pool(corpus)
    probe = [_unique_doc(seed, 999_999, k) for k in range(400)]
    mean = sum(len(t.encode()) for t in probe) / len(probe)
    total_docs = max(1, int(gb * 1e9 / mean))
    parts = max(1, round(gb * 1e3 / part_mb))
    per_part = -(-total_docs // parts)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    started = time.perf_counter()
    jobs = [_PartJob(p, parts, per_part, seed, str(folder)) for p in range(parts)]
    with mp.get_context("fork").Pool(processes) as pool:
        done = pool.map(_write_part, jobs, chunksize=1)
    planted = [pair for _, _, pairs in done for pair in pairs]
    pq.write_table(pa.table({"id": [d for d, _ in planted], "original": [o for _, o in planted]}),
                   folder.parent / f"{folder.name}-clusters.parquet")
    return {"parts": parts, "docs": parts * per_part, "bytes": sum(b for _, b, _ in done),
            "planted": len(planted), "seconds": time.perf_counter() - started,
            "sentences": {k: len(v) for k, v in POOL.items()}}


# ------------------------------------------------------------------------------------ runs
@dataclass
class Peaks:
    """Peak RSS per process of a tree (MiB: the kernel's high-water mark, VmHWM, read at each
    sample, so that a spike between samples counts), and of the tree's sum (sampled)."""

    per_process: dict[int, tuple[str, float]] = field(default_factory=dict)
    tree: float = 0.0
    device: float = 0.0  # the GPUs' memory in use, summed over cards (NVML; 0 without it)
    #: Each process's user and system CPU seconds when last sampled (workers included, which
    #: the run's own process does not wait for: ``os.times`` would miss them).
    cpu: dict[int, tuple[float, float]] = field(default_factory=dict)


def _device_used_mb() -> float | None:
    """Memory in use on every visible GPU, summed (MiB), by NVML; None where NVML is missing."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        return sum(pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(i)).used
                   for i in range(pynvml.nvmlDeviceGetCount())) / 2**20
    except pynvml.NVMLError:
        return None


def _role(proc: psutil.Process, root: int) -> str:
    if proc.pid == root:
        return "driver"
    try:
        cmd = " ".join(proc.cmdline())
    except psutil.Error:
        return "?"
    if "resource_tracker" in cmd:
        return "resource_tracker"
    return "worker" if "spawn_main" in cmd or "forkserver" in cmd else "process"


def _high_water_mb(pid: int) -> float:
    """The process's peak RSS so far (Linux ``VmHWM``; 0 where there is none)."""
    status = Path(f"/proc/{pid}/status")
    if not status.exists():
        return 0.0
    for line in status.read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _sample(root: psutil.Process, peaks: Peaks, stop: threading.Event, interval: float) -> None:
    idle = _device_used_mb()  # what the card held before the run (other tenants, contexts)
    while not stop.is_set():
        used = _device_used_mb()
        if used is not None and idle is not None:
            peaks.device = max(peaks.device, used - idle)
        total = 0.0
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            tree = [root]
        for proc in tree:
            try:
                rss = proc.memory_info().rss / 2**20
                high = _high_water_mb(proc.pid)
                times = proc.cpu_times()
            except (psutil.Error, OSError):
                continue
            peaks.cpu[proc.pid] = (times.user, times.system)
            total += rss
            role, best = peaks.per_process.get(proc.pid, (None, 0.0))
            peaks.per_process[proc.pid] = (role or _role(proc, root.pid), max(best, rss, high))
        peaks.tree = max(peaks.tree, total)
        stop.wait(interval)


def device_env(device: str) -> dict[str, str]:
    """The environment of a run on ``device``: curator on the path, the GPUs its cluster sees."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    device, settings = variant(device)
    env.update(settings)
    if device.startswith("cpu"):
        env["CUDA_VISIBLE_DEVICES"] = ""  # no GPU worker in the CPU run's cluster
    elif device == "gpu2":
        env["CUDA_VISIBLE_DEVICES"] = "0,0"  # two GPU workers, one card
    elif gpus := gpu_count(device):  # the node's first N cards, a GPU worker each
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in range(gpus))
    return env


def curate_run_sampled(config: Path, env: dict[str, str]) -> tuple[float, Peaks]:
    """``curate run CONFIG``: its wall seconds and the peak RSS of its processes and of their
    sum (see ``Peaks``); a failed run stops the benchmark with its output."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "curator", "run", str(config)], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peaks, stop = Peaks(), threading.Event()
    sampler = threading.Thread(target=_sample, args=(psutil.Process(proc.pid), peaks, stop, 0.1),
                               daemon=True)
    sampler.start()
    output, _ = proc.communicate()
    wall = time.perf_counter() - started
    stop.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"curate run {config} failed, exit {proc.returncode}:\n{output[-3000:]}")
    return wall, peaks


def stage_device(device: str) -> str:
    """The stage's ``device`` for a run named ``device`` (``gpu2``, ``gpu-x4``, ``cpu-unfused``,
    ...)."""
    return "cpu" if device.startswith("cpu") else "gpu"


def variant(device: str) -> tuple[str, dict[str, str]]:
    """A run name without its ``VARIANTS`` suffix, and the environment that suffix sets."""
    for suffix, settings in VARIANTS.items():
        if device.endswith(suffix):
            return device.removesuffix(suffix), settings
    return device, {}


def gpu_count(device: str) -> int:
    """N of a run named ``gpu-xN`` (N GPUs, a GPU worker on each); 0 for other names."""
    found = re.fullmatch(r"gpu-x(\d+)", variant(device)[0])
    return int(found.group(1)) if found else 0


def write_pipeline(path: Path, stage: str, device: str, parts: Path, out: Path,
                   workers: int, options: str = "") -> None:
    """read_parquet → ``stage``_dedup (``options``: more of its YAML mapping) → write_parquet."""
    layout = variant(device)[0]
    per_gpu = re.fullmatch(r"gpu-w(\d+)", layout)
    processes = (", processes: true" if layout in ("gpu2", "gpu-processes", "cpu-processes")
                 else ", processes: false" if layout.endswith("-threads") else "")
    processes += (", workers_per_gpu: 1" if layout == "gpu2"
                  else f", workers_per_gpu: {per_gpu.group(1)}" if per_gpu else "")
    lines = [f"name: bench-{stage}-{device}", f"output: {out}",
             f"executor: {{type: dask, workers: {workers}{processes}}}", "stages:",
             f"  - {{type: read_parquet, path: \"{parts}/part-*.parquet\"}}",
             f"  - {{type: {stage}_dedup, device: {stage_device(device)}{options}}}",
             "  - {type: write_parquet}"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def run_device(stage: str, device: str, parts: Path, work: Path, workers: int) -> dict:
    out = work / f"run-{stage}-{device}"
    if out.exists():
        shutil.rmtree(out)
    config = work / f"{stage}-{device}.yaml"
    write_pipeline(config, stage, device, parts, out, workers)
    flushed = flush_writes()
    before = kernel_memory_counters()
    wall, peaks = curate_run_sampled(config, device_env(device))
    after = kernel_memory_counters()
    stats = json.loads((out / "stats.json").read_text())
    entry = next(s for s in stats["stages"] if s["type"] == f"{stage}_dedup")
    kept = pq.read_table(out / "write_parquet", columns=["id"]).column("id").to_pylist()
    digest = xxhash.xxh3_128()
    for path in sorted((out / "write_parquet").glob("*.parquet")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    workers_peak = [mb for role, mb in peaks.per_process.values() if role == "worker"]
    return {"device": device, "wall": wall, "run_seconds": stats.get("seconds", wall),
            "stage_seconds": entry["seconds"], "phases": entry.get("phases", {}),
            "in": entry["in"], "kept": entry["kept"], "removed": entry["removed"],
            "facts": entry.get("dedup", {}),
            "kept_ids": xxhash.xxh3_128_hexdigest("\n".join(sorted(kept)).encode()),
            "bytes_digest": digest.hexdigest(),
            "driver_mb": next((mb for r, mb in peaks.per_process.values() if r == "driver"), 0),
            "max_process_mb": max((mb for _, mb in peaks.per_process.values()), default=0),
            "max_worker_mb": max(workers_peak, default=0), "workers_seen": len(workers_peak),
            "tree_mb": peaks.tree, "device_mb": peaks.device, "out": out,
            "outside": outside_the_stage(stats), "flushed_before_s": flushed,
            "cpu_user_s": round(sum(user for user, _ in peaks.cpu.values()), 1),
            "cpu_system_s": round(sum(system for _, system in peaks.cpu.values()), 1),
            "kernel": {name: after[name] - before.get(name, 0) for name in after}}


#: /proc/vmstat counters of the kernel's memory work: page faults, transparent huge pages
#: faulted in (or not found), and direct compaction stalls (a thread that must gather free
#: pages before its fault completes, CPU time that looks like work).
KERNEL_COUNTERS = ("pgfault", "thp_fault_alloc", "thp_fault_fallback", "compact_stall",
                   "compact_fail")


def kernel_memory_counters() -> dict[str, int]:
    """The machine's ``KERNEL_COUNTERS`` now (none where /proc/vmstat is missing)."""
    try:
        lines = Path("/proc/vmstat").read_text().splitlines()
    except OSError:
        return {}
    values = dict(line.split() for line in lines if line.count(" ") == 1)
    return {name: int(values[name]) for name in KERNEL_COUNTERS if name in values}


def flush_writes() -> float:
    """Write every dirty page out (``sync``) before a timed run, so that no run is timed while
    the corpus or an earlier run is still being written back; returns the seconds it took."""
    started = time.perf_counter()
    os.sync()
    return round(time.perf_counter() - started, 2)


def outside_the_stage(stats: dict) -> dict[str, float]:
    """Where a run's seconds outside the dedup stage go (stats.json): the cluster's start, and
    each shard segment from its first shard's start to its last shard's end."""
    spans: dict[str, list[float]] = {}
    for segment, start, end, *_ in stats.get("timeline", []):
        span = spans.setdefault(f"segment {segment}", [start, end, 0.0, 0])
        span[0], span[1] = min(span[0], start), max(span[1], end)
        span[2], span[3] = span[2] + end - start, span[3] + 1
    out = {"cluster start": stats.get("executor_start_seconds", 0.0)}
    for name, (start, end, busy, tasks) in sorted(spans.items()):
        out[name] = round(end - start, 2)
        out[f"{name}: tasks, mean task s, tasks at once"] = [
            tasks, round(busy / tasks, 3), round(busy / max(end - start, 1e-9), 1)]
    out["gaps"] = run_gaps(stats, spans)
    return out


def run_gaps(stats: dict, spans: dict[str, list[float]]) -> dict[str, float]:
    """The run's seconds in no segment and no phase of the stage (stats.json's clocks): before
    the first segment (the cluster's start among them), between the reader segment and the
    stage's first phase, between its phases, between its last phase and the writer segment, and
    from there to the run's end (finalize, stats; the cluster's stop)."""
    phases = sorted((start, end) for *_, start, end in stats.get("phase_timeline", []))
    segments = sorted((start, end) for start, end, *_ in spans.values())
    if not phases or len(segments) < 2:
        return {}
    return {"before segment 0": round(segments[0][0], 2),
            "reader to stage": round(phases[0][0] - segments[0][1], 2),
            "between phases": round(sum(b[0] - a[1] for a, b in pairwise(phases)), 2),
            "stage to writer": round(segments[-1][0] - phases[-1][1], 2),
            "after the writer": round(stats.get("seconds", 0.0) - segments[-1][1], 2)}


def planted_joined(run: Path, clusters: Path) -> tuple[int, int]:
    """Planted near-duplicates whose cluster is their original's (fuzzy dedup's cluster_id)."""
    cols = ["id", "cluster_id"]
    table = pa.concat_tables([
        pq.read_table(run / "write_parquet", columns=cols),
        pq.read_table(run / "rejected" / "fuzzy_dedup", columns=cols)])
    cluster = dict(zip(table.column("id").to_pylist(), table.column("cluster_id").to_pylist(),
                       strict=True))
    pairs = pq.read_table(clusters)
    joined = sum(cluster.get(d) == cluster.get(o) for d, o in
                 zip(pairs.column("id").to_pylist(), pairs.column("original").to_pylist(),
                     strict=True))
    return joined, pairs.num_rows


# ------------------------------------------------------------------------------------ report
def _tbh(nbytes: int, seconds: float) -> float:
    return nbytes / max(seconds, 1e-9) * 3600 / 1e12


def report(args: argparse.Namespace, made: dict, runs: list[dict], joined: tuple[int, int] | None,
           command: str) -> str:
    nbytes = made["bytes"]
    lines = [f"# dedup through the product path: `curate run` read_parquet → {args.stage}_dedup "
             "→ write_parquet", "", f"Command: `{command}`", "",
             f"Machine: {os.cpu_count()} cores; {args.workers} CPU workers; corpus "
             f"{nbytes / 1e9:.3f} GB of text, {made['docs']:,} documents in {made['parts']} "
             f"Parquet parts ({UNIQUE:.0%} unique recombinations of {made['sentences']['en']:,} "
             f"English and {made['sentences']['ja']:,} Japanese sentences with word-level "
             f"mutations, {made['planted']:,} planted near-duplicates with {EDIT_RATE:.0%} of "
             f"their words edited), generated in {made['seconds']:.1f} s on "
             f"{args.processes} processes.", "",
             "| device | whole run s (wall) | run s (stats) | stage s | stage TB/h | run TB/h | "
             "driver peak MiB | largest worker MiB (worker processes) | largest process MiB | "
             "tree sum peak MiB | GPU memory peak MiB | kept | removed |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        lines.append(f"| {r['label']} | {r['wall']:.1f} | {r['run_seconds']:.1f} | "
                     f"{r['stage_seconds']:.1f} | {_tbh(nbytes, r['stage_seconds']):.3f} | "
                     f"{_tbh(nbytes, r['wall']):.3f} | {r['driver_mb']:.0f} | "
                     f"{r['max_worker_mb']:.0f} ({r['workers_seen']}) | "
                     f"{r['max_process_mb']:.0f} | {r['tree_mb']:.0f} | "
                     f"{r['device_mb']:.0f} | {r['kept']:,} | "
                     f"{r['removed']:,} |")
    lines += ["", "Peak RSS per process: the kernel's high-water mark (VmHWM), read every 0.1 s; "
              "the tree sum and the GPUs' memory in use (NVML, less what they held before the "
              "run) are sampled every 0.1 s (a pipeline whose "
              "stages all release the GIL runs its workers as threads of the driver: no worker "
              "processes then).", "",
              "Per-phase seconds (stats.json `phases`; tasks in brackets):", ""]
    for r in runs:
        phases = ", ".join(f"{name} {p['seconds']:.2f} ({p['tasks']})"
                           for name, p in r["phases"].items())
        outside = ", ".join(f"{name} {seconds:.2f}" if isinstance(seconds, float)
                            else f"{name} {seconds}" for name, seconds in r["outside"].items())
        kernel = ", ".join(f"{name} {n:,}" for name, n in r.get("kernel", {}).items())
        lines.append(f"- {r['label']}: {phases}; outside the stage: {outside}; sync before "
                     f"the run {r['flushed_before_s']:.2f} s; CPU s of the run's processes "
                     f"(as last sampled, every 0.1 s): user {r.get('cpu_user_s')}, system "
                     f"{r.get('cpu_system_s')}; kernel during the "
                     f"run: {kernel}")
    for r in runs:
        by = {other["device"]: other for other in runs if other["round"] == r["round"]}
        cpu, one = by.get("cpu"), by.get("gpu-x1")
        if cpu is None or r is cpu:
            continue
        same = cpu["kept_ids"] == r["kept_ids"] and cpu["bytes_digest"] == r["bytes_digest"]
        lines += ["", f"{r['label']} / cpu speed-up: stage "
                  f"{cpu['stage_seconds'] / r['stage_seconds']:.2f}x, whole run "
                  f"{cpu['wall'] / r['wall']:.2f}x. Outputs identical (sorted kept ids and "
                  f"output bytes): {'yes' if same else 'NO'}."]
        if gpus := gpu_count(r["device"]):
            per_gpu = _tbh(nbytes, r["wall"]) / gpus
            efficiency = f", {per_gpu / _tbh(nbytes, one['wall']):.0%} of one GPU's" if one \
                else ""
            lines.append(f"Whole run per GPU: {per_gpu:.3f} TB/h on {gpus} GPU(s){efficiency}.")
    lines += medians(runs)
    for r in runs:
        lines.append(f"\n{r['label']}: kept ids xxh3-128 {r['kept_ids']}, output bytes "
                     f"xxh3-128 {r['bytes_digest']}, facts {json.dumps(r['facts'])}")
    if joined is not None:
        lines.append(f"\nPlanted near-duplicates in their original's cluster: {joined[0]:,} of "
                     f"{joined[1]:,} ({joined[0] / max(joined[1], 1):.1%}).")
    return "\n".join(lines) + "\n"


def medians(runs: list[dict]) -> list[str]:
    """With several rounds: each device's median whole run and stage, and the median's ratio to
    the CPU run's median (rounds alternate the devices' order; single runs vary on a noisy
    machine)."""
    walls: dict[str, list[dict]] = {}
    for r in runs:
        walls.setdefault(r["device"], []).append(r)
    if all(len(group) < 2 for group in walls.values()):
        return []
    median = {device: (statistics.median(r["wall"] for r in group),
                       statistics.median(r["stage_seconds"] for r in group))
              for device, group in walls.items()}
    lines = ["", f"Medians over {max(len(g) for g in walls.values())} rounds (whole run s, every "
             "round's in brackets; stage s):", ""]
    for device, group in walls.items():
        ratio = f"; whole run {median['cpu'][0] / median[device][0]:.2f}x the CPU run's" \
            if "cpu" in median and device != "cpu" else ""
        each = ", ".join(f"{r['wall']:.1f}" for r in group)
        lines.append(f"- {device}: {median[device][0]:.1f} ({each}); stage "
                     f"{median[device][1]:.1f}{ratio}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gb", type=float, default=4.0, help="GB of text to generate")
    ap.add_argument("--devices", nargs="+", default=["cpu", "gpu"],
                    choices=[f"{d}{u}" for u in ("", *VARIANTS) for d in (
                        "cpu", "cpu-processes", "cpu-threads", "gpu", "gpu2", "gpu-processes",
                        "gpu-threads", "gpu-x1", "gpu-x2", "gpu-x4", "gpu-x8", "gpu-w1",
                        "gpu-w2", "gpu-w4", "gpu-w8")],
                    help="gpu: every visible GPU; gpu2: two GPU workers on card 0; "
                    "gpu-processes: worker processes, one GPU worker a card; cpu-processes, "
                    "cpu-threads, gpu-threads: the run's workers as processes or threads "
                    "(otherwise the product's default: threads up to 4 workers); gpu-xN: the "
                    "first N cards; gpu-wN: N GPU worker processes per card (executor "
                    "workers_per_gpu; gpu: the product's default); "
                    "a name ending in -unfused runs with CURATOR_FUSE_WRITER=0 (the writer "
                    "decodes and encodes the stage's parts again), in -arrow with CURATOR_CUDF=0 "
                    "(the GPU reads the text with Arrow, not cuDF)")
    ap.add_argument("--stage", choices=["fuzzy", "exact"], default="fuzzy")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--part-mb", type=float, default=150.0, help="MB of text per Parquet part")
    ap.add_argument("--processes", type=int, default=os.cpu_count() or 1,
                    help="processes that generate the corpus")
    ap.add_argument("--corpus", type=Path, default=None,
                    help="sentence source: a folder with pool.json.gz (see --save-pool) or "
                    "the layout of /work/shared/corpus (default: that)")
    ap.add_argument("--work", type=Path, default=ROOT / "bench-data" / "dedup-product")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--save-pool", type=Path, default=None,
                    help="only write the sentence pool to this pool.json.gz (a few MB) and stop")
    ap.add_argument("--results", type=Path, default=RESULTS)
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds of the devices' runs, the order reversed every other round; "
                    "the report adds each device's median")
    ap.add_argument("--no-warm", dest="warm", action="store_false",
                    help="time the first runs too (kernel compilation included)")
    args = ap.parse_args()
    corpus = args.corpus or SHARED
    command = "python benchmarks/bench_dedup_product.py " + " ".join(sys.argv[1:])
    if args.save_pool:
        pool = build_pool(corpus)
        args.save_pool.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(args.save_pool, "wt", encoding="utf-8") as f:
            json.dump(pool, f, ensure_ascii=False)
        print(f"wrote {args.save_pool}: {len(pool['en']):,} English and {len(pool['ja']):,} "
              f"Japanese sentences, {args.save_pool.stat().st_size / 1e6:.1f} MB")
        return
    args.work.mkdir(parents=True, exist_ok=True)
    parts = args.work / f"corpus-{args.gb:g}gb"
    made = make_corpus(parts, args.gb, args.part_mb, args.seed, corpus, args.processes)
    print(f"corpus: {made['bytes'] / 1e9:.3f} GB, {made['docs']:,} docs, {made['parts']} parts, "
          f"{made['planted']:,} planted near-duplicates, made in {made['seconds']:.1f} s",
          flush=True)
    if args.warm:  # numba's and CuPy's kernel caches filled, as on any machine after its first run
        tiny = make_corpus(args.work / "corpus-warm", 0.005, args.part_mb, args.seed + 1, corpus,
                           args.processes)
        for device in args.devices:
            run_device(args.stage, device, args.work / "corpus-warm", args.work, args.workers)
        print(f"warmed: the same runs on {tiny['docs']:,} documents first", flush=True)
    runs = []
    joined = None
    rounds = [(k + 1, device) for k in range(args.repeat)
              for device in (args.devices if k % 2 == 0 else args.devices[::-1])]
    for round_number, device in rounds:
        r = run_device(args.stage, device, parts, args.work, args.workers)
        r["round"] = round_number
        r["label"] = f"{device} #{round_number}" if args.repeat > 1 else device
        print(f"{r['label']}: whole run {r['wall']:.1f} s, {args.stage}_dedup "
              f"{r['stage_seconds']:.1f} s ({_tbh(made['bytes'], r['stage_seconds']):.3f} TB/h), "
              f"tree peak {r['tree_mb']:.0f} MiB, largest process {r['max_process_mb']:.0f} MiB",
              flush=True)
        runs.append(r)
        if args.stage == "fuzzy" and len(runs) == 1:
            joined = planted_joined(r["out"], args.work / f"{parts.name}-clusters.parquet")
        shutil.rmtree(r["out"])  # hashed and counted: the disk is needed for the next run
    text = report(args, made, runs, joined, command)
    harness.record(args.results, text, figures={
        r["label"]: {k: v for k, v in r.items() if k != "out"} for r in runs})
    print(text)
    digests = {(r["kept_ids"], r["bytes_digest"]) for r in runs}
    if len(digests) > 1:
        raise SystemExit("the devices' outputs differ")


if __name__ == "__main__":
    main()
