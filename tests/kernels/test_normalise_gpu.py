"""The GPU normaliser gives exact_dedup's CPU normalisation (Arrow) byte for byte: its source
built for the host (g++) on every machine, the kernels themselves where CuPy sees a GPU."""

from __future__ import annotations

import ctypes
import os
import random
import shutil
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from curator.kernels.doc_hash import doc_hashes
from curator.kernels.normalise_gpu import SOURCE, case_tables
from curator.kernels.shingles import string_buffers
from curator.stages.dedup.exact import normalise_text
from tests.kernels.conftest import edge_case_array, malformed_array

#: Whitespace of every kind (runs of them, \v and Unicode ones that are not collapsed), letters
#: whose lower case has another UTF-8 length (İ, Ⱥ, ẞ, Ω, K), and plain text.
UNITS = [" ", "  ", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\xa0", "\u2028", "\u3000",
         "\u200b", "\ufeff", "A", "Z", "é", "É", "\u0130", "\u023a", "\u1e9e", "\u2126",
         "\u212a", "Σ", "ΣΑΣ", "日本", "😀", "word", "Ǆ", "ǅ", "\U0001e900"]


def _documents() -> list[str | None]:
    rng = random.Random(3)
    docs = ["".join(rng.choice(UNITS) for _ in range(rng.randint(0, 30))) for _ in range(4000)]
    every = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    return [*docs, None, "", every, every[::-1], " \u3000 a \u3000 ", "\x0b a \x0b"]


@pytest.fixture(scope="module")
def host_build(tmp_path_factory):
    """The normaliser's source compiled for the host, called through ctypes."""
    if shutil.which("g++") is None:
        pytest.skip("no g++ to build the GPU source for the host")
    folder = tmp_path_factory.mktemp("normalise-host")
    (folder / "host.cpp").write_text("#define HD static inline\n" + SOURCE + r"""
extern "C" void normalise_all(const u8* data, const long long* starts, const long long* ends,
                              long long n, const unsigned* lower, unsigned n_lower,
                              const u8* space, unsigned n_space, long long* lengths, u8* out) {
    long long w = 0;
    for (long long i = 0; i < n; ++i) {  // pass 1, as the lengths kernel
        lengths[i] = normalise_doc(data + starts[i], ends[i] - starts[i], lower, n_lower, space,
                                   n_space, 0, 0);
        w += lengths[i] < 0 ? 0 : lengths[i];
    }
    for (long long i = n - 1; i >= 0; --i) {  // pass 2 backwards: a write past a document's
        w -= lengths[i] < 0 ? 0 : lengths[i];  // end would show in the next one's bytes
        if (lengths[i] >= 0)
            normalise_doc(data + starts[i], ends[i] - starts[i], lower, n_lower, space, n_space,
                          out + w, lengths[i]);
    }
}
""")
    subprocess.run(["g++", "-O2", "-shared", "-fPIC", "host.cpp", "-o", "host.so"], cwd=folder,
                   check=True, capture_output=True)
    return ctypes.CDLL(str(folder / "host.so"))


def _host_normalise(lib, array: pa.Array) -> tuple[list[bytes | None], np.ndarray]:
    """Each document normalised by the host build (None where it is not UTF-8), and lengths."""
    buf = string_buffers(array)
    tables = case_tables()
    n = len(buf.starts)
    lengths = np.empty(n, np.int64)
    out = np.empty(2 * int((buf.ends - buf.starts).sum()) + 1, np.uint8)
    data = np.ascontiguousarray(buf.data)
    starts, ends = np.ascontiguousarray(buf.starts), np.ascontiguousarray(buf.ends)

    def ptr(a: np.ndarray) -> ctypes.c_void_p:
        return ctypes.c_void_p(a.ctypes.data)

    lib.normalise_all(ptr(data), ptr(starts), ptr(ends), ctypes.c_longlong(n),
                      ptr(tables.lower), ctypes.c_uint(len(tables.lower)), ptr(tables.space),
                      ctypes.c_uint(len(tables.space)), ptr(lengths), ptr(out))
    docs, at = [], 0
    for length in lengths:
        docs.append(None if length < 0 else out[at:at + length].tobytes())
        at += max(0, length)
    return docs, lengths


def _arrow(array: pa.Array) -> list[bytes]:
    return [(s or "").encode() for s in normalise_text(array).to_pylist()]


def test_case_tables_are_arrows_lower_case_and_whitespace() -> None:
    tables = case_tables()
    assert tables.lower[ord("A")] == ord("a") and tables.lower[0x130] == ord("i")
    assert tables.lower[0x212A] == ord("k") and tables.lower[ord("a")] == ord("a")
    assert {0x20, 0x9, 0xB, 0x85, 0xA0, 0x3000} <= set(np.flatnonzero(tables.space).tolist())
    assert not tables.space[ord("a")] and not tables.space[0x200B]  # zero width: not trimmed


def test_host_build_normalises_as_arrow(host_build, sample_docs) -> None:
    texts = [d["text"] for d in sample_docs]
    cases = [pa.array(_documents()), edge_case_array(), pa.array(texts),
             pa.array(_documents(), pa.large_string()).slice(5, 3000)]
    for array in cases:
        got, _ = _host_normalise(host_build, array)
        assert got == _arrow(array)


def test_host_build_flags_every_document_that_is_not_utf8(host_build) -> None:
    blobs = [b"ok", b"\xc0\x80", b"\xed\xa0\x80", b"\xe3\x81", b"\x80", b"\xf4\x90\x80\x80",
             b"\xf8\x88\x80\x80\x80", b"caf\xc3\xa9", b"\xf0\x9f\x98\x80"]
    offsets = np.cumsum([0, *map(len, blobs)], dtype=np.int64)
    array = pa.LargeStringArray.from_buffers(len(blobs), pa.py_buffer(offsets.tobytes()),
                                             pa.py_buffer(b"".join(blobs)))
    _, lengths = _host_normalise(host_build, array)
    assert [length >= 0 for length in lengths] == [True] + [False] * 6 + [True, True]
    _, lengths = _host_normalise(host_build, malformed_array())
    assert (lengths < 0).all()


def test_gpu_source_compiles_for_the_device(tmp_path) -> None:
    if shutil.which("nvcc") is None:
        pytest.skip("no nvcc")
    (tmp_path / "k.cu").write_text(SOURCE)
    done = subprocess.run(["nvcc", "--ptx", "-std=c++17", "k.cu"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    ptx = (tmp_path / "k.ptx").read_text()
    assert "normalised_lengths" in ptx and "normalised_bytes" in ptx


def test_gpu_hashes_of_normalised_text_equal_the_cpus(sample_docs) -> None:
    pytest.importorskip("cupy")
    from curator.kernels.minhash_gpu import gpu_available

    if not gpu_available():
        pytest.skip("no CUDA device")
    from curator.kernels.doc_hash_gpu import doc_hashes_gpu
    from curator.stages.dedup.exact import document_hashes

    texts = [d["text"] for d in sample_docs]
    for array in (pa.array(_documents()), edge_case_array(), pa.array(texts),
                  pa.chunked_array([pa.array(texts[:10]), pa.array(texts[10:])])):
        want = doc_hashes(normalise_text(array))
        got = doc_hashes_gpu(array, normalise=True)
        assert (got[0] == want[0]).all() and (got[1] == want[1]).all()
    assert doc_hashes_gpu(malformed_array(), normalise=True) is None
    with pytest.raises(pa.ArrowInvalid):  # as the CPU path: Arrow refuses it
        document_hashes(malformed_array(), "xxh3_128", "gpu", normalise=True)


def test_gpu_hashing_compiles_nothing_more_for_other_input_sizes(tmp_path) -> None:
    """After a first call on two documents, calls on any number of them compile no kernel:
    a first real run on a machine must not stall on kernels specialised by input size (CuPy's
    ``any`` did, one CUB block size after another: the hash phase 18.5 s instead of 4.2)."""
    pytest.importorskip("cupy")
    from curator.kernels.minhash_gpu import gpu_available

    if not gpu_available():
        pytest.skip("no CUDA device")
    script = """
import os
from pathlib import Path
import pyarrow as pa
from curator.kernels.doc_hash_gpu import doc_hashes_gpu
cache = Path(os.environ["CUPY_CACHE_DIR"])
def docs(n):
    return pa.array([f"Doc {i} \u6771\u4eac  \u00c9T\u00c9 " * (1 + i % 7) for i in range(n)])
doc_hashes_gpu(docs(2), normalise=True)
first = len(list(cache.iterdir()))
for n in (1, 7, 60, 200, 700, 1_500, 5_000, 70_000, 300_000):
    doc_hashes_gpu(docs(n), normalise=True)
print(first, len(list(cache.iterdir())))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "CUPY_CACHE_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    first, after = map(int, done.stdout.split())
    assert first > 0 and after == first
