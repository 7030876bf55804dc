"""Fuzzy-dedup quality: precision/recall of duplicate pairs vs datasketch's MinHashLSH.

    python benchmarks/dedup_quality.py [--english 400] [--japanese 150] [--seed 0] [--results F]

Benchmark: real documents from ../shared/corpus (English text_corpus, Japanese Wikipedia
articles) plus synthetic near-duplicates (word or character edits at rates 0-30 %). Ground
truth: exact Jaccard over the same shingle sets, for every pair sharing a shingle (sparse
product, so natural duplicates across families count too). A pair is a duplicate when its
Jaccard is >= the threshold (0.8). Both systems use 24-character shingles, 260 hashes,
20 bands x 13 rows; datasketch gets the very same shingle strings.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import defaultdict
from itertools import combinations
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import harness
import numpy as np
import pyarrow as pa
from dedup_data import english_docs, japanese_docs, near_duplicate
from scipy import sparse

from curator.kernels.lsh import band_hashes, signature_similarity
from curator.kernels.minhash import MinHashParams, minhash_signatures
from curator.kernels.shingles import shingle_hashes

RATES = (0.0, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3)


def build(args: argparse.Namespace) -> list[str]:
    rng = random.Random(args.seed)
    en = [d for d in english_docs() if len(d) >= 500]
    ja = [d for d in japanese_docs() if len(d) >= 500]
    base = [(d, False) for d in rng.sample(en, args.english)]
    base += [(d, True) for d in rng.sample(ja, args.japanese)]
    docs = []
    for text, is_ja in base:
        docs.append(text)
        for _ in range(rng.randint(0, 3)):
            docs.append(near_duplicate(text, rng.choice(RATES), rng, japanese=is_ja))
    return docs


def true_pairs(docs: pa.Array, params: MinHashParams, threshold: float) -> set[tuple[int, int]]:
    offsets, hashes = shingle_hashes(docs, params.ngram, params.mode)
    rows = np.repeat(np.arange(len(docs)), np.diff(offsets))
    uniq, cols = np.unique(hashes, return_inverse=True)
    mat = sparse.csr_matrix(
        (np.ones(len(cols), np.int32), (rows, cols.ravel())), shape=(len(docs), len(uniq))
    )
    mat.data[:] = 1  # duplicates inside a document were summed: back to a set
    mat.sum_duplicates()
    mat.data[:] = 1
    sizes = np.asarray(mat.sum(axis=1)).ravel()
    inter = sparse.triu(mat @ mat.T, k=1).tocoo()
    jac = inter.data / (sizes[inter.row] + sizes[inter.col] - inter.data)
    keep = jac >= threshold
    return set(zip(inter.row[keep].tolist(), inter.col[keep].tolist(), strict=True))


def bucket_pairs(table: np.ndarray) -> set[tuple[int, int]]:
    pairs: set[tuple[int, int]] = set()
    for j in range(table.shape[1]):
        groups: dict[int, list[int]] = defaultdict(list)
        for i, h in enumerate(table[:, j].tolist()):
            groups[h].append(i)
        for members in groups.values():
            pairs.update(combinations(members, 2))
    return pairs


def datasketch_pairs(texts: list[str], params: MinHashParams, seed: int) -> tuple[set, dict, float]:
    from datasketch import MinHash, MinHashLSH

    t = time.perf_counter()
    n = params.ngram
    lsh = MinHashLSH(num_perm=params.num_perm, params=(params.bands, params.rows))
    sketches = {}
    for i, text in enumerate(texts):
        m = MinHash(num_perm=params.num_perm, seed=seed)
        m.update_batch([text[k : k + n].encode() for k in range(max(len(text) - n + 1, 1))])
        lsh.insert(i, m)
        sketches[i] = m
    pairs = set()
    for i, m in sketches.items():
        pairs.update((min(i, j), max(i, j)) for j in lsh.query(m) if j != i)
    return pairs, sketches, time.perf_counter() - t


def score(pred: set, truth: set) -> np.ndarray:
    tp = len(pred & truth)
    return np.array([len(pred), tp / len(pred) if pred else 1.0, tp / len(truth) if truth else 1.0])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--english", type=int, default=400)
    ap.add_argument("--japanese", type=int, default=150)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--seeds", type=int, default=5, help="permutation seeds to average over")
    harness.add_results_argument(ap)
    args = ap.parse_args()
    with harness.Recording(args.results) as rec:
        measure(args, rec.figures)


def measure(args: argparse.Namespace, figures: dict) -> None:
    params = MinHashParams()
    texts = build(args)
    docs = pa.array(texts)
    print(f"{len(texts)} documents, {docs.nbytes / 1e6:.1f} MB; threshold {args.threshold}")
    truth = true_pairs(docs, params, args.threshold)
    print(f"ground truth: {len(truth)} pairs with Jaccard >= {args.threshold}")
    results: dict[str, list[np.ndarray]] = defaultdict(list)
    times = np.zeros(2)
    for seed in range(1, args.seeds + 1):
        run = MinHashParams(seed=seed)
        t = time.perf_counter()
        sig = minhash_signatures(docs, run)
        ours = bucket_pairs(band_hashes(sig, run.bands, run.rows))
        times[0] += time.perf_counter() - t
        ds, sketches, ds_s = datasketch_pairs(texts, run, seed)
        times[1] += ds_s
        arr = np.array(sorted(ours), dtype=np.int64).reshape(-1, 2)
        sim = signature_similarity(sig, arr[:, 0], arr[:, 1])
        verified = {
            (i, j) for (i, j), v in zip(arr.tolist(), sim, strict=True) if v >= args.threshold
        }
        ds_ok = {(i, j) for i, j in ds if sketches[i].jaccard(sketches[j]) >= args.threshold}
        results["curator LSH candidates"].append(score(ours, truth))
        results["datasketch MinHashLSH candidates"].append(score(ds, truth))
        results["curator candidates + signature check"].append(score(verified, truth))
        results["datasketch candidates + signature check"].append(score(ds_ok, truth))
    print(f"mean over {args.seeds} permutation seeds (min-max in brackets):")
    for name, rows in results.items():
        r = np.array(rows)
        print(
            f"  {name:40s} pairs {r[:, 0].mean():7.1f}  precision {r[:, 1].mean():.4f}"
            f" [{r[:, 1].min():.3f}-{r[:, 1].max():.3f}]  recall {r[:, 2].mean():.4f}"
            f" [{r[:, 2].min():.3f}-{r[:, 2].max():.3f}]"
        )
        figures[name] = {"pairs": r[:, 0].mean(), "precision": r[:, 1].mean(),
                         "recall": r[:, 2].mean()}
    figures.update(documents=len(texts), true_pairs=len(truth),
                   seconds_per_run={"curator": times[0] / args.seeds,
                                    "datasketch": times[1] / args.seeds})
    print(
        f"time per run: curator signatures+bands {times[0] / args.seeds:.2f} s (all cores),"
        f" datasketch MinHash+LSH {times[1] / args.seeds:.2f} s"
    )


if __name__ == "__main__":
    main()
