"""Exact dedup as a barrier: every exact duplicate found, no false one, survivors recorded,
phases resumable, same result with one or two workers."""

from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest

from curator import ExactDedup, LengthFilter, Pipeline, ReadJsonl, WriteParquet
from curator.stages.dedup.exact import normalise_text
from tests.conftest import assert_accounting, sample_documents


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Real documents spread over 5 files, with exact copies and case/whitespace variants."""
    folder = tmp_path_factory.mktemp("dedup-in")
    docs = sample_documents()
    records = [{"id": f"orig-{i:04d}", "text": d["text"]} for i, d in enumerate(docs)]
    for i, doc in enumerate(docs[::4]):
        records.append({"id": f"copy-{i:04d}", "text": doc["text"]})
    for i, doc in enumerate(docs[1::6]):
        records.append({"id": f"variant-{i:04d}", "text": "  " + doc["text"].upper() + "\n\n"})
    records.append({"id": "aaa-first", "text": docs[10]["text"]})  # lowest id: the survivor
    for n in range(5):
        with open(folder / f"part-{n}.jsonl", "w", encoding="utf-8") as f:
            for record in records[n::5]:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return folder, records


def _pipeline(folder) -> Pipeline:
    return Pipeline([ReadJsonl(path=f"{folder}/*.jsonl"), LengthFilter(min_chars=1),
                     ExactDedup(buckets=3), WriteParquet()], name="exact")


def _expected_survivors(records) -> dict[str, str]:
    """Ground truth by brute force: normalised text → lowest id."""
    import pyarrow as pa

    texts = normalise_text(pa.array([r["text"] for r in records])).to_pylist()
    best: dict[str, str] = {}
    for record, text in zip(records, texts, strict=True):
        best[text] = min(best.get(text, record["id"]), record["id"])
    return best


def test_exact_dedup_finds_every_duplicate_and_no_false_one(inputs, tmp_path, dask_scheduler):
    folder, records = inputs
    pipeline = _pipeline(folder)
    assert [s.kind for s in pipeline.plan().segments] == ["shard", "dataset", "shard"]
    pipeline.run(output=tmp_path / "run", scheduler=dask_scheduler, progress=False)
    stats = assert_accounting(tmp_path / "run")
    kept = set(pq.read_table(tmp_path / "run" / "write_parquet").column("id").to_pylist())
    survivors = _expected_survivors(records)
    assert kept == set(survivors.values())
    assert "aaa-first" in kept
    rejected = pq.read_table(tmp_path / "run" / "rejected" / "exact_dedup").to_pylist()
    assert len(rejected) == len(records) - len(kept)
    by_id = {r["id"]: r for r in records}
    texts = dict(zip([r["id"] for r in records], normalise_text(
        __import__("pyarrow").array([r["text"] for r in records])).to_pylist(), strict=True))
    for row in rejected:
        assert row["reason"] == "exact_duplicate"
        assert row["duplicate_of"] in kept and row["duplicate_of"] < row["id"]
        assert texts[row["duplicate_of"]] == texts[row["id"]]
    assert stats["stages"][2]["removed_by_reason"] == {"exact_duplicate": len(rejected)}
    assert len(by_id) == len(records)


def test_exact_dedup_resumes_a_cut_phase_and_is_worker_independent(inputs, tmp_path):
    folder, _ = inputs
    first = tmp_path / "first"
    _pipeline(folder).run(output=first, executor="dask", workers=2, progress=False)
    reference = {p.name: p.read_bytes() for p in (first / "write_parquet").iterdir()}

    # Cut the run inside the barrier: the last phase and everything after it are lost.
    work = first / "_work" / "segment-01"
    shutil.rmtree(work / "remove")
    shutil.rmtree(work / "out")
    shutil.rmtree(first / "write_parquet")
    shutil.rmtree(first / "_manifests" / "segment-02")
    _pipeline(folder).run(output=first, executor="dask", workers=2, progress=False)
    assert {p.name: p.read_bytes() for p in (first / "write_parquet").iterdir()} == reference
    assert_accounting(first)

    single = tmp_path / "single"
    _pipeline(folder).run(output=single, executor="local", progress=False)
    assert {p.name: p.read_bytes() for p in (single / "write_parquet").iterdir()} == reference


def test_score_field_keeps_the_best_scored_copy_and_md5_agrees(tmp_path):
    docs = sample_documents()[:20]
    folder = tmp_path / "in"
    folder.mkdir()
    with open(folder / "a.jsonl", "w", encoding="utf-8") as f:
        for i, doc in enumerate(docs):
            for copy, quality in enumerate((0.2, 0.9, 0.5)):
                f.write(json.dumps({"id": f"d{i:02d}-c{copy}", "text": doc["text"],
                                    "quality": quality + i / 100}) + "\n")
    kept = {}
    for algorithm in ("xxh3_128", "md5"):
        out = tmp_path / algorithm
        Pipeline([ReadJsonl(path=str(folder / "*.jsonl")),
                  ExactDedup(score_field="quality", algorithm=algorithm), WriteParquet()]
                 ).run(output=out, executor="local", progress=False)
        assert_accounting(out)
        kept[algorithm] = sorted(pq.read_table(out / "write_parquet").column("id").to_pylist())
    assert kept["xxh3_128"] == kept["md5"] == [f"d{i:02d}-c1" for i in range(len(docs))]


def _rows(run) -> dict[str, list]:
    """Kept and removed documents of a run, sorted by id, and the bytes of every output file."""
    kept = pq.read_table(run / "write_parquet").sort_by("id").to_pylist()
    removed = pq.read_table(run / "rejected" / "exact_dedup").sort_by("id").to_pylist()
    files = {str(p.relative_to(run)): p.read_bytes()
             for folder in ("write_parquet", "rejected") for p in sorted((run / folder).rglob("*"))
             if p.is_file()}
    return {"kept": kept, "removed": removed, "files": files}


def test_bulk_hash_gives_the_per_document_loop_output(inputs, tmp_path, dask_scheduler):
    """The bulk kernel (the default), the former per-document loop and md5: the same kept and
    removed documents, the same bytes, lowest id surviving (a real Dask cluster)."""
    folder, records = inputs
    runs = {}
    for algorithm in ("xxh3_128", "xxh3_128_loop", "md5"):
        pipeline = Pipeline([ReadJsonl(path=f"{folder}/*.jsonl"), LengthFilter(min_chars=1),
                             ExactDedup(buckets=3, algorithm=algorithm, device="cpu"),
                             WriteParquet()], name="exact")
        stats = pipeline.run(output=tmp_path / algorithm, scheduler=dask_scheduler,
                             progress=False).stats
        facts = stats["stages"][2]["dedup"]
        assert (facts["algorithm"], facts["device"]) == (algorithm, "cpu")
        assert sum((int(k) - 1) * n for k, n in facts["cluster_sizes"].items()) == \
            stats["stages"][2]["removed"]  # every cluster but its survivor is removed
        runs[algorithm] = _rows(tmp_path / algorithm)
    assert runs["xxh3_128"] == runs["xxh3_128_loop"]
    assert runs["xxh3_128"]["kept"] == runs["md5"]["kept"]
    assert runs["xxh3_128"]["removed"] == runs["md5"]["removed"]
    assert {r["id"] for r in runs["xxh3_128"]["kept"]} == set(_expected_survivors(records).values())


def test_device_placement():
    auto = ExactDedup()
    assert auto.for_cluster(gpus=False).device == "cpu"
    assert auto.for_cluster(gpus=True).device == "cpu"  # the GPU does not pay here (measured)
    assert auto.fingerprint() == ExactDedup(device="gpu").fingerprint()  # placement only
    assert ExactDedup(algorithm="md5").for_cluster(gpus=True).device == "cpu"
    assert ExactDedup(device="gpu").resources() == {"GPU": 1}
    assert ExactDedup(device="cpu").resources() == {}
    with pytest.raises(ValueError, match="xxh3_128 only"):
        ExactDedup(device="gpu", algorithm="md5")
