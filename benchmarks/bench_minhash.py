"""MinHash signature throughput: curator's CPU kernel per core vs datasketch, and the GPU path.

    python benchmarks/bench_minhash.py [--cpu-mb 64] [--ds-mb 1] [--gpu --gpu-gb 8]
        [--parquet-gb 3] [--json F] [--results F]

CPU: the same 24-character shingles (code points) and 260 permutations in both; datasketch
is fed one ``MinHash.update`` per shingle (its documented loop) and, for reference, one
``update_batch`` per document. Real text from ../shared/corpus, repeated to the size asked.
GPU (``--gpu``): end to end from a host Arrow array to host signatures (copies included),
device-only kernel rate, bit identity against the CPU on a slice, word-mode rate; with
``--parquet-gb``, one Parquet file to host band hashes read by pyarrow vs decoded by cuDF.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import harness
import numba
import numpy as np
import pyarrow as pa
from dedup_data import bulk_array, english_docs, japanese_docs

from curator.kernels.minhash import MinHashParams, minhash_signatures
from curator.kernels.shingles import string_buffers


def _best(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def bench_datasketch(docs: list[str], num_perm: int, ngram: int) -> dict:
    from datasketch import MinHash

    nbytes = sum(len(d.encode()) for d in docs)
    perm = MinHash(num_perm=num_perm, seed=1).permutations

    def loop() -> None:
        for d in docs:
            m = MinHash(num_perm=num_perm, permutations=perm, scheme="affine32")
            for i in range(max(len(d) - ngram + 1, 1)):
                m.update(d[i : i + ngram].encode())

    def batch() -> None:
        for d in docs:
            m = MinHash(num_perm=num_perm, permutations=perm, scheme="affine32")
            m.update_batch([d[i : i + ngram].encode() for i in range(max(len(d) - ngram + 1, 1))])

    return {"bytes": nbytes, "update_s": _best(loop, 1), "update_batch_s": _best(batch, 1)}


def bench_cpu(args: argparse.Namespace, docs: list[str]) -> dict:
    params = MinHashParams()
    ds_docs, size = [], 0
    for d in docs[::7]:  # a spread of reviews, speeches, book sections, articles
        ds_docs.append(d)
        size += len(d.encode())
        if size >= args.ds_mb * 1e6:
            break
    res = {"datasketch": bench_datasketch(ds_docs, params.num_perm, params.ngram)}
    small = pa.array(ds_docs)
    bulk = bulk_array(docs, int(args.cpu_mb * 1e6))
    minhash_signatures(small[:4], params)  # compile
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    res["ours_1core_same_docs_s"] = _best(lambda: minhash_signatures(small, params))
    res["ours_1core_bulk_s"] = _best(lambda: minhash_signatures(bulk, params))
    wparams = MinHashParams.word()
    minhash_signatures(small[:4], wparams)
    res["ours_1core_bulk_word_s"] = _best(lambda: minhash_signatures(bulk, wparams))
    numba.set_num_threads(threads)
    res["threads"] = threads
    res["ours_allcores_bulk_s"] = _best(lambda: minhash_signatures(bulk, params))
    res["bulk_bytes"] = bulk.nbytes - 8 * (len(bulk) + 1)
    ds = res["datasketch"]
    mb = ds["bytes"] / 1e6
    bulk_mb = res["bulk_bytes"] / 1e6
    rows = [
        ("datasketch MinHash.update loop", mb / ds["update_s"], "MB/s, 1 core"),
        ("datasketch update_batch", mb / ds["update_batch_s"], "MB/s, 1 core"),
        ("curator CPU, same documents", mb / res["ours_1core_same_docs_s"], "MB/s, 1 core"),
        (f"curator CPU, bulk {bulk_mb:.0f} MB", bulk_mb / res["ours_1core_bulk_s"], "MB/s, 1 core"),
        (
            "curator CPU, bulk, word 5-grams",
            bulk_mb / res["ours_1core_bulk_word_s"],
            "MB/s, 1 core",
        ),
        (f"curator CPU, bulk, {threads} threads", bulk_mb / res["ours_allcores_bulk_s"], "MB/s"),
    ]
    for name, value, unit in rows:
        print(f"{name:34s}: {value:9.3f} {unit}")
    res["ratio_vs_update"] = ds["update_s"] / res["ours_1core_same_docs_s"]
    res["ratio_vs_update_batch"] = ds["update_batch_s"] / res["ours_1core_same_docs_s"]
    print(f"ratio per core vs update loop   : {res['ratio_vs_update']:8.1f}x")
    print(f"ratio per core vs update_batch  : {res['ratio_vs_update_batch']:8.1f}x")
    return res


def bench_gpu(args: argparse.Namespace, docs: list[str]) -> dict:
    import cupy as cp

    from curator.kernels.minhash_gpu import GpuMinHasher

    res: dict = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode()}
    t = time.perf_counter()
    bulk = bulk_array(docs, int(args.gpu_gb * 1e9))
    nbytes = bulk.nbytes - 8 * (len(bulk) + 1)
    res.update(bytes=nbytes, docs=len(bulk), build_s=time.perf_counter() - t)
    print(f"GPU {res['device']}: {nbytes / 1e9:.2f} GB of text, {len(bulk)} documents")
    params = MinHashParams()
    # bit identity against the CPU on a slice of ~200 MB
    piece = bulk.slice(0, min(len(bulk), 60_000))
    hasher = GpuMinHasher(params)
    same = np.array_equal(hasher.signatures(piece), minhash_signatures(piece, params))
    res["identical_on_slice"] = bool(same)
    print(f"bit-identical to CPU on {len(piece)} documents: {same}")
    # raw copy rates for context
    buf = string_buffers(bulk)
    probe = buf.data[: 1 << 30]
    dev = cp.empty(len(probe), cp.uint8)
    import cupyx

    pinned = cupyx.empty_pinned(len(probe), np.uint8)
    pinned[:] = probe
    cp.cuda.runtime.deviceSynchronize()
    res["h2d_pageable_GBps"] = len(probe) / 1e9 / _best(lambda: dev.set(probe), 2)

    def h2d_pinned() -> None:
        dev.set(pinned)
        cp.cuda.runtime.deviceSynchronize()

    res["h2d_pinned_GBps"] = len(probe) / 1e9 / _best(h2d_pinned, 2)
    dev = pinned = None  # free before the big runs
    pageable, pinned_rate = res["h2d_pageable_GBps"], res["h2d_pinned_GBps"]
    print(f"H2D pageable {pageable:.1f} GB/s, pinned {pinned_rate:.1f} GB/s")
    # kernel only: text already on the device
    data_d, starts_d, ends_d = (cp.asarray(x) for x in (buf.data, buf.starts, buf.ends))

    def device_only() -> None:
        hasher.signatures_device(data_d, starts_d, ends_d)
        cp.cuda.runtime.deviceSynchronize()

    res["device_only_s"] = _best(device_only, 2)
    print(f"kernel only (text on device)   : {nbytes / 1e9 / res['device_only_s']:7.2f} GB/s")
    whasher = GpuMinHasher(MinHashParams.word())

    def device_only_word() -> None:
        whasher.signatures_device(data_d, starts_d, ends_d)
        cp.cuda.runtime.deviceSynchronize()

    res["device_only_word_s"] = _best(device_only_word, 2)
    print(f"kernel only, word 5-grams x112 : {nbytes / 1e9 / res['device_only_word_s']:7.2f} GB/s")
    data_d = starts_d = ends_d = None
    cp.get_default_memory_pool().free_all_blocks()
    # end to end: host Arrow in, host signatures / band hashes out
    for chunk in args.chunk_mb:
        for register in (False, True):
            h = GpuMinHasher(params, chunk_bytes=chunk << 20, host_register=register)
            h.signatures(bulk.slice(0, 1000))  # warm up allocations
            s = _best(lambda h=h: h.signatures(bulk), 2)
            b = _best(lambda h=h: h.band_hashes(bulk), 2)
            mode = "registered" if register else "staged"
            res[f"e2e_sig_{mode}_chunk{chunk}MB_s"] = s
            res[f"e2e_bands_{mode}_chunk{chunk}MB_s"] = b
            print(
                f"host->host ({mode}, {chunk} MB chunks): signatures {nbytes / 1e9 / s:6.2f}"
                f" GB/s, band hashes only {nbytes / 1e9 / b:6.2f} GB/s"
            )
    if args.parquet_gb:
        res["parquet"] = bench_parquet(args, bulk, params)
    return res


def bench_parquet(args: argparse.Namespace, bulk: pa.Array, params: MinHashParams) -> dict:
    """From one uncompressed Parquet file (page cache) to host band hashes: pyarrow read +
    host->device copies, vs cuDF decoding on the GPU and hashing the device buffers."""
    import cupy as cp
    import pyarrow.parquet as pq

    from curator.kernels.gpu_io import cudf_enabled, read_parquet_strings
    from curator.kernels.minhash_gpu import GpuMinHasher

    cum = np.frombuffer(bulk.buffers()[1], np.int64)[1 : len(bulk) + 1]
    rows = int(np.searchsorted(cum, args.parquet_gb * 1e9)) + 1
    piece = bulk.slice(0, min(rows, len(bulk)))
    nbytes = int(cum[len(piece) - 1])
    path = Path(args.parquet_dir) / "bench_minhash.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"text": piece}), path, compression="none")
    hasher = GpuMinHasher(params)
    res: dict = {"bytes": nbytes, "docs": len(piece), "file_bytes": path.stat().st_size}

    def arrow() -> np.ndarray:
        return hasher.band_hashes(pq.read_table(path, columns=["text"]).column("text"))

    ref = arrow()
    res["arrow_s"] = _best(arrow, 2)
    print(f"Parquet {nbytes / 1e9:.2f} GB of text -> host band hashes:")
    print(f"  pyarrow read + host->device      : {nbytes / 1e9 / res['arrow_s']:6.2f} GB/s")
    if not cudf_enabled():
        print("  cuDF: not available")
        return res
    import pylibcudf as plc

    got: list[np.ndarray] = []

    def cudf() -> None:
        s = read_parquet_strings(path, "text")
        got.append(hasher.band_hashes_device(s.data, s.starts, s.ends).get())

    def cudf_read() -> None:
        read_parquet_strings(path, "text")
        cp.cuda.runtime.deviceSynchronize()

    res["cudf_s"] = _best(cudf, 2)
    res["cudf_read_s"] = _best(cudf_read, 2)
    offsets_type = read_parquet_strings(path, "text").owner.child(0).type().id()
    res["cudf_int64_offsets"] = offsets_type == plc.TypeId.INT64
    res["cudf_identical"] = all(np.array_equal(g, ref) for g in got)
    print(f"  cuDF decode on GPU + hash        : {nbytes / 1e9 / res['cudf_s']:6.2f} GB/s"
          f" (decode alone {nbytes / 1e9 / res['cudf_read_s']:.2f} GB/s; int64 offsets:"
          f" {res['cudf_int64_offsets']}; bit-identical: {res['cudf_identical']})")
    path.unlink()
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu-mb", type=float, default=64)
    ap.add_argument("--ds-mb", type=float, default=1.0)
    ap.add_argument("--no-cpu", action="store_true")
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--gpu-gb", type=float, default=8)
    ap.add_argument("--chunk-mb", type=int, nargs="+", default=[256])
    ap.add_argument("--parquet-gb", type=float, default=0,
                    help="also time Parquet -> band hashes, pyarrow vs cuDF read (0: skip)")
    ap.add_argument("--parquet-dir", default="/tmp")
    ap.add_argument("--json", type=Path)
    harness.add_results_argument(ap)
    args = ap.parse_args()
    docs = english_docs() + japanese_docs()
    with harness.Recording(args.results) as rec:
        out = rec.figures
        if not args.no_cpu:
            out["cpu"] = bench_cpu(args, docs)
        if args.gpu:
            out["gpu"] = bench_gpu(args, docs)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
