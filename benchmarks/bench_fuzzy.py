"""Whole fuzzy dedup: curator vs datatrove's MinHash pipeline, memory vs corpus size, GPU rate.

  python benchmarks/bench_fuzzy.py datatrove --mb 16 --workers 2
      curator's ``fuzzy_dedup`` (word 5-grams, 14x8, as datatrove's defaults) and datatrove's
      four MinHash stages (LocalPipelineExecutor) on the same JSONL shards; wall time of each.
  python benchmarks/bench_fuzzy.py memory --mb 16 --scales 1 2 4
      peak resident memory of one worker process (local executor, a fresh process per run) as
      the corpus grows with a fixed shard size.
  python3 benchmarks/bench_fuzzy.py gpu --gb 5.5 --parts 32 [--readers cudf arrow]   (GPU)
      whole fuzzy dedup (char 24-grams, 20x13) of Parquet parts on one GPU, in TB/hour, with
      the text decoded by cuDF on the GPU and/or read by pyarrow, and GPU == CPU clusters on a
      sample. Needs no Dask: phases run on a thread pool.

Corpus: real documents from ../shared/corpus (``dedup_data``) plus near-duplicate variants.
``--results F`` (before the subcommand) appends the printed figures to F through ``harness``;
without it the commit, machine and command are printed after them.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))

import harness
from dedup_data import bulk_array, english_docs, japanese_docs, near_duplicate


def corpus_docs(target_mb: float, seed: int = 0) -> list[str]:
    """Real documents, then near-duplicate variants (2-10 % edits) until ``target_mb``."""
    rng = random.Random(seed)
    en, ja = english_docs(), japanese_docs()
    base = [(d, False) for d in en] + [(d, True) for d in ja]
    docs = [d for d, _ in base]
    size = sum(len(d.encode()) for d in docs)
    while size < target_mb * 1e6:
        text, jp = rng.choice(base)
        variant = near_duplicate(text, rng.choice([0.02, 0.05, 0.1]), rng, jp)
        docs.append(variant)
        size += len(variant.encode())
    rng.shuffle(docs)
    return docs


def write_jsonl(docs: list[str], folder: Path, shard_mb: float) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths, cur, size = [], [], 0
    for i, text in enumerate(docs):
        cur.append(json.dumps({"id": f"doc-{i:08d}", "text": text}, ensure_ascii=False))
        size += len(cur[-1])
        if size >= shard_mb * 1e6 or i == len(docs) - 1:
            path = folder / f"shard-{len(paths):04d}.jsonl"
            path.write_text("\n".join(cur) + "\n", encoding="utf-8")
            paths.append(path)
            cur, size = [], 0
    return paths


def run_curator(src: Path, out: Path, workers: int, executor: str, shingle: str,
                processes: bool | None = None) -> dict:
    from curator import ExecutorConfig, FuzzyDedup, Pipeline, ReadJsonl, WriteJsonl

    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    result = Pipeline([ReadJsonl(path=f"{src}/*.jsonl"), FuzzyDedup(shingle=shingle, device="cpu"),
                       WriteJsonl()], name="fuzzy",
                      executor=ExecutorConfig(processes=processes)).run(
        output=out, executor=executor, workers=workers, progress=False)
    stage = result.stats["stages"][1]
    return {"seconds": time.perf_counter() - t0, "in": stage["in"], "removed": stage["removed"]}


def _split_tokenizer():
    """``str.split`` words: datatrove's own English tokenizer needs spaCy (its whitespace one
    too); plain splitting is the cheapest possible, so this favours datatrove."""
    from datatrove.utils.word_tokenizers import WordTokenizer

    class SplitTokenizer(WordTokenizer):
        def word_tokenize(self, text: str) -> list[str]:
            return text.split()

        def sent_tokenize(self, text: str) -> list[str]:
            return [text]

        def span_tokenize(self, text: str) -> list[tuple[int, int]]:
            return [(0, len(text))]

    return SplitTokenizer()


def _patch_datatrove_xxhash() -> None:
    """datatrove 0.10 passes ``str`` to ``xxh64_intdigest``, which xxhash 3.6 refuses: encode
    first (what older xxhash did itself). Forked workers inherit the patch."""
    import xxhash
    from datatrove.utils.hashes import xxhash as dt_xxhash

    def xxhash64(data: str | bytes) -> int:
        return xxhash.xxh64_intdigest(data.encode() if isinstance(data, str) else data)

    dt_xxhash.xxhash64 = xxhash64


def run_datatrove(src: Path, out: Path, workers: int, tasks: int) -> dict:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup import MinhashDedupSignature
    from datatrove.pipeline.dedup.minhash import (
        MinhashConfig,
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
    )
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers.jsonl import JsonlWriter
    from datatrove.utils.hashing import HashConfig

    _patch_datatrove_xxhash()
    shutil.rmtree(out, ignore_errors=True)
    cfg = MinhashConfig(hash_config=HashConfig(precision=64), n_grams=5, num_buckets=14,
                        hashes_per_bucket=8)
    tok = _split_tokenizer()
    t0 = time.perf_counter()
    s1 = LocalPipelineExecutor(pipeline=[
        JsonlReader(str(src)),
        MinhashDedupSignature(output_folder=str(out / "sigs"), config=cfg, language=tok)],
        tasks=tasks, workers=workers, logging_dir=str(out / "logs/1"))
    s2 = LocalPipelineExecutor(pipeline=[
        MinhashDedupBuckets(input_folder=str(out / "sigs"), output_folder=str(out / "buckets"),
                            config=cfg)],
        tasks=cfg.num_buckets, workers=workers, logging_dir=str(out / "logs/2"), depends=s1)
    s3 = LocalPipelineExecutor(pipeline=[
        MinhashDedupCluster(input_folder=str(out / "buckets"), output_folder=str(out / "ids"),
                            config=cfg)],
        tasks=1, logging_dir=str(out / "logs/3"), depends=s2)
    s4 = LocalPipelineExecutor(pipeline=[
        JsonlReader(str(src)),
        MinhashDedupFilter(input_folder=str(out / "ids"),
                           exclusion_writer=JsonlWriter(str(out / "removed"))),
        JsonlWriter(str(out / "output"))],
        tasks=tasks, workers=workers, logging_dir=str(out / "logs/4"), depends=s3)
    s4.run()
    seconds = time.perf_counter() - t0
    removed = 0
    for f in (out / "removed").glob("*.jsonl.gz"):
        import gzip

        with gzip.open(f, "rt") as g:
            removed += sum(1 for _ in g)
    return {"seconds": seconds, "removed": removed}


def cmd_datatrove(args: argparse.Namespace) -> None:
    root = Path(args.dir)
    docs = corpus_docs(args.mb)
    shards = write_jsonl(docs, root / "in", args.shard_mb)
    mb = sum(p.stat().st_size for p in shards) / 1e6
    print(f"corpus: {len(docs)} documents, {mb:.1f} MB JSONL in {len(shards)} shards")
    cur = run_curator(root / "in", root / "curator", args.workers, "dask", "word")
    print(f"curator fuzzy_dedup (word 5-grams, 14x8), dask {args.workers} worker processes "
          f"(the default here: write_jsonl holds the GIL): "
          f"{cur['seconds']:.1f} s, removed {cur['removed']} of {cur['in']}")
    threads = run_curator(root / "in", root / "curator-threads", args.workers, "dask", "word",
                          processes=False)
    print(f"curator fuzzy_dedup, dask {args.workers} threads (executor.processes: false): "
          f"{threads['seconds']:.1f} s, removed {threads['removed']} of {threads['in']}")
    local = run_curator(root / "in", root / "curator-local", 1, "local", "word")
    print(f"curator fuzzy_dedup, local executor (one process, numba on all cores): "
          f"{local['seconds']:.1f} s, removed {local['removed']} of {local['in']}")
    dt = run_datatrove(root / "in", root / "datatrove", args.workers, len(shards))
    print(f"datatrove MinHash 4 stages, LocalPipelineExecutor {args.workers} workers: "
          f"{dt['seconds']:.1f} s, removed {dt['removed']}")
    print(f"speed-up: {dt['seconds'] / cur['seconds']:.2f}x (dask processes), "
          f"{dt['seconds'] / threads['seconds']:.2f}x (dask threads), "
          f"{dt['seconds'] / local['seconds']:.2f}x (local executor)")


def cmd_memory(args: argparse.Namespace) -> None:
    root = Path(args.dir)
    for scale in args.scales:
        src = root / f"x{scale}"
        if not src.exists():
            write_jsonl(corpus_docs(args.mb * scale, seed=scale), src, args.shard_mb)
        mb = sum(p.stat().st_size for p in src.glob("*.jsonl")) / 1e6
        code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
                f"import bench_fuzzy as b, resource, json; "
                f"r = b.run_curator({str(src)!r}, {str(root / f'run{scale}')!r}, 1, 'local', "
                f"'char'); r['peak_mb'] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss"
                f" / 1024; print(json.dumps(r))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{scale}x: {mb:.0f} MB in {len(list(src.glob('*.jsonl')))} shards, "
              f"{r['seconds']:.1f} s, peak RSS of the worker process {r['peak_mb']:.0f} MB")


class _Threads:
    """A minimal executor for ``DatasetContext``: tasks on a thread pool (no Dask needed)."""

    def __init__(self, n: int) -> None:
        self.pool = ThreadPoolExecutor(n)

    def map(self, fn, tasks, keys, resources):
        yield from self.pool.map(fn, tasks)


def _run_stage(parts: list[Path], root: Path, device: str, threads: int, **params) -> float:
    from curator.runtime.driver.phases import PhaseContext
    from curator.stages.dedup.fuzzy import FuzzyDedup
    from curator.store.run_dir import RunDir
    from curator.store.spec import RunSpec

    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    ctx = PhaseContext(RunDir(root), root / "_work", _Threads(threads), "fuzzy_dedup",
                       "fuzzy_dedup", "x", RunSpec(str(root), "fail", "ids", 1 << 26))
    t0 = time.perf_counter()
    result = FuzzyDedup(device=device, **params).run_dataset(parts, ctx)
    seconds = time.perf_counter() - t0
    print(f"  {device}: {seconds:.1f} s, {json.dumps(result.count.to_dict())}")
    return seconds


def _clusters(root: Path) -> dict:
    table = pa.concat_tables([pq.read_table(p, columns=["id", "cluster_id"])
                              for p in sorted((root / "_work" / "out").glob("*.parquet"))] +
                             [pq.read_table(p, columns=["id", "cluster_id"])
                              for p in sorted((root / "rejected").rglob("*.parquet"))])
    return dict(zip(table.column("id").to_pylist(), table.column("cluster_id").to_pylist(),
                    strict=True))


def _perturb(arr: pa.LargeStringArray, copy_of: np.ndarray, seed: int) -> pa.LargeStringArray:
    """Change 3 ASCII letters per document (positions per copy): near-duplicates, not copies."""
    offsets = np.frombuffer(arr.buffers()[1], np.int64)[: len(arr) + 1]
    data = np.frombuffer(arr.buffers()[2], np.uint8).copy()
    rng = np.random.default_rng(seed)
    lengths = np.diff(offsets)
    for _ in range(3):
        pos = offsets[:-1] + (rng.random(len(arr)) * np.maximum(lengths, 1)).astype(np.int64)
        pos = np.minimum(pos, len(data) - 1)
        ascii_letter = (data[pos] >= 97) & (data[pos] <= 122)
        data[pos[ascii_letter]] = 97 + (copy_of[ascii_letter] % 26).astype(np.uint8)
    return pa.LargeStringArray.from_buffers(len(arr), pa.py_buffer(offsets.copy()),
                                            pa.py_buffer(data))


def _readers(args: argparse.Namespace) -> list[str]:
    """Text readers to time: those asked for, else cuDF where it is usable, else pyarrow."""
    from curator.kernels.gpu_io import cudf_enabled

    if args.readers and "cudf" in args.readers and not cudf_enabled():
        raise SystemExit("--readers cudf: pylibcudf does not import or no GPU")
    return args.readers or (["cudf"] if cudf_enabled() else ["arrow"])


def _use_reader(reader: str) -> None:
    """Signature phase reads Parquet with cuDF on the GPU, or with pyarrow (``gpu_io``)."""
    os.environ["CURATOR_CUDF"] = "1" if reader == "cudf" else "0"


def cmd_gpu(args: argparse.Namespace) -> None:
    root = Path(args.dir)
    docs = english_docs() + japanese_docs()
    big = bulk_array(docs, int(args.gb * 1e9))
    n = len(big)
    big = _perturb(big, np.arange(n) // len(docs), 1)
    text_bytes = int(np.frombuffer(big.buffers()[1], np.int64)[n])
    ids = pa.array([f"d{i:09d}" for i in range(n)])
    parts = []
    (root / "in").mkdir(parents=True, exist_ok=True)
    edges = np.linspace(0, n, args.parts + 1).astype(np.int64)
    for p in range(args.parts):
        lo, hi = int(edges[p]), int(edges[p + 1])
        path = root / "in" / f"part-{p:05d}.parquet"
        pq.write_table(pa.table({"id": ids[lo:hi], "text": big[lo:hi]}), path,
                       compression="none")
        parts.append(path)
    print(f"corpus: {n} documents, {text_bytes / 1e9:.2f} GB of text in {args.parts} parts")
    readers = _readers(args)
    for reader in readers:
        _use_reader(reader)
        seconds = _run_stage(parts, root / "gpu", args.device, args.threads)
        print(f"{args.device} whole fuzzy dedup, {reader} read: {text_bytes / 1e9 / seconds:.3f}"
              f" GB/s = {text_bytes / 1e12 / seconds * 3600:.2f} TB/hour")
    if args.device != "gpu":
        return
    # GPU == CPU clusters on a sample (verify on, so both signature paths are compared too)
    sample = parts[: args.sample_parts]
    _run_stage(sample, root / "s-cpu", "cpu", 1, verify=True)
    cpu = _clusters(root / "s-cpu")
    for reader in dict.fromkeys(readers):
        _use_reader(reader)
        _run_stage(sample, root / f"s-{reader}", "gpu", args.threads, verify=True)
        gpu = _clusters(root / f"s-{reader}")
        print(f"GPU ({reader} read) == CPU clusters on {len(cpu)} documents ({len(sample)} "
              f"parts): {gpu == cpu}; {len(set(cpu.values()))} clusters")
    print(f"peak host RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    harness.add_results_argument(ap)  # before the subcommand: --results F datatrove ...
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("datatrove")
    d.add_argument("--mb", type=float, default=16)
    d.add_argument("--shard-mb", type=float, default=4)
    d.add_argument("--workers", type=int, default=2)
    d.add_argument("--dir", default="bench-data/fuzzy-dt")
    m = sub.add_parser("memory")
    m.add_argument("--mb", type=float, default=16)
    m.add_argument("--shard-mb", type=float, default=4)
    m.add_argument("--scales", type=int, nargs="+", default=[1, 2, 4])
    m.add_argument("--dir", default="bench-data/fuzzy-mem")
    g = sub.add_parser("gpu")
    g.add_argument("--gb", type=float, default=5.5)
    g.add_argument("--parts", type=int, default=32)
    g.add_argument("--threads", type=int, default=8)
    g.add_argument("--sample-parts", type=int, default=1)
    g.add_argument("--device", default="gpu", help="cpu: a dry run of the same code")
    g.add_argument("--readers", nargs="+", choices=["cudf", "arrow"],
                   help="signature-phase Parquet reads to time, in turn (repeats allowed); "
                        "default: cudf where pylibcudf imports, else arrow")
    g.add_argument("--dir", default="/tmp/fuzzy-gpu")
    args = ap.parse_args()
    with harness.Recording(args.results, title=f"bench_fuzzy.py {args.cmd}"):
        {"datatrove": cmd_datatrove, "memory": cmd_memory, "gpu": cmd_gpu}[args.cmd](args)


if __name__ == "__main__":
    main()
