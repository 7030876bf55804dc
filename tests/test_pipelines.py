"""The shipped pipelines: every pipelines/*.yaml validates offline and the task files it names are
bundled; the demo (sample.yaml: real WARC → ... → Megatron shards) runs through `curate run` on a
real Dask LocalCluster, and megatron-core's own reader reads back exactly the curated pages."""

from __future__ import annotations

import glob
import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import ROOT, assert_accounting
from tests.faulty_http import FaultyServer

PIPELINES = sorted((ROOT / "pipelines").glob("*.yaml"))
#: Quality-selection recipes whose models their headers fetch or train: validated with those
#: built or with stand-ins (tests/test_recipes.py).
RECIPES = ("ja_edu", "fineweb_edu", "dclm", "nemotron_cc")

# Run the CLI with every outgoing connection and name lookup refused: validating must not touch
# the network (cc.yaml's common_crawl lists its WARC files only when it runs).
_OFFLINE_CLI = """
import socket, sys
def _refuse(*args, **kwargs):
    raise OSError("network used while validating")
socket.socket.connect = socket.socket.connect_ex = _refuse
socket.getaddrinfo = socket.create_connection = _refuse
from curator.cli import app
sys.argv = ["curate", *sys.argv[1:]]
app()
"""


def _curate(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "curator.cli", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=timeout)


def test_the_pipelines_are_shipped():
    names = {p.stem for p in PIPELINES}
    assert {"sample", "cc", "ja", "wikipedia", "arxiv", "mix"} <= names


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> Path:
    """A small tokenizer trained by `curate tokenizer train`, as the pipelines' headers say (the
    demo trains an 8192 one on the same files; smaller is quicker here)."""
    out = tmp_path_factory.mktemp("tokenizer")
    trained = _curate("tokenizer", "train", "data/sample/inaugural.jsonl.gz",
                      "--vocab-size", "1024", "--output", str(out))
    assert trained.returncode == 0, trained.stderr
    return out / "tokenizer.json"


@pytest.mark.parametrize("config", [p for p in PIPELINES if p.stem not in RECIPES],
                         ids=[p.stem for p in PIPELINES if p.stem not in RECIPES])
def test_every_pipeline_validates_offline(config, tokenizer):
    # A missing tokenizer file is refused at validation: give the trained one to each stage.
    sets = [f"--set={stage.get('name', stage['type'])}.tokenizer={tokenizer}"
            for stage in yaml.safe_load(config.read_text())["stages"]
            if stage["type"] in ("tokenize", "pack")]
    result = subprocess.run([sys.executable, "-c", _OFFLINE_CLI, "validate", str(config), *sets],
                            cwd=ROOT, text=True, capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "valid pipeline" in result.stdout + result.stderr  # rich console: stderr


@pytest.mark.parametrize("config", PIPELINES, ids=[p.stem for p in PIPELINES])
def test_decontamination_task_files_are_bundled(config):
    stages = yaml.safe_load(config.read_text())["stages"]
    for stage in stages:
        for task in stage.get("tasks", []) if stage["type"] == "decontaminate" else []:
            assert glob.glob(str(ROOT / task["path"])), f"{config.name}: {task['path']} missing"


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory, tokenizer):
    """`curate run pipelines/sample.yaml` with the small tokenizer."""
    base = tmp_path_factory.mktemp("sample")
    run = _curate("run", "pipelines/sample.yaml", "--set", f"tokenize.tokenizer={tokenizer}",
                  "--output", str(base / "run"), timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return base / "run", tokenizer, run.stdout + run.stderr


def test_sample_runs_warc_to_megatron_shards_and_says_where(sample_run):
    run_dir, _, stdout = sample_run
    stats = assert_accounting(run_dir)
    by_name = {s["name"]: s for s in stats["stages"]}
    assert list(by_name) == ["read_warc", "langid_html", "extract_html", "langid", "clean",
                             "heuristic_filter", "exact_dedup", "fuzzy_dedup", "decontaminate",
                             "write_parquet", "tokenize"]
    assert by_name["read_warc"]["in"] >= 90          # the real HTML responses of the sample
    assert by_name["langid_html"]["removed"] > 0     # Chinese, Dutch, ... pages go before
    assert by_name["langid"]["removed"] > 0          # extraction, and after it
    assert by_name["heuristic_filter"]["removed"] > 0
    tokens = run_dir / "tokens"
    shards = re.search(r"Megatron shards \(tokenize\): (\S+)", stdout)
    assert shards and shards.group(1) == str(tokens), stdout[-2000:]
    report = re.search(r"report: (\S+)", stdout)
    assert report and (run_dir / "report.html").samefile(report.group(1))
    kept = pq.read_table(sorted((run_dir / "write_parquet").glob("part-*.parquet"))).to_pylist()
    assert {d["lang"] for d in kept} == {"en", "ja"}
    assert len(kept) == by_name["tokenize"]["kept"] == by_name["tokenize"]["documents"]
    # what a trainer buys: tokens per language, in the terminal and the report
    by_source = {source: sum(v["tokens"] for v in splits.values())
                 for source, splits in by_name["tokenize"]["by_source"].items()}
    assert set(by_source) == {"en", "ja"}
    line = re.search(r"tokens by source: (.+)", stdout)
    assert line, stdout[-2000:]
    for source, n in by_source.items():
        share = n / by_name["tokenize"]["tokens"]
        assert f"{source} {n:,} ({share:.1%})" in line.group(1)
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "<h2>Tokens: tokenize</h2>" in page and f"<td>{by_source['ja']:,}</td>" in page


def test_the_demo_report_in_a_browser_shows_tokens_per_language_and_split(sample_run, tmp_path):
    """The demo's report.html rendered by headless Chromium: its tokens table (per language and
    split) and compute table equal stats.json; a screenshot (skipped without Chromium)."""
    from tests.report import test_report_browser_tokens as browser

    if browser.CHROMIUM is None:
        pytest.skip("no chromium binary on PATH")
    run_dir, _, _ = sample_run
    stats = json.loads((run_dir / "stats.json").read_text())
    tokenize = next(s for s in stats["stages"] if s["type"] == "tokenize")
    markup, text = browser._page(run_dir)
    shown = browser._tokens_table(markup, "tokenize")
    assert shown == browser._expected(tokenize) and {source for source, _ in shown} == {"en", "ja"}
    assert "CPU-hours" in text and "node-hours" in text
    browser.screenshot(run_dir / "report.html", tmp_path / "demo.png")


def test_megatron_core_reads_the_curated_pages_back(sample_run):
    pytest.importorskip("torch")
    from megatron.core.datasets.indexed_dataset import IndexedDataset
    from tokenizers import Tokenizer

    run_dir, tokenizer_path, _ = sample_run
    blend = json.loads((run_dir / "tokens" / "blend.json").read_text())
    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    eod = tokenizer.token_to_id("<|endoftext|>")
    assert set(blend["splits"]["train"]["sources"]) == {"en", "ja"}  # one entry per language
    read = []
    for shard in [shard for source in blend["splits"]["train"]["sources"].values()
                  for shard in source["shards"]]:
        dataset = IndexedDataset(shard["prefix"])
        assert len(dataset) == shard["documents"]
        docs = [dataset[i] for i in range(len(dataset))]
        assert sum(len(d) for d in docs) == shard["tokens"]
        assert all(int(d[-1]) == eod for d in docs)
        read += [tokenizer.decode([int(t) for t in d[:-1]]) for d in docs]
    kept = pq.read_table(run_dir / "write_parquet", columns=["text"]).column("text").to_pylist()
    assert sorted(read) == sorted(kept)


def test_cc_runs_as_shipped_against_a_mirror(sample_run, tmp_path):
    """cc.yaml unchanged but for `--set common_crawl.base_url=URL` (and the tokenizer): a real
    HTTP server on 127.0.0.1 laid out as Common Crawl is, serving two of the bundled WARC files
    as the snapshot cc.yaml names; the pages reach the Megatron shards, both languages."""
    _, tokenizer, _ = sample_run
    [snapshot] = yaml.safe_load((ROOT / "pipelines" / "cc.yaml").read_text())["stages"][0][
        "snapshots"]
    root = tmp_path / "www"
    served = []
    for i, name in enumerate(["dolma-sample-0001.warc.gz", "ja-pages.warc.gz"]):
        path = f"crawl-data/{snapshot}/segments/1.{i}/warc/{snapshot}-{i:05d}.warc.gz"
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes((ROOT / "data" / "sample" / "warc" / name).read_bytes())
        served.append(path)
    (root / f"crawl-data/{snapshot}/warc.paths.gz").write_bytes(
        gzip.compress("".join(p + "\n" for p in served).encode()))
    with FaultyServer(root) as server:
        run = _curate("run", "pipelines/cc.yaml", "--set", f"common_crawl.base_url={server.url}",
                      "--set", f"tokenize.tokenizer={tokenizer}", "--output", str(tmp_path / "cc"),
                      "--workers", "2", timeout=300)
        requested = {path for path in served if server.requests(path)}
    assert run.returncode == 0, run.stderr[-3000:]
    assert requested == set(served)
    stats = assert_accounting(tmp_path / "cc")
    tokenize = stats["stages"][-1]
    assert tokenize["name"] == "tokenize" and tokenize["tokens"] > 0
    assert set(tokenize["by_source"]) == {"en", "ja"}  # cc.yaml blends per language
