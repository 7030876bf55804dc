"""What a first GPU exact-dedup call costs on a fresh machine, by input size: in a process of its
own with an empty CuPy kernel cache (``CUPY_CACHE_DIR``), the hash (normalise + XXH3-128 on the
device) of N synthetic documents for growing N, each size twice, and the kernel files cached
after each call. Shows whether a kernel is first compiled at some size above a tiny warm-up's:
on one H100 (session 24) the calls compiled at 2 documents (3.89 s) and 2,000 (3.58 s), at no size
above (results_dedup_product_h200.md).

    CUPY_CACHE_DIR=$(mktemp -d) python benchmarks/probe_first_run.py
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa

from curator.kernels.doc_hash_gpu import doc_hashes_gpu


def documents(n: int) -> pa.Array:
    words = ["Warm", "UP", "the", "kernels", "\u6771\u4eac", "\u00c9t\u00c9", "\t", "  "]
    return pa.array([" ".join(words[(i + k) % len(words)] for k in range(i % 97))
                     for i in range(n)])


def main() -> None:
    cache = Path(os.environ.get("CUPY_CACHE_DIR", Path.home() / ".cupy" / "kernel_cache"))
    print(f"CuPy kernel cache: {cache}")
    for n in (2, 2, 2_000, 2_000, 16_384, 16_384, 60_000, 60_000):
        text = documents(n)
        started = time.perf_counter()
        doc_hashes_gpu(text, normalise=True)
        took = time.perf_counter() - started
        files = sum(1 for p in cache.rglob("*") if p.is_file()) if cache.exists() else 0
        print(f"{n:>7,} documents: {took:7.3f} s; {files} kernel files cached")


if __name__ == "__main__":
    main()
