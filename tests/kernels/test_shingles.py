"""Shingle hashes against the pure-Python reference of the specification."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from curator.kernels.shingles import shingle_hashes, string_buffers
from tests.kernels import reference
from tests.kernels.conftest import edge_case_array, malformed_array


def _per_doc(array: pa.Array, n: int, mode: str) -> list[list[int]]:
    offsets, hashes = shingle_hashes(array, n, mode)
    return [hashes[offsets[i] : offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]


def _raw(array: pa.Array) -> list[bytes]:
    buf = string_buffers(array)
    return [buf.data[s:e].tobytes() for s, e in zip(buf.starts, buf.ends, strict=True)]


@pytest.mark.parametrize(
    ("mode", "n"), [("char", 24), ("char", 5), ("char", 1), ("word", 5), ("word", 2)]
)
def test_matches_reference(mode: str, n: int) -> None:
    for array in (edge_case_array(), malformed_array()):
        got = _per_doc(array, n, mode)
        want = [reference.shingles(raw, n, mode) for raw in _raw(array)]
        assert got == want


def test_real_documents_match_reference(sample_docs: list[dict]) -> None:
    array = pa.array([d["text"] for d in sample_docs[::6]])
    for mode, n in (("char", 24), ("word", 5)):
        want = [reference.shingles(t.encode(), n, mode) for t in array.to_pylist()]
        assert _per_doc(array, n, mode) == want


def test_japanese_is_shingled_by_code_point() -> None:
    text = "吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。"
    offsets, hashes = shingle_hashes(pa.array([text]), ngram=5)
    assert offsets[1] == len(text) - 5 + 1  # code points, not bytes (3 bytes each)
    # the same window of code points hashes the same wherever it occurs
    _, again = shingle_hashes(pa.array(["xx" + text[:5]]), ngram=5)
    assert again[-1] == hashes[0]


def test_short_and_empty_documents() -> None:
    offsets, _ = shingle_hashes(pa.array(["", "short", None, " ,. "]), ngram=24)
    assert np.diff(offsets).tolist() == [0, 1, 0, 1]
    offsets, _ = shingle_hashes(pa.array(["", "short one", None, " ,. "]), 5, "word")
    assert np.diff(offsets).tolist() == [0, 1, 0, 0]


def test_word_mode_normalises_case_and_punctuation() -> None:
    a = "The Quick, brown FOX -- jumps over the lazy dog!"
    b = "the quick brown fox jumps over the lazy dog"
    ha = shingle_hashes(pa.array([a]), 5, "word")[1]
    hb = shingle_hashes(pa.array([b]), 5, "word")[1]
    assert ha.tolist() == hb.tolist()


def test_buffers_of_sliced_large_and_chunked_arrays() -> None:
    texts = ["alpha beta", None, "gamma δέλτα", "", "epsilon"]
    base = _per_doc(pa.array(texts), 3, "char")
    assert _per_doc(pa.array(texts, pa.large_string()), 3, "char") == base
    assert _per_doc(pa.array(texts).slice(2), 3, "char") == base[2:]
    chunked = pa.chunked_array([pa.array(texts[:2]), pa.array(texts[2:])])
    assert _per_doc(chunked, 3, "char") == base
    with pytest.raises(TypeError, match="string array"):
        string_buffers(pa.array([1, 2]))
