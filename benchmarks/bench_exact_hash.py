"""exact_dedup's document hash: the bulk XXH3-128 kernel (``kernels.doc_hash``, numba over the
Arrow buffers) against the former per-document loop (``text_hashes``: one Python bytes object
and one ``xxhash`` call per document), on one core, side by side in one run.

    python benchmarks/bench_exact_hash.py --mb 100

1. Kernel: both hash the same ~``--mb`` of realistic documents (unique recombinations of real
   English and Japanese sentences, bench_dedup_product's generator); best of ``--repeat``.
2. Product path: the Python builder runs read_parquet → exact_dedup → write_parquet on a Dask
   cluster of one worker process (one core) with ``algorithm: xxh3_128_loop`` and
   ``xxh3_128``; the stage's seconds and its ``hash`` phase come from stats.json, and the two
   outputs must be byte-identical.
Appends to benchmarks/results_exact_hash.md (``--out``) through ``harness.record``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

import harness
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_dedup_product import ROOT, SHARED, make_corpus

from curator import ExactDedup, Pipeline, ReadParquet, WriteParquet
from curator.kernels.doc_hash import doc_hashes
from curator.kernels.whitespace import collapse_whitespace
from curator.stages.dedup.exact import normalise_text, text_hashes

RESULTS = ROOT / "benchmarks" / "results_exact_hash.md"


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def _product(parts: Path, out: Path, algorithm: str) -> dict:
    if out.exists():
        shutil.rmtree(out)
    pipeline = Pipeline([ReadParquet(path=f"{parts}/part-*.parquet"),
                         ExactDedup(algorithm=algorithm, device="cpu"), WriteParquet()],
                        name=f"exact-{algorithm}")
    started = time.perf_counter()
    stats = pipeline.run(output=out, executor="dask", workers=1, progress=False).stats
    wall = time.perf_counter() - started
    stage = next(s for s in stats["stages"] if s["type"] == "exact_dedup")
    files = {p.name: p.read_bytes() for p in sorted((out / "write_parquet").glob("*.parquet"))}
    return {"wall": wall, "stage": stage["seconds"], "phases": stage["phases"],
            "kept": stage["kept"], "removed": stage["removed"], "files": files}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--repeat", type=int, default=5, help="kernel timings: best of")
    ap.add_argument("--runs", type=int, default=2, help="product runs per algorithm")
    ap.add_argument("--corpus", type=Path, default=None)
    ap.add_argument("--work", type=Path, default=ROOT / "bench-data" / "exact-hash")
    ap.add_argument("--out", type=Path, default=RESULTS,
                    help="results file: this run's section is appended")
    args = ap.parse_args()
    command = "python benchmarks/bench_exact_hash.py " + " ".join(sys.argv[1:])
    parts = args.work / "corpus"
    made = make_corpus(parts, args.mb / 1e3, max(args.mb / 4, 1), 3, args.corpus or SHARED,
                       os.cpu_count() or 1)
    text = pq.read_table(parts, columns=["text"]).column("text").combine_chunks()
    normalised = normalise_text(text)
    lines = ["# exact_dedup: bulk XXH3-128 vs the per-document loop, one core", "",
             f"Command: `{command}`", "",
             f"Input: {made['bytes'] / 1e6:.1f} MB of text, {made['docs']:,} documents "
             f"(mean {made['bytes'] / made['docs']:,.0f} bytes; unique recombinations of real "
             "English and Japanese sentences, 15% planted near-duplicates), "
             f"{made['parts']} Parquet parts.", "",
             f"## Kernel (best of {args.repeat}, one thread)", "",
             "| input | per-document loop s | bulk kernel s | loop GB/s | bulk GB/s | speed-up |",
             "|---|---|---|---|---|---|"]
    doc_hashes(pa.array(["warm up the JIT"]))
    for name, array in (("raw text", text), ("normalised text", normalised)):
        nbytes = array.nbytes
        assert [a.tolist() for a in doc_hashes(array)] == \
            [a.tolist() for a in text_hashes(array, "xxh3_128")], "digests differ"
        loop = _best(lambda a=array: text_hashes(a, "xxh3_128"), args.repeat)
        bulk = _best(lambda a=array: doc_hashes(a), args.repeat)
        lines.append(f"| {name} | {loop:.4f} | {bulk:.4f} | {nbytes / loop / 1e9:.2f} | "
                     f"{nbytes / bulk / 1e9:.2f} | {loop / bulk:.2f}x |")
        print(lines[-1], flush=True)
    lowered = pc.utf8_lower(text)
    want = pc.replace_substring_regex(lowered, r"\s+", " ").cast(pa.large_string())
    assert collapse_whitespace(lowered).equals(want), "collapse differs"
    regex = _best(lambda: pc.replace_substring_regex(lowered, r"\s+", " "), args.repeat)
    kernel = _best(lambda: collapse_whitespace(lowered), args.repeat)
    lines += ["", "Normalisation's whitespace collapse (the rest of the hash phase's CPU work): "
              f"Arrow regex `\\s+` {regex:.3f} s, numba kernel {kernel:.3f} s "
              f"({regex / kernel:.1f}x), the same strings."]
    print(lines[-1], flush=True)
    algorithms = ("xxh3_128_loop", "xxh3_128")
    tries: dict[str, list[dict]] = {a: [] for a in algorithms}
    for _ in range(args.runs):  # alternated, so that a busy moment does not favour one
        for a in algorithms:
            tries[a].append(_product(parts, args.work / f"run-{a}", a))
    runs = {a: min(t, key=lambda r: r["stage"]) for a, t in tries.items()}
    lines += ["", f"## Product path (Python builder, Dask cluster of one worker process; the "
              f"run with the fastest stage of {args.runs}, alternated)", "",
              "| algorithm | whole run s | exact_dedup s | hash phase s | group s | remove s | "
              "exact_dedup s of every try |", "|---|---|---|---|---|---|---|"]
    for algorithm, r in runs.items():
        ph = r["phases"]
        every = ", ".join(f"{t['stage']:.2f}" for t in tries[algorithm])
        lines.append(f"| {algorithm} | {r['wall']:.2f} | {r['stage']:.2f} | "
                     f"{ph['hash']['seconds']:.2f} | {ph['group']['seconds']:.2f} | "
                     f"{ph['remove']['seconds']:.2f} | {every} |")
    loop, bulk = runs["xxh3_128_loop"], runs["xxh3_128"]
    same = all(t["files"] == loop["files"] for ts in tries.values() for t in ts)
    lines += ["", f"Stage speed-up {loop['stage'] / bulk['stage']:.2f}x, hash phase "
              f"{loop['phases']['hash']['seconds'] / bulk['phases']['hash']['seconds']:.2f}x; "
              f"outputs byte-identical: {'yes' if same else 'NO'} "
              f"(kept {bulk['kept']:,}, removed {bulk['removed']:,}). The hash phase also reads "
              "the part, normalises the text (Arrow lower case, the numba whitespace collapse) "
              "and writes the buckets; a fresh worker also imports numba and loads the "
              "cached kernels once."]
    harness.record(args.out, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
