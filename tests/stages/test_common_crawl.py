"""The common_crawl source against a real HTTP server on 127.0.0.1 laid out as Common Crawl is,
serving the real WARC files of the shared corpus and misbehaving on purpose, run on a real Dask
cluster: retries and resumes are counted on the server, the documents equal a local read."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator import Pipeline
from curator.batch import InputUnavailable, Shard
from curator.io.download_cache import DownloadCache
from curator.stages.sources.common_crawl import CommonCrawl
from curator.stages.writers import WriteParquet
from tests.conftest import ROOT, assert_accounting
from tests.faulty_http import FaultyServer

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "warc"
SNAPSHOT = "CC-MAIN-2099-01"
FILES = {  # fault -> the real WARC file served with it
    "reset": "commoncrawl/resiliparse-cc-excerpt.warc.gz",
    "503": "wget/dolma-sample-0000.warc.gz",
    "429": "commoncrawl/whirlwind.warc.gz",
    "slow": "heritrix/IAH-20080430204825-00000-blackbook-truncated.warc.gz",
    "truncated": "wget/dolma-sample-0001.warc.gz",  # served cut inside a gzip member
    "none": "heritrix/BL-20140325122341434-00000-32090-opera-8443.warc.gz",
}
COLUMNS = ["id", "text", "date", "url", "warc_file", "warc_record_id"]

pytestmark = pytest.mark.skipif(not CORPUS.exists(), reason="shared corpus not staged")


def lay_out(root: Path, files: dict[str, str]) -> dict[str, str]:
    """Common Crawl's layout under ``root``: fault -> served path, and the snapshot's listing."""
    served = {}
    for i, (fault, name) in enumerate(files.items()):
        path = (f"crawl-data/{SNAPSHOT}/segments/1700000000.{i}/warc/"
                f"CC-MAIN-2099010100000-2099010120000-{i:05d}.warc.gz")
        data = (CORPUS / name).read_bytes()
        if fault == "truncated":
            data = data[: len(data) * 2 // 3]
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
        served[fault] = path
    listing = "".join(p + "\n" for p in served.values()).encode()
    (root / f"crawl-data/{SNAPSHOT}/warc.paths.gz").write_bytes(gzip.compress(listing))
    return served


def read_locally(root: Path, paths: list[str]) -> tuple[pa.Table, list]:
    """The documents and failures of reading the served files from disk."""
    from curator.io.warc import read_warc_batches

    tables, failed = [], []
    for i, path in enumerate(paths):
        for batch in read_warc_batches(Shard(i, str(root / path), label=path), 1 << 20,
                                       "common_crawl"):
            failed += batch.failed
            if batch.table.num_rows:
                tables.append(batch.table.select(COLUMNS))
    return pa.concat_tables(tables).sort_by("id"), failed


def source(url: str, **options) -> CommonCrawl:
    return CommonCrawl(snapshots=[SNAPSHOT], base_url=url, base_delay_s=0.01, timeout_s=0.5,
                       **options)


def test_misbehaving_server_retries_resumes_and_loses_nothing(tmp_path, dask_scheduler):
    root = tmp_path / "www"
    served = lay_out(root, {f: name for f, name in FILES.items() if f != "truncated"})
    faults = {served[f]: [f] for f in ("reset", "503", "429", "slow")}
    run1, run2 = tmp_path / "runs" / "run1", tmp_path / "runs" / "run2"
    with FaultyServer(root, faults=faults, stall_s=1.5, retry_after=1) as server:
        Pipeline([source(server.url), WriteParquet()]).run(
            output=run1, scheduler=dask_scheduler, progress=False)
        notes = json.loads((run1 / "stats.json").read_text())["stages"][0]["notes"]
        log = {f: server.requests(p) for f, p in served.items()}
        first = [r for r in server.requests() if r.path.endswith(".warc.gz")]
        # another run beside it shares the cache (.curator-cache in their folder), and --force
        # on a run leaves the cache alone: neither fetches a WARC file again
        Pipeline([source(server.url), WriteParquet()]).run(
            output=run2, scheduler=dask_scheduler, progress=False)
        Pipeline([source(server.url), WriteParquet()]).run(
            output=run1, scheduler=dask_scheduler, progress=False, force=True)
        again = [r for r in server.requests() if r.path.endswith(".warc.gz")]

    statuses = {f: [r.status for r in requests] for f, requests in log.items()}
    assert statuses == {"reset": [200, 206], "503": [503, 200], "429": [429, 200],
                        "slow": [200, 206], "none": [200]}
    for fault in ("reset", "slow"):  # resumed from where the cut transfer stopped
        start = int(log[fault][1].range.removeprefix("bytes=").rstrip("-"))
        assert 0 < start < (root / served[fault]).stat().st_size
    assert log["429"][1].at - log["429"][0].at >= 0.95  # Retry-After: 1, backoff 0.01 s
    assert len(again) == len(first) == 9  # the later runs added none

    expected, local_failures = read_locally(root, list(served.values()))
    assert local_failures == []
    for run in (run1, run2):
        stats = assert_accounting(run)
        got = pq.read_table(run / "write_parquet").select(COLUMNS).sort_by("id")
        assert got.equals(expected)
        assert set(pq.read_table(run / "write_parquet").column("source").to_pylist()) == {
            "common_crawl"}
        cc = stats["stages"][0]
        assert cc["failed"] == 0 and cc["in"] == cc["kept"] == expected.num_rows
        assert cc["notes"]["cached"] == 5 and "downloaded" not in cc["notes"]
    assert notes["downloaded"] == 5 and notes["resumed_requests"] == 2
    assert "cached" not in notes and "damaged_in_cache" not in notes
    cache = DownloadCache(tmp_path / "runs" / ".curator-cache")  # beside the runs, not in them
    assert cache.path(server.url + served["none"]).read_bytes() == (
        root / served["none"]).read_bytes()
    assert not (run1 / "downloads").exists()


def test_a_file_that_cannot_be_had_leaves_its_shard_unavailable(tmp_path):
    root = tmp_path / "www"
    served = lay_out(root, {"missing": FILES["none"], "truncated": FILES["truncated"]})
    (root / served["missing"]).unlink()
    with FaultyServer(root) as server:
        cc = source(server.url)
        missing, truncated = cc.shards()
        for _ in range(2):  # a second run tries again: nothing was kept of either
            with pytest.raises(InputUnavailable) as err:
                list(cc.read_in_run(missing, 1 << 20, tmp_path / "runs" / "cc"))
            assert (err.value.url, err.value.error) == (missing.path, "HTTP 404 Not Found")
            assert err.value.reason == "download_failed"
            assert str(err.value) == f"{server.url}{served['missing']}: HTTP 404 Not Found"
            with pytest.raises(InputUnavailable) as err:
                list(cc.read_in_run(truncated, 1 << 20, tmp_path / "runs" / "cc"))
            assert err.value.url == truncated.path and err.value.error == (
                "served damaged twice: truncated gzip member at the end of the file")
        # outside a run, through the cache_dir given
        with pytest.raises(InputUnavailable, match="HTTP 404"):
            list(source(server.url, cache_dir=str(tmp_path / "c")).read(missing, 1 << 20))
        with pytest.raises(ValueError, match="cache_dir is needed outside a run"):
            list(cc.read(missing, 1 << 20))
        assert [r.status for r in server.requests(served["missing"])] == [404] * 3
        assert len(server.requests(served["truncated"])) == 2 * 2


# for full runs through the command line
def write_config(path: Path, url: str, output: Path, **extra) -> None:
    stage = {"type": "common_crawl", "snapshots": [SNAPSHOT], "base_url": url,
             "max_tries": 3, "base_delay_s": 0.01, "timeout_s": 2}
    path.write_text(json.dumps({"name": "cc", "output": str(output), **extra,
                                "stages": [stage, {"type": "write_parquet"}]}))


def curate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "curator.cli", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=120)


def test_choice_of_files_is_deterministic(tmp_path):
    root = tmp_path / "www"
    paths = [f"crawl-data/{SNAPSHOT}/segments/{i}/warc/f-{i:05d}.warc.gz" for i in range(40)]
    (root / f"crawl-data/{SNAPSHOT}").mkdir(parents=True)
    (root / f"crawl-data/{SNAPSHOT}/warc.paths.gz").write_bytes(
        gzip.compress("".join(p + "\n" for p in paths).encode()))
    other = "CC-MAIN-2099-02"
    (root / f"crawl-data/{other}").mkdir(parents=True)
    (root / f"crawl-data/{other}/warc.paths.gz").write_bytes(gzip.compress(b"a\nb\nc\n"))
    with FaultyServer(root) as server:
        def labels(**options) -> list[str]:
            return [s.label for s in source(server.url, **options).shards()]

        assert labels(files="4:8") == paths[4:8]
        assert labels(max_files=3) == paths[:3]
        sampled = labels(sample=5, seed=7)
        assert sampled == labels(sample=5, seed=7) != labels(sample=5, seed=8)
        order = [paths.index(p) for p in sampled]  # in listing order
        assert len(sampled) == 5 and order == sorted(order)
        assert all(paths.index(p) >= 10 for p in labels(files="10:", sample=3, seed=1))
        assert all(s.path == server.url + s.label for s in source(server.url).shards())
        two = CommonCrawl(snapshots=[SNAPSHOT, other], base_url=server.url, max_files=2)
        assert [(s.index, s.label) for s in two.shards()] == [
            (0, paths[0]), (1, paths[1]), (2, "a"), (3, "b")]  # max_files per snapshot
    with pytest.raises(ValueError, match="START:STOP"):
        CommonCrawl(snapshots=[SNAPSHOT], files="8")
