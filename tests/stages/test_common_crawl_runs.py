"""Whole `curate run`s of the common_crawl source against a real HTTP server on 127.0.0.1 serving
WARC files built here: a file the mirror cannot serve leaves its shard not done (exit 1, named
with its URL in the error, stats.json and the report) and the next run fetches only it; the
download cache outlives `--force`; a run killed inside a download resumes to the same bytes."""

from __future__ import annotations

import gzip
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, assert_accounting
from tests.faulty_http import FaultyServer
from tests.published import shard_parts
from tests.runtime import killing
from tests.warc_builder import write_warc

pytest.importorskip("fastwarc")
SNAPSHOT = "CC-MAIN-2099-05"
N_FILES = 4
WORDS = ["river", "stone", "lantern", "orchard", "harbor", "meadow", "signal", "copper",
         "violet", "thunder", "garden", "station", "letter", "bridge", "market", "winter",
         "candle", "mirror", "forest", "engine"]


def _page(rng: random.Random, n: int) -> bytes:
    paragraphs = "".join(f"<p>{' '.join(rng.choices(WORDS, k=60))} {rng.random()}</p>"
                         for _ in range(4))
    return f"<html><head><title>page {n}</title></head><body>{paragraphs}</body></html>".encode()


def lay_out(root: Path) -> list[str]:
    """``N_FILES`` WARC files of unique pages in Common Crawl's layout; their paths."""
    rng, paths = random.Random(5), []
    for i in range(N_FILES):
        path = f"crawl-data/{SNAPSHOT}/segments/1.{i}/warc/CC-MAIN-{i:05d}.warc.gz"
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        pages = [(f"https://example.org/{i}/{n}", _page(rng, n), "text/html") for n in range(25)]
        write_warc(root / path, pages)
        paths.append(path)
    listing = gzip.compress("".join(p + "\n" for p in paths).encode())
    (root / f"crawl-data/{SNAPSHOT}/warc.paths.gz").write_bytes(listing)
    return paths


def write_config(folder: Path, url: str) -> Path:
    stage = {"type": "common_crawl", "snapshots": [SNAPSHOT], "base_url": url, "max_tries": 2,
             "base_delay_s": 0.01, "timeout_s": 5}
    path = folder / "cc.json"
    path.write_text(json.dumps({"name": "cc", "executor": {"type": "dask", "workers": 2},
                                "stages": [stage, {"type": "write_parquet"}]}))
    return path


def curate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "curator.cli", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=300)


def warc_requests(server: FaultyServer) -> list[str]:
    return [r.path for r in server.requests() if r.path.endswith(".warc.gz")]


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    base = tmp_path_factory.mktemp("cc-runs")
    paths = lay_out(base / "www")
    with FaultyServer(base / "www") as server:
        config = write_config(base, server.url)
        reference = base / "ref" / "run"  # its own parent: its own cache
        done = curate("run", str(config), "--output", str(reference))
        assert done.returncode == 0, done.stderr
        yield server, paths, config, reference


def test_a_file_the_mirror_cannot_serve_is_left_and_the_next_run_fetches_only_it(mirror,
                                                                                 tmp_path):
    server, paths, config, reference = mirror
    run_dir = tmp_path / "runs" / "cc"
    broken = paths[2]
    server.always[broken] = "404"
    try:
        failed = curate("run", str(config), "--output", str(run_dir))
    finally:
        del server.always[broken]
    assert failed.returncode == 1, failed.stderr
    error = failed.stderr[failed.stderr.index("error:"):]
    assert "1 shard(s) left not done" in error and paths[2] in error and "404" in error
    assert server.url + broken in error
    stats = json.loads((run_dir / "stats.json").read_text())
    assert [(x["label"], x["reason"]) for x in stats["left"]] == [(paths[2], "download_failed")]
    assert "Not complete: 1 shards left" in (run_dir / "report.html").read_text()
    assert len(shard_parts(run_dir)) == len(paths) - 1  # the broken one has no manifest

    before = len(server.requests())
    resumed = curate("run", str(config), "--output", str(run_dir))
    assert resumed.returncode == 0, resumed.stderr
    fetched = [r.path for r in server.requests()[before:] if r.path.endswith(".warc.gz")]
    assert fetched == [broken]
    assert killing.differences(run_dir, reference) == []
    assert "left" not in json.loads((run_dir / "stats.json").read_text())
    assert_accounting(run_dir)


def test_force_recomputes_without_downloading_again(mirror, tmp_path):
    server, _paths, config, reference = mirror
    run_dir = tmp_path / "runs" / "cc"
    assert curate("run", str(config), "--output", str(run_dir)).returncode == 0
    assert (tmp_path / "runs" / ".curator-cache").is_dir() and not (run_dir / "downloads").exists()
    before = len(warc_requests(server))
    forced = curate("run", str(config), "--output", str(run_dir), "--force")
    assert forced.returncode == 0, forced.stderr
    assert len(warc_requests(server)) == before
    # the same bytes; the manifests and stats differ only in the notes "downloaded" / "cached"
    assert killing.outputs(run_dir) == killing.outputs(reference)


def test_a_run_killed_inside_a_download_resumes_to_the_same_bytes(mirror, tmp_path):
    _server, _paths, config, reference = mirror
    run_dir = tmp_path / "runs" / "cc"
    killing.kill_at(config, run_dir, "download@2", tmp_path / "run.log")
    partials = list((tmp_path / "runs" / ".curator-cache").rglob(".*.part"))
    assert partials, "the kill did not land inside a download"
    killing.run(config, run_dir, tmp_path / "resumed.log")
    assert killing.outputs(run_dir) == killing.outputs(reference)
    assert_accounting(run_dir)
    shutil.rmtree(tmp_path / "runs")
