"""cuDF (pylibcudf) device reads give the CPU path's signatures and clusters (skipped without
cuDF or a GPU)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator.kernels.lsh import band_hashes
from curator.kernels.minhash import MinHashParams, minhash_signatures
from curator.kernels.minhash_gpu import GpuMinHasher, gpu_available
from tests.conftest import sample_documents
from tests.kernels.conftest import edge_case_array, malformed_array, random_text

cp = pytest.importorskip("cupy")
plc = pytest.importorskip("pylibcudf")
if not gpu_available():
    pytest.skip("no CUDA device", allow_module_level=True)

from pylibcudf.gpumemoryview import gpumemoryview  # noqa: E402

from curator.kernels import gpu_io  # noqa: E402

PARAMS = [MinHashParams(), MinHashParams.word(),
          MinHashParams(num_perm=64, ngram=5, bands=8, rows=8, seed=5)]
IDS = ["char24", "word5", "char5x64"]


@pytest.fixture(scope="module")
def texts(sample_docs: list[dict]) -> list[str | None]:
    """Real English and Japanese documents, long mixed-script ones, empty strings and nulls."""
    rng = random.Random(11)
    docs: list[str | None] = [d["text"] for d in sample_docs]
    docs += [d["text"] for d in sample_documents()]
    docs += [random_text(rng, rng.choice([10, 2048, 2049, 40_000])) for _ in range(20)]
    docs += ["", None, "a", None]
    rng.shuffle(docs)
    return docs


def _gpu(strings: gpu_io.DeviceStrings, params: MinHashParams) -> np.ndarray:
    return GpuMinHasher(params).signatures_device(strings.data, strings.starts,
                                                  strings.ends).get()


def _on_device(host: np.ndarray) -> gpumemoryview:
    """A device copy of ``host`` bytes, padded to a multiple of 64 bytes (as cuDF pads)."""
    padded = np.zeros(max(64, -(-host.nbytes // 64) * 64), np.uint8)
    padded[: host.nbytes] = host.view(np.uint8)
    return gpumemoryview(cp.asarray(padded))


def _cudf_column(array: pa.Array, wide: bool) -> plc.Column:
    """A cuDF STRING column over copies of ``array``'s own buffers: the same row offset, null
    mask and bytes (null rows keep whatever byte range Arrow gave them); offsets int64 when
    ``wide`` (cuDF's large strings), else int32."""
    validity, off_buf, data_buf = array.buffers()
    count = array.offset + len(array) + 1
    host_type = np.int64 if pa.types.is_large_string(array.type) else np.int32
    offsets = np.frombuffer(off_buf, host_type, count=count).astype(
        np.int64 if wide else np.int32)
    child = plc.Column(plc.DataType(plc.TypeId.INT64 if wide else plc.TypeId.INT32), count,
                       gpumemoryview(cp.asarray(offsets)), None, 0, 0, [])
    mask = _on_device(np.frombuffer(validity, np.uint8)) if array.null_count else None
    return plc.Column(plc.DataType(plc.TypeId.STRING), len(array),
                      _on_device(np.frombuffer(data_buf, np.uint8)), mask,
                      array.null_count, array.offset, [child])


def _nulls_keeping_bytes(texts: list[str | None]) -> pa.StringArray:
    """Every third row null while its offsets still span bytes (Arrow allows that)."""
    base = pa.array([t or "" for t in texts], pa.string())
    valid = [i % 3 != 1 for i in range(len(base))]
    return pa.StringArray.from_buffers(len(base), base.buffers()[1], base.buffers()[2],
                                       pa.array(valid).buffers()[1], valid.count(False))


@pytest.mark.parametrize("params", PARAMS, ids=IDS)
def test_parquet_read_on_device_gives_cpu_signatures(texts, tmp_path: Path,
                                                     params: MinHashParams) -> None:
    path = tmp_path / "part.parquet"
    pq.write_table(pa.table({"text": texts}), path, row_group_size=40)  # several row groups
    cpu = minhash_signatures(pq.read_table(path).column("text"), params)
    strings = gpu_io.read_parquet_strings(path, "text")
    assert np.array_equal(_gpu(strings, params), cpu)
    bands = GpuMinHasher(params).band_hashes_device(strings.data, strings.starts, strings.ends)
    assert np.array_equal(bands.get(), band_hashes(cpu, params.bands, params.rows))


@pytest.mark.parametrize("wide", [False, True], ids=["int32-offsets", "int64-offsets"])
def test_sliced_columns_and_nulls_give_cpu_signatures(texts, wide: bool) -> None:
    keeping = _nulls_keeping_bytes(texts)
    arrays = [edge_case_array(), malformed_array(), keeping, keeping.slice(7, 50),
              pa.array(texts, pa.large_string()).slice(3)]
    for array in arrays:
        strings = gpu_io.column_strings(_cudf_column(array, wide))
        assert np.array_equal(_gpu(strings, PARAMS[0]), minhash_signatures(array, PARAMS[0]))


def test_cudf_slices_give_cpu_signatures(texts) -> None:
    array = _nulls_keeping_bytes(texts)
    column = plc.Column.from_arrow(array)
    for lo, hi in [(0, len(array)), (1, 2), (5, 60), (len(array) - 3, len(array)), (4, 4)]:
        piece = plc.copying.slice(column, [lo, hi])[0]
        expected = minhash_signatures(array.slice(lo, hi - lo))
        assert np.array_equal(_gpu(gpu_io.column_strings(piece), PARAMS[0]), expected)


def test_all_null_and_empty_files(tmp_path: Path) -> None:
    for name, column in [("nulls", pa.array([None, None, None], pa.string())),
                         ("empty", pa.array([], pa.string())),
                         ("blank", pa.array(["", ""], pa.string()))]:
        path = tmp_path / f"{name}.parquet"
        pq.write_table(pa.table({"text": column}), path)
        got = _gpu(gpu_io.read_parquet_strings(path, "text"), PARAMS[0])
        assert np.array_equal(got, minhash_signatures(column))


def _edit(text: str, rng: random.Random) -> str:
    """A near-duplicate: one word in 300 (one character in 3,000 of Japanese) replaced."""
    japanese = text.count(" ") < len(text) / 50
    units = list(text) if japanese else text.split(" ")
    rate = 0.0003 if japanese else 0.003
    return ("" if japanese else " ").join(rng.choice(units) if rng.random() < rate else u
                                          for u in units)


def _clusters(run: Path) -> dict[str, str]:
    kept = pq.read_table(run / "write_parquet", columns=["id", "cluster_id"]).to_pylist()
    gone = pq.read_table(run / "rejected" / "fuzzy_dedup", columns=["id", "cluster_id"])
    return {r["id"]: r["cluster_id"] for r in kept + gone.to_pylist()}


def test_fuzzy_stage_with_cudf_gives_cpu_clusters(tmp_path: Path, monkeypatch) -> None:
    from curator import FuzzyDedup, Pipeline, ReadJsonl, WriteParquet

    rng = random.Random(5)
    docs = sample_documents()
    records = [{"id": f"orig-{i:04d}", "text": d["text"]} for i, d in enumerate(docs)]
    records += [{"id": f"near-{i:04d}", "text": _edit(d["text"], rng)}
                for i, d in list(enumerate(docs))[::4]]
    rng.shuffle(records)
    for n in range(3):
        with open(tmp_path / f"in-{n}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records[n::3])
    reads: list[str] = []
    real_read = gpu_io.read_parquet_strings
    monkeypatch.setattr(gpu_io, "read_parquet_strings",
                        lambda path, name: reads.append(str(path)) or real_read(path, name))
    runs = {}
    for label, device, flag in [("cpu", "cpu", "1"), ("arrow", "gpu", "0"), ("cudf", "gpu", "1")]:
        monkeypatch.setenv("CURATOR_CUDF", flag)
        run = tmp_path / label
        Pipeline([ReadJsonl(path=f"{tmp_path}/in-*.jsonl"),
                  FuzzyDedup(buckets=2, device=device, verify=True), WriteParquet()],
                 name="fuzzy").run(output=run, executor="local", progress=False)
        runs[label] = _clusters(run)
        assert bool(reads) == (label == "cudf")  # cuDF read the parts only when enabled
    assert runs["cudf"] == runs["cpu"] and runs["arrow"] == runs["cpu"]
    assert len(set(runs["cpu"].values())) < len(records)  # near-duplicates were found
