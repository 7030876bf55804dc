"""The bulk document hash is XXH3-128 (the ``xxhash`` package is the reference) on the CPU, in
the GPU kernel's source built for the host, and on the GPU itself (skipped without one)."""

from __future__ import annotations

import ctypes
import random
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from functools import cache

import numpy as np
import pyarrow as pa
import pytest
import xxhash

from curator.kernels.doc_hash import SECRET, doc_hashes
from curator.kernels.doc_hash_gpu import SOURCE
from curator.stages.dedup.exact import text_hashes
from tests.kernels.conftest import edge_case_array, malformed_array, random_text

#: Every short-input branch, the 128/240 limits, and around XXH3's 64-byte stripes and
#: 1024-byte blocks (the last stripe overlapping the previous one, partial blocks).
BOUNDARY_LENGTHS = [*range(0, 300), *[b + d for b in (512, 1024, 2048, 4096, 10240)
                                      for d in (-65, -64, -63, -1, 0, 1, 63, 64, 65)]]


@cache
def _documents() -> list[bytes]:
    rng = random.Random(11)
    docs = [rng.randbytes(n) for n in BOUNDARY_LENGTHS]
    docs += [random_text(rng, rng.randint(0, 2000)).encode() for _ in range(2000)]
    docs += [rng.randbytes(rng.randint(0, 40_000)) for _ in range(200)]
    return docs


def _reference(blobs: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    digests = [xxhash.xxh3_128_intdigest(b) for b in blobs]
    return (np.array([d >> 64 for d in digests], np.uint64),
            np.array([d & ((1 << 64) - 1) for d in digests], np.uint64))


def _binary_as_string(blobs: list[bytes]) -> pa.Array:
    """A string array over arbitrary bytes (not checked as UTF-8), as a reader may pass on."""
    offsets = np.cumsum([0, *map(len, blobs)], dtype=np.int64)
    return pa.LargeStringArray.from_buffers(len(blobs), pa.py_buffer(offsets.tobytes()),
                                            pa.py_buffer(b"".join(blobs)))


def _assert_same(got: tuple[np.ndarray, np.ndarray], want: tuple[np.ndarray, np.ndarray]) -> None:
    bad = np.flatnonzero((got[0] != want[0]) | (got[1] != want[1]))
    assert len(bad) == 0, f"{len(bad)} documents differ, first at row {bad[:5]}"


def test_cpu_kernel_is_xxh3_128() -> None:
    docs = _documents()
    array = _binary_as_string(docs)
    _assert_same(doc_hashes(array), _reference(docs))


def test_cpu_kernel_equals_the_per_document_loop_on_real_shapes(sample_docs) -> None:
    texts = [d["text"] for d in sample_docs]
    cases = [edge_case_array(), malformed_array(), pa.array(texts),
             pa.array(texts * 2, pa.large_string()).slice(7, len(texts)),  # sliced offsets
             pa.chunked_array([pa.array(texts[:10]), pa.array([], pa.string()),
                               pa.array(texts[10:], pa.large_string()).cast(pa.string())])]
    for array in cases:
        expected = text_hashes(array.fill_null(""), "xxh3_128")
        _assert_same(doc_hashes(array), expected)


def test_nulls_hash_as_empty_documents() -> None:
    high, low = doc_hashes(pa.array(["x", None, ""]))
    assert high[1] == high[2] and low[1] == low[2] and high[0] != high[1]


@pytest.fixture(scope="module")
def host_build(tmp_path_factory):
    """The GPU kernel's hash function compiled for the host (g++), called through ctypes."""
    if shutil.which("g++") is None:
        pytest.skip("no g++ to build the GPU source for the host")
    folder = tmp_path_factory.mktemp("doc-hash-host")
    (folder / "host.cpp").write_text("#define HD static inline\n" + SOURCE + r"""
extern "C" void hash_all(const unsigned char* data, const long long* starts,
                         const long long* ends, long long n, const unsigned char* secret,
                         u64* high, u64* low) {
    for (long long i = 0; i < n; ++i)
        xxh3_128(data + starts[i], (u64)(ends[i] - starts[i]), secret, high + i, low + i);
}
""")
    subprocess.run(["g++", "-O2", "-shared", "-fPIC", "host.cpp", "-o", "host.so"], cwd=folder,
                   check=True, capture_output=True)
    return ctypes.CDLL(str(folder / "host.so"))


def test_gpu_source_built_for_the_host_is_xxh3_128(host_build) -> None:
    docs = _documents()
    data = np.frombuffer(b"".join(docs) + b"\0", np.uint8)
    offsets = np.cumsum([0, *map(len, docs)], dtype=np.int64)
    high, low = np.empty(len(docs), np.uint64), np.empty(len(docs), np.uint64)
    secret = np.frombuffer(SECRET, np.uint8)

    def ptr(a: np.ndarray) -> ctypes.c_void_p:
        return ctypes.c_void_p(a.ctypes.data)

    starts, ends = np.ascontiguousarray(offsets[:-1]), np.ascontiguousarray(offsets[1:])
    host_build.hash_all(ptr(data), ptr(starts), ptr(ends), ctypes.c_longlong(len(docs)),
                        ptr(secret), ptr(high), ptr(low))
    _assert_same((high, low), _reference(docs))


def test_gpu_source_compiles_for_the_device(tmp_path) -> None:
    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc")
    (tmp_path / "k.cu").write_text(SOURCE)
    done = subprocess.run(["nvcc", "--ptx", "-std=c++17", "k.cu"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "xxh3_128_docs" in (tmp_path / "k.ptx").read_text()


def test_gpu_kernel_equals_cpu_kernel(sample_docs) -> None:
    pytest.importorskip("cupy")
    from curator.kernels.minhash_gpu import gpu_available

    if not gpu_available():
        pytest.skip("no CUDA device")
    from curator.kernels.doc_hash_gpu import doc_hashes_gpu

    docs = _documents()
    texts = [d["text"] for d in sample_docs]
    for array in (_binary_as_string(docs), edge_case_array(), malformed_array(),
                  pa.array(texts * 2, pa.large_string()).slice(7, len(texts)),
                  pa.chunked_array([pa.array(texts[:10]), pa.array(texts[10:])])):
        _assert_same(doc_hashes_gpu(array), doc_hashes(array))
    arrays = [pa.array(texts[i:] + texts[:i]) for i in range(16)]  # parts in flight: threads
    with ThreadPoolExecutor(8) as pool:
        for array, got in zip(arrays, pool.map(doc_hashes_gpu, arrays), strict=True):
            _assert_same(got, doc_hashes(array))


def test_collapse_whitespace_is_the_regex() -> None:
    """The numba whitespace collapse gives Arrow's ``\\s+`` → " " (RE2: ASCII [\\t\\n\\f\\r ])
    on every kind of whitespace, Unicode ones and \\v included; sliced, chunked, nulls."""
    import pyarrow.compute as pc

    from curator.kernels.whitespace import collapse_whitespace

    rng = random.Random(5)
    units = ["a", "b", " ", "\t", "\n", "\r", "\x0b", "\x0c", "\u3000", "\xa0", "\u2028", "\x85",
             "é", "日", "  "]
    docs = ["".join(rng.choice(units) for _ in range(rng.randint(0, 40))) for _ in range(3000)]
    array = pa.array([*docs, None, ""])
    for case in (array, array.slice(3, 2000), pa.chunked_array([array[:10], array[10:]])):
        want = pc.replace_substring_regex(case, r"\s+", " ")
        assert collapse_whitespace(case).to_pylist() == want.to_pylist()
