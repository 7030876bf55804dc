"""MinHash signatures: reference agreement, determinism and Jaccard estimates on real text."""

from __future__ import annotations

import random

import numba
import numpy as np
import pyarrow as pa
import pytest

from curator.kernels.minhash import (
    EMPTY,
    MinHashParams,
    empty_mask,
    minhash_signatures,
    permutations,
)
from curator.kernels.shingles import shingle_hashes, string_buffers
from tests.kernels import reference
from tests.kernels.conftest import edge_case_array, malformed_array


def test_permutations_match_reference() -> None:
    a, b = permutations(260, 42)
    assert list(zip(a.tolist(), b.tolist(), strict=True)) == reference.permutations(260, 42)
    assert (a & 1).all()


@pytest.mark.parametrize(
    "params",
    [
        MinHashParams(num_perm=16, bands=4, rows=4, seed=3),
        MinHashParams.word(num_perm=16, bands=4, rows=4, ngram=3),
    ],
)
def test_signatures_match_reference(params: MinHashParams) -> None:
    for array in (edge_case_array(), malformed_array()):
        buf = string_buffers(array)
        got = minhash_signatures(array, params)
        for i, (s, e) in enumerate(zip(buf.starts, buf.ends, strict=True)):
            raw = buf.data[s:e].tobytes()
            want = reference.signature(raw, params.ngram, params.mode, params.num_perm, params.seed)
            assert got[i].tolist() == want, f"document {i}: {raw[:40]!r}"


def test_default_signature_of_real_document_matches_reference(sample_docs: list[dict]) -> None:
    texts = [sample_docs[0]["text"], sample_docs[-1]["text"]]  # English and Japanese
    got = minhash_signatures(pa.array(texts))
    for row, text in zip(got, texts, strict=True):
        assert row.tolist() == reference.signature(text.encode(), 24, "char", 260, 42)


def test_deterministic_across_threads_and_batching(sample_docs: list[dict]) -> None:
    texts = [d["text"] for d in sample_docs] + ["", None]
    array = pa.array(texts)
    first = minhash_signatures(array)
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        single = minhash_signatures(array)
    finally:
        numba.set_num_threads(threads)
    assert np.array_equal(first, single)
    parts = np.concatenate([minhash_signatures(array.slice(i, 7)) for i in range(0, len(texts), 7)])
    assert np.array_equal(first, parts)
    assert first.dtype == np.uint32 and first.shape == (len(texts), 260)
    assert empty_mask(first).tolist() == [False] * len(sample_docs) + [True, True]
    assert (first[-1] == EMPTY).all()


def test_seed_changes_signatures(sample_docs: list[dict]) -> None:
    array = pa.array([sample_docs[0]["text"]])
    assert not np.array_equal(
        minhash_signatures(array, MinHashParams(seed=1)),
        minhash_signatures(array, MinHashParams(seed=2)),
    )


def _mutate(words: list[str], rate: float, rng: random.Random) -> list[str]:
    out = []
    for w in words:
        r = rng.random()
        if r < rate / 3:
            continue  # deletion
        if r < 2 * rate / 3:
            out.append(rng.choice(words))  # substitution
        else:
            out.append(w)
        if rng.random() < rate / 3:
            out.append(rng.choice(words))  # insertion
    return out


@pytest.mark.parametrize(("mode", "ngram", "num_perm"), [("char", 24, 260), ("word", 5, 112)])
def test_estimated_jaccard_tracks_true_jaccard(
    sample_docs: list[dict], mode: str, ngram: int, num_perm: int
) -> None:
    rng = random.Random(11)
    pairs = []
    for doc in sample_docs:
        if doc["lang"] != "en":
            continue
        words = doc["text"].split()
        for rate in (0.01, 0.03, 0.1):
            pairs.append((doc["text"], " ".join(_mutate(words, rate, rng))))
    flat = pa.array([t for p in pairs for t in p])
    params = MinHashParams(num_perm=num_perm, ngram=ngram, mode=mode, bands=1, rows=1)
    sig = minhash_signatures(flat, params)
    offsets, hashes = shingle_hashes(flat, ngram, mode)
    errors = []
    for k in range(len(pairs)):
        a = set(hashes[offsets[2 * k] : offsets[2 * k + 1]].tolist())
        b = set(hashes[offsets[2 * k + 1] : offsets[2 * k + 2]].tolist())
        true = len(a & b) / len(a | b)
        est = float((sig[2 * k] == sig[2 * k + 1]).mean())
        sigma = max(np.sqrt(true * (1 - true) / num_perm), 1 / num_perm)
        assert abs(est - true) < 5 * sigma, (k, true, est)
        errors.append((est - true) / sigma)
    assert abs(np.mean(errors)) < 0.5  # no bias: mean standardised error near 0
    assert 0.3 < np.std(errors) < 1.6  # spread as binomial sampling predicts


def test_params_validation() -> None:
    with pytest.raises(ValueError, match="exceeds"):
        MinHashParams(num_perm=10, bands=5, rows=3)
    with pytest.raises(ValueError, match="mode"):
        MinHashParams(mode="bytes")
    assert MinHashParams.word().num_perm == 112
    assert 0.7 < MinHashParams().threshold < 0.8
