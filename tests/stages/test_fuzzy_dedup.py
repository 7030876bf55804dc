"""Fuzzy dedup as a barrier: near-duplicates of real documents are clustered and distinct ones
are not, the lowest id survives, the result does not depend on the executor, a run cut in the
component rounds resumes to the same output, and the GPU path gives the CPU path's clusters."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from curator import FuzzyDedup, LengthFilter, Pipeline, ReadJsonl, WriteParquet
from tests.conftest import assert_accounting, sample_documents

NGRAM = 24


def _edit(text: str, rate: float, rng: random.Random) -> str:
    """A near-duplicate: about ``rate`` of the words (a tenth of it of the characters, for
    Japanese: a character edit breaks as many 24-character shingles as a word edit) replaced."""
    japanese = text.count(" ") < len(text) / 50
    rate = rate / 10 if japanese else rate
    units = list(text) if japanese else text.split(" ")
    out = [rng.choice(units) if rng.random() < rate else u for u in units]
    return ("" if japanese else " ").join(out)


def _jaccard(a: str, b: str) -> float:
    sa = {a[i:i + NGRAM] for i in range(max(1, len(a) - NGRAM + 1))}
    sb = {b[i:i + NGRAM] for i in range(max(1, len(b) - NGRAM + 1))}
    return len(sa & sb) / len(sa | sb)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """Real documents over 4 files, with near-duplicate variants (0.3 % of words edited)."""
    folder = tmp_path_factory.mktemp("fuzzy-in")
    rng = random.Random(7)
    docs = sample_documents()
    records = [{"id": f"orig-{i:04d}", "text": d["text"]} for i, d in enumerate(docs)]
    variants = {}
    for i, doc in list(enumerate(docs))[::5]:
        vid = f"near-{i:04d}"
        records.append({"id": vid, "text": _edit(doc["text"], 0.003, rng)})
        variants[vid] = f"orig-{i:04d}"
    records.append({"id": "aaa-first", "text": _edit(docs[10]["text"], 0.003, rng)})
    variants["aaa-first"] = "orig-0010"
    rng.shuffle(records)
    for n in range(4):
        with open(folder / f"part-{n}.jsonl", "w", encoding="utf-8") as f:
            for record in records[n::4]:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
    return folder, records, variants


def _pipeline(folder, keep_work: bool = False, **params) -> Pipeline:
    """The component rounds unless ``params`` say otherwise (``whole_graph_edges=0``);
    ``keep_work``: the whole work folder kept after the stage (to cut it as a kill would)."""
    params = {"whole_graph_edges": 0, **params}
    return Pipeline([ReadJsonl(path=f"{folder}/*.jsonl"), LengthFilter(min_chars=1),
                     FuzzyDedup(buckets=3, device="cpu", **params), WriteParquet()],
                    name="fuzzy", keep_work=keep_work)


def _outputs(run) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((run / "write_parquet").iterdir())}


def _clusters(run) -> dict[str, str]:
    """id → cluster_id over kept and rejected documents."""
    kept = pq.read_table(run / "write_parquet", columns=["id", "cluster_id"]).to_pylist()
    gone = pq.read_table(run / "rejected" / "fuzzy_dedup", columns=["id", "cluster_id"])
    return {r["id"]: r["cluster_id"] for r in kept + gone.to_pylist()}


def test_fuzzy_dedup_clusters_near_duplicates_and_keeps_lowest_id(inputs, tmp_path,
                                                                  dask_scheduler):
    folder, records, variants = inputs
    pipeline = _pipeline(folder)
    assert [s.kind for s in pipeline.plan().segments] == ["shard", "dataset", "shard"]
    run = tmp_path / "run"
    pipeline.run(output=run, scheduler=dask_scheduler, progress=False)
    stats = assert_accounting(run)
    kept = pq.read_table(run / "write_parquet").to_pylist()
    rejected = pq.read_table(run / "rejected" / "fuzzy_dedup").to_pylist()
    assert len(kept) + len(rejected) == len(records)
    assert all(r["kept"] for r in kept) and not any(r.get("kept") for r in rejected)
    cluster = _clusters(run)
    # every near-duplicate is clustered with its original
    for vid, oid in variants.items():
        assert cluster[vid] == cluster[oid], vid
    # survivors: the lowest id of each cluster, kept; every other member removed naming it
    members: dict[str, list[str]] = {}
    for doc_id, cid in cluster.items():
        members.setdefault(cid, []).append(doc_id)
    for cid, ids in members.items():
        assert cid == min(ids)
    assert cluster["orig-0010"] == "aaa-first"
    assert {r["id"] for r in kept} == set(members)
    sizes = {r["id"]: r["cluster_size"] for r in kept + rejected}
    for row in rejected:
        assert row["reason"] == "near_duplicate"
        assert row["duplicate_of"] == row["cluster_id"] < row["id"]
        assert row["cluster_size"] == len(members[row["cluster_id"]]) >= 2
    assert all(sizes[r["id"]] == len(members[r["id"]]) for r in kept)
    # distinct documents are not clustered: each removed one truly resembles another member
    text = {r["id"]: r["text"] for r in records}
    for row in rejected:
        best = max(_jaccard(text[row["id"]], text[o]) for o in members[row["cluster_id"]]
                   if o != row["id"])
        assert best >= 0.5, (row["id"], best)
    assert len(rejected) >= len(variants)
    assert stats["stages"][2]["removed_by_reason"] == {"near_duplicate": len(rejected)}


def test_fuzzy_dedup_recomputes_its_graph_from_kept_band_rows_and_is_worker_independent(
        inputs, tmp_path, dask_scheduler):
    """A finished stage keeps its band rows, not its rounds (trimmed); without its record and
    outputs a rerun solves the graph again from the kept rows: the same bytes. (A run cut inside
    the rounds: tests/runtime/test_kill_fuzzy.py.)"""
    folder, _, _ = inputs
    first = tmp_path / "first"
    _pipeline(folder).run(output=first, scheduler=dask_scheduler, progress=False)
    reference = _outputs(first)

    work = first / "_work" / "segment-01"
    assert sorted(p.name for p in work.iterdir()) == ["bands", "out", "remove", "signatures"]
    (first / "_manifests" / "segment-01" / "dataset.json").unlink()
    for phase in ("remove", "out"):
        shutil.rmtree(work / phase)
    shutil.rmtree(first / "write_parquet")
    shutil.rmtree(first / "rejected")
    shutil.rmtree(first / "_manifests" / "segment-02")
    stats = _pipeline(folder).run(output=first, scheduler=dask_scheduler, progress=False).stats
    assert _outputs(first) == reference
    assert_accounting(first)
    phases = stats["reuse"]["segment-01"]["phases"]
    assert phases["signatures"]["reused"] == phases["signatures"]["tasks"] > 0
    assert all(entry["reused"] == 0 for name, entry in phases.items() if name != "signatures")

    single = tmp_path / "single"
    _pipeline(folder).run(output=single, executor="local", progress=False)
    assert _outputs(single) == reference


@pytest.mark.parametrize("graph", ["one-task", "cpu-rounds", "gpu-rounds", "gpu-graph"])
def test_fuzzy_dedup_gpu_gives_cpu_clusters(inputs, tmp_path, monkeypatch, graph):
    """On the GPU: signatures always; component rounds too past GPU_GRAPH_EDGES (0 here); edges
    and components in one GPU task where nothing is verified (``gpu-graph``)."""
    from curator.kernels.minhash_gpu import gpu_available
    from curator.stages.dedup.fuzzy import stage as fuzzy

    if not gpu_available():
        pytest.skip("no GPU")
    if graph == "gpu-rounds":
        monkeypatch.setattr(fuzzy, "GPU_GRAPH_EDGES", 0)
    whole = fuzzy.WHOLE_GRAPH_EDGES if graph in ("one-task", "gpu-graph") else 0
    folder, _, _ = inputs
    runs = {}
    for device in ("cpu", "gpu"):
        run = tmp_path / device
        Pipeline([ReadJsonl(path=f"{folder}/*.jsonl"), LengthFilter(min_chars=1),
                  FuzzyDedup(buckets=3, device=device, verify=graph != "gpu-graph",
                             whole_graph_edges=whole),
                  WriteParquet()], name="fuzzy").run(output=run, executor="local",
                                                     progress=False)
        runs[device] = _clusters(run)
    assert runs["gpu"] == runs["cpu"]


@pytest.fixture(scope="module")
def reference_run(inputs, tmp_path_factory, dask_scheduler):
    folder, _, _ = inputs
    run = tmp_path_factory.mktemp("fuzzy-ref") / "run"
    _pipeline(folder, keep_work=True).run(output=run, scheduler=dask_scheduler, progress=False)
    return run


def _phase_markers(work) -> list:
    """Marker folders of the stage's phases, in the order they run."""
    rounds = sorted(p.name for p in work.glob("cc-r*"))
    order = ["signatures", "edges", *rounds, "labels", "members", "clusters", "remove"]
    return [work / name / "_done" for name in order]


@pytest.mark.parametrize("cut", ["signatures", "edges", "cc-r001", "labels", "members",
                                 "clusters", "remove"])
def test_a_run_killed_in_any_phase_resumes_to_the_same_output(cut, inputs, reference_run,
                                                              tmp_path, dask_scheduler):
    """As after a kill in phase ``cut``: half its tasks done, later phases not committed
    (their stale files left behind), outputs after the barrier missing."""
    folder, _, _ = inputs
    run = tmp_path / "run"
    shutil.copytree(reference_run, run)
    markers = _phase_markers(run / "_work" / "segment-01")
    position = [m.parent.name for m in markers].index(cut)
    done = sorted(markers[position].glob("*.json"))
    for marker in done[::2]:
        marker.unlink()
    for later in markers[position + 1:]:
        shutil.rmtree(later)
    shutil.rmtree(run / "write_parquet")
    shutil.rmtree(run / "_manifests" / "segment-02")
    (run / "stats.json").unlink()
    _pipeline(folder, keep_work=True).run(output=run, scheduler=dask_scheduler, progress=False)
    assert _outputs(run) == _outputs(reference_run)
    assert _clusters(run) == _clusters(reference_run)
    assert_accounting(run)


def test_components_in_one_task_give_the_rounds_clusters_and_resume(inputs, reference_run,
                                                                     tmp_path, dask_scheduler):
    """The default for a small graph: one ``components`` task instead of the rounds, labels,
    members and clusters phases; the same clusters and output, and a run cut before that task
    committed resumes to it."""
    folder, _, _ = inputs
    run = tmp_path / "run"
    pipeline = _pipeline(folder, keep_work=True, whole_graph_edges=10_000)
    pipeline.run(output=run, scheduler=dask_scheduler, progress=False)
    work = run / "_work" / "segment-01"
    assert not [p for p in ("labels", "members") if (work / p).exists()]
    assert not list(work.glob("cc-r*"))
    assert _outputs(run) == _outputs(reference_run)
    assert _clusters(run) == _clusters(reference_run)
    stats = assert_accounting(run)
    reference = json.loads((reference_run / "stats.json").read_text())["stages"][2]["dedup"]
    for fact in ("clusters", "in_clusters", "cluster_sizes", "edges"):
        assert stats["stages"][2]["dedup"][fact] == reference[fact], fact
    assert stats["stages"][2]["dedup"]["component_rounds"] == 0
    assert list(stats["stages"][2]["phases"]) == ["signatures", "edges", "components", "remove"]

    shutil.rmtree(work / "components" / "_done")  # cut before the task's marker
    shutil.rmtree(work / "clusters")
    for later in ("remove", "out"):
        shutil.rmtree(work / later)
    shutil.rmtree(run / "write_parquet")
    shutil.rmtree(run / "_manifests" / "segment-02")
    pipeline.run(output=run, scheduler=dask_scheduler, progress=False)
    assert _outputs(run) == _outputs(reference_run)
    assert_accounting(run)


def test_edges_and_components_in_one_task_give_the_phases_output(inputs, reference_run,
                                                                  tmp_path, monkeypatch,
                                                                  dask_scheduler):
    """The GPU's one-task graph (every bucket's stars, then one union-find), run here by its
    CPU twin: the output, clusters and edge counts of the edges phase and the rounds."""
    from curator.stages.dedup.fuzzy import stage as fuzzy

    monkeypatch.setattr(fuzzy, "ONE_TASK_GRAPH_DEVICES", frozenset({"cpu"}))
    folder, _, _ = inputs
    run = tmp_path / "run"
    _pipeline(folder, whole_graph_edges=10_000).run(output=run, scheduler=dask_scheduler,
                                                     progress=False)
    stage = assert_accounting(run)["stages"][2]
    assert list(stage["phases"]) == ["signatures", "graph", "remove"]
    assert _outputs(run) == _outputs(reference_run)
    assert _clusters(run) == _clusters(reference_run)
    reference = json.loads((reference_run / "stats.json").read_text())["stages"][2]["dedup"]
    for fact in ("candidates", "edges", "clusters", "in_clusters", "cluster_sizes"):
        assert stage["dedup"][fact] == reference[fact], fact
    assert stage["dedup"]["edges"] > 0


def test_components_that_do_not_converge_stop_the_run_in_one_line(inputs, tmp_path):
    folder, _, _ = inputs
    config = tmp_path / "fuzzy.yaml"
    config.write_text(f"""
name: fuzzy
executor: {{type: local}}
stages:
  - {{type: read_jsonl, path: "{folder}/*.jsonl"}}
  - {{type: fuzzy_dedup, buckets: 3, device: cpu, max_rounds: 1, whole_graph_edges: 0}}
  - {{type: write_parquet}}
""")
    done = subprocess.run([sys.executable, "-m", "curator.cli", "run", str(config), "--output",
                           str(tmp_path / "run")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1
    assert "components did not converge in 1 rounds; raise max_rounds" in done.stderr
    assert "Traceback" not in done.stderr
