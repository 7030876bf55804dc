"""GPU kernels give bit-identical results to the CPU kernels (skipped without a GPU)."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from curator.kernels.components import connected_components
from curator.kernels.lsh import band_hashes, star_edges
from curator.kernels.minhash import MinHashParams, minhash_signatures
from curator.kernels.minhash_gpu import GpuMinHasher, gpu_available
from tests.kernels.conftest import edge_case_array, malformed_array, random_text

cp = pytest.importorskip("cupy")
if not gpu_available():
    pytest.skip("no CUDA device", allow_module_level=True)

from curator.kernels.components import components_gpu  # noqa: E402

PARAMS = [
    MinHashParams(),
    MinHashParams.word(),
    MinHashParams(num_perm=64, ngram=5, bands=8, rows=8, seed=5),
]


def _arrays(sample_docs: list[dict]) -> list[pa.Array]:
    rng = random.Random(3)
    big = [random_text(rng, rng.choice([10, 2047, 2048, 2049, 5000, 40_000])) for _ in range(60)]
    real = [d["text"] for d in sample_docs]
    return [
        edge_case_array(),
        malformed_array(),
        pa.array(real + big + ["", None]),
        pa.array(real * 3, pa.large_string()).slice(5),
    ]


@pytest.mark.parametrize("params", PARAMS, ids=["char24", "word5", "char5x64"])
def test_signatures_identical(sample_docs: list[dict], params: MinHashParams) -> None:
    for array in _arrays(sample_docs):
        cpu = minhash_signatures(array, params)
        for chunk in (1 << 28, 4096):  # one chunk, and many small chunks in flight
            for register in (False, True):
                gpu = GpuMinHasher(params, chunk_bytes=chunk, host_register=register)
                assert np.array_equal(cpu, gpu.signatures(array))


def test_band_hashes_identical(sample_docs: list[dict]) -> None:
    array = _arrays(sample_docs)[2]
    params = MinHashParams()
    cpu = band_hashes(minhash_signatures(array, params), params.bands, params.rows)
    gpu = GpuMinHasher(params, chunk_bytes=8192).band_hashes(array)
    assert np.array_equal(cpu, gpu)
    ids = np.arange(len(cpu), dtype=np.int64)
    s_cpu, d_cpu = star_edges(ids, cpu)
    s_gpu, d_gpu = star_edges(cp.asarray(ids), cp.asarray(cpu))
    assert np.array_equal(s_cpu, s_gpu.get()) and np.array_equal(d_cpu, d_gpu.get())


def test_parts_in_flight_from_threads_identical(sample_docs: list[dict]) -> None:
    """A GPU worker hashes several parts at once, one per thread (each on its own stream)."""
    from concurrent.futures import ThreadPoolExecutor

    params = MinHashParams()
    arrays = _arrays(sample_docs) * 4
    hasher = GpuMinHasher(params)
    with ThreadPoolExecutor(8) as pool:
        got = list(pool.map(hasher.band_hashes, arrays))
    for array, bands in zip(arrays, got, strict=True):
        cpu = band_hashes(minhash_signatures(array, params), params.bands, params.rows)
        assert np.array_equal(cpu, bands)


def test_device_resident_input(sample_docs: list[dict]) -> None:
    array = pa.array([d["text"] for d in sample_docs])
    from curator.kernels.shingles import string_buffers

    buf = string_buffers(array)
    hasher = GpuMinHasher()
    sig = hasher.signatures_device(
        cp.asarray(buf.data), cp.asarray(buf.starts), cp.asarray(buf.ends)
    )
    assert np.array_equal(sig.get(), minhash_signatures(array))


@pytest.mark.parametrize(
    ("n", "m", "seed"), [(1000, 800, 1), (200_000, 190_000, 2), (50_000, 400_000, 3)]
)
def test_components_identical(n: int, m: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, size=m), rng.integers(0, n, size=m)
    cpu = connected_components(n, src, dst)
    gpu = components_gpu(n, cp.asarray(src), cp.asarray(dst))
    assert np.array_equal(cpu, gpu.get())
    chain = rng.permutation(n)
    gpu = components_gpu(n, cp.asarray(chain[:-1]), cp.asarray(chain[1:]))
    assert (gpu == 0).all()
