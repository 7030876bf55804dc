"""The download cache against a real HTTP server on 127.0.0.1, with real WARC files, and other
processes fetching and reading at the same time (synchronised through their pipes, not clocks)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from curator.cli_gc import gc, parse_size
from curator.commit import checksum
from curator.io.download import RetryPolicy
from curator.io.download_cache import DownloadCache, default_cache_dir
from tests.conftest import ROOT
from tests.faulty_http import FaultyServer

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
WARC = CORPUS / "warc" / "wget" / "dolma-sample-0000.warc.gz"
FAST = RetryPolicy(max_tries=3, base_delay_s=0.01, max_delay_s=1.0, timeout_s=5.0)
NAMES = [f"crawl-data/CC-MAIN-2099-01/segments/1/warc/{c}.warc.gz" for c in "abc"]
NAME = NAMES[0]

pytestmark = pytest.mark.skipif(not WARC.exists(), reason="shared corpus not staged")

# A second process: "fetch" waits for a line on stdin, fetches and prints what it got;
# "read" holds the file open for reading until a line arrives on stdin.
CHILD = """
import json, sys
from pathlib import Path
from curator.io.download import RetryPolicy
from curator.io.download_cache import DownloadCache
mode, root, url = sys.argv[1:4]
cache = DownloadCache(Path(root))
print("ready", flush=True)
if mode == "fetch":
    sys.stdin.readline()
    got = cache.fetch(url, RetryPolicy(max_tries=3, base_delay_s=0.01))
    print(json.dumps({"cached": got.cached, "requests": got.requests, "path": str(got.path)}))
else:
    with cache.reading(url) as path:
        print("holding", path, flush=True)
        sys.stdin.readline()
"""


def child(mode: str, root: Path, url: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, mode, str(root), url], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"
    return proc


@pytest.fixture
def served(tmp_path: Path) -> Path:
    root = tmp_path / "www"
    for name in NAMES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(WARC, root / name)
    return root


@pytest.fixture
def cache(tmp_path: Path) -> DownloadCache:
    return DownloadCache(tmp_path / ".curator-cache")


def test_second_fetch_makes_no_request(served: Path, cache: DownloadCache) -> None:
    with FaultyServer(served) as server:
        url = server.url + NAME
        first = cache.fetch(url, FAST)
        second = cache.fetch(url, FAST)
        assert len(server.requests()) == 1
    assert not first.cached and first.requests == 1
    assert second.cached and second.requests == 0 and second.damaged_in_cache == 0
    assert second.path == cache.path(url) == cache.folder(url) / "a.warc.gz"
    assert cache.folder(url).parent.name == cache.folder(url).name[:2]
    entry = json.loads((cache.folder(url) / "entry.json").read_text())
    stat = second.path.stat()
    assert entry["url"] == url and entry["bytes"] == WARC.stat().st_size
    assert entry["xxh3_128"] == checksum(WARC)
    assert (entry["mtime_ns"], entry["inode"]) == (stat.st_mtime_ns, stat.st_ino)
    assert second.path.read_bytes() == WARC.read_bytes()


def test_touched_file_is_checksummed_and_kept(served: Path, cache: DownloadCache) -> None:
    with FaultyServer(served) as server:
        url = server.url + NAME
        path = cache.fetch(url, FAST).path
        os.utime(path, ns=(1, 1))  # same bytes, other stat facts: checksummed, then trusted
        again = cache.fetch(url, FAST)
        assert len(server.requests()) == 1
    assert again.cached and again.damaged_in_cache == 0
    assert json.loads((cache.folder(url) / "entry.json").read_text())["mtime_ns"] == 1


def test_same_size_corruption_is_fetched_again(served: Path, cache: DownloadCache) -> None:
    with FaultyServer(served) as server:
        url = server.url + NAME
        path = cache.fetch(url, FAST).path
        with open(path, "r+b") as f:  # 16 bytes flipped in place: same size, same inode
            f.seek(path.stat().st_size // 2)
            data = f.read(16)
            f.seek(-16, os.SEEK_CUR)
            f.write(bytes(b ^ 0xFF for b in data))
        assert path.stat().st_size == WARC.stat().st_size
        again = cache.fetch(url, FAST)
        assert len(server.requests()) == 2
    assert not again.cached and again.damaged_in_cache == 1
    assert again.errors[0] == "the cached file differs from its record; fetched again"
    assert path.read_bytes() == WARC.read_bytes()
    assert cache.fetch(url, FAST).cached  # recorded again


def test_deleted_file_is_fetched_again(served: Path, cache: DownloadCache) -> None:
    with FaultyServer(served) as server:
        url = server.url + NAME
        cache.fetch(url, FAST).path.unlink()
        again = cache.fetch(url, FAST)
        assert len(server.requests()) == 2
    assert not again.cached and again.damaged_in_cache == 1
    assert again.path.read_bytes() == WARC.read_bytes()


def test_file_without_record_is_fetched_again(served: Path, cache: DownloadCache) -> None:
    # a download killed between renaming its file into place and writing entry.json: the file
    # is not trusted (no checksum to compare; a crash may have lost its unsynced bytes)
    with FaultyServer(served) as server:
        url = server.url + NAME
        cache.fetch(url, FAST)
        (cache.folder(url) / "entry.json").unlink()
        again = cache.fetch(url, FAST)
        assert len(server.requests()) == 2
    assert not again.cached and again.damaged_in_cache == 0
    assert (cache.folder(url) / "entry.json").exists()


def test_file_served_damaged_is_not_recorded(served: Path, cache: DownloadCache) -> None:
    (served / NAME).write_bytes(WARC.read_bytes()[: WARC.stat().st_size // 2])
    with FaultyServer(served) as server:
        url = server.url + NAME
        first = cache.fetch(url, FAST)
        second = cache.fetch(url, FAST)
        assert len(server.requests()) == 4  # twice each: the damage is the server's
    assert first.damaged == second.damaged == "truncated gzip member at the end of the file"
    assert not (cache.folder(url) / "entry.json").exists()
    with pytest.raises(FileNotFoundError, match="not in the cache"), cache.reading(url):
        pass


def test_two_processes_fetching_at_once_make_one_request(served: Path,
                                                        cache: DownloadCache) -> None:
    with FaultyServer(served, faults={NAME: ["pause"]}, stall_s=0.5) as server:
        url = server.url + NAME
        procs = [child("fetch", cache.root, url) for _ in range(2)]
        for proc in procs:  # both are started and waiting: let them go together
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = [json.loads(proc.communicate(timeout=60)[0]) for proc in procs]
        assert [proc.returncode for proc in procs] == [0, 0]
        assert len(server.requests()) == 1
    assert sorted(r["cached"] for r in results) == [False, True]
    assert sum(r["requests"] for r in results) == 1
    assert {r["path"] for r in results} == {str(cache.path(url))}
    assert cache.path(url).read_bytes() == WARC.read_bytes()


def fill(cache: DownloadCache, server: FaultyServer) -> list[str]:
    """The three files cached, used in the order a, b, c (stamps set, not left to the clock)."""
    urls = [server.url + name for name in NAMES]
    for i, url in enumerate(urls):
        cache.fetch(url, FAST)
        os.utime(cache.folder(url) / "entry.json", ns=(10**9 * (i + 1),) * 2)
    return urls


def test_gc_evicts_least_recently_used(served: Path, cache: DownloadCache) -> None:
    size = WARC.stat().st_size
    with FaultyServer(served) as server:
        a, b, c = fill(cache, server)
        assert cache.fetch(a, FAST).cached  # a used again: now the newest
        unbounded = cache.gc()
        report = cache.gc(max_bytes=2 * size)
        assert len(server.requests()) == 3
    assert (unbounded.entries_kept, unbounded.entries_removed) == (3, 0)
    assert unbounded.leftovers_removed == 3  # the downloads' own lock files
    assert (report.entries_kept, report.entries_removed) == (2, 1)
    assert report.bytes_freed == size and report.bytes_kept == 2 * size
    assert not cache.folder(b).exists() and not cache.path(b).exists()
    assert cache.path(a).exists() and cache.path(c).exists()
    assert cache.gc(max_bytes=0).entries_removed == 2
    assert list(cache.root.iterdir()) == []


def test_gc_never_evicts_a_file_another_process_reads(served: Path,
                                                     cache: DownloadCache) -> None:
    with FaultyServer(served) as server:
        a, b, c = fill(cache, server)
    reader = child("read", cache.root, a)  # a: the oldest
    try:
        assert reader.stdout.readline() == f"holding {cache.path(a)}\n"
        report = cache.gc(max_bytes=0)
        assert cache.path(a).read_bytes() == WARC.read_bytes()
    finally:
        reader.communicate("done\n", timeout=60)
    assert (report.entries_kept, report.entries_removed, report.in_use) == (1, 2, 1)
    assert not cache.path(b).exists() and not cache.path(c).exists()
    assert cache.gc(max_bytes=0).entries_removed == 1  # released: now it goes
    assert not cache.folder(a).exists()


def test_gc_removes_stale_partial_downloads_and_empty_entries(served: Path,
                                                             cache: DownloadCache) -> None:
    with FaultyServer(served) as server:
        url = server.url + NAME
        cache.fetch(url, FAST)
        stale = cache.folder(url) / ".a.warc.gz.part"
        stale.write_bytes(b"x" * 100)
        gone = cache.folder(server.url + NAMES[1])  # a download killed early: no file
        gone.mkdir(parents=True)
        (gone / ".b.warc.gz.part").write_bytes(b"y" * 50)
        (gone / ".lock").touch()
        report = cache.gc()
        assert cache.fetch(url, FAST).cached
    # the two parts and a's download lock (.a.warc.gz.lock)
    assert report.leftovers_removed == 3 and report.bytes_freed == 150
    assert (report.entries_kept, report.entries_removed) == (1, 0)
    assert not stale.exists() and not gone.exists()
    assert cache.path(url).read_bytes() == WARC.read_bytes()


def test_gc_removes_nothing_but_cache_entries(tmp_path: Path) -> None:
    (tmp_path / "ab" / "notes").mkdir(parents=True)
    (tmp_path / "ab" / "notes" / "x.part").write_text("mine")
    (tmp_path / "readme.lock").write_text("mine")
    report = DownloadCache(tmp_path).gc(max_bytes=0)
    assert report == type(report)()
    assert (tmp_path / "ab" / "notes" / "x.part").exists() and (tmp_path / "readme.lock").exists()


def test_default_cache_dir_is_beside_the_run(tmp_path: Path) -> None:
    assert default_cache_dir(tmp_path / "runs" / "cc") == tmp_path / "runs" / ".curator-cache"


def test_sizes() -> None:
    assert parse_size("50G") == 50 << 30 and parse_size("500M") == 500 << 20
    assert parse_size("1.5k") == 1536 and parse_size("123") == 123
    assert parse_size("2GiB") == parse_size("2 GB") == 2 << 30
    for bad in ("", "G", "12Q", "-1", "1e9"):
        with pytest.raises(ValueError, match="--max-size must be a size"):
            parse_size(bad)


def test_gc_command(served: Path, cache: DownloadCache) -> None:
    app = typer.Typer()
    app.command()(gc)
    runner = CliRunner()
    with FaultyServer(served) as server:
        fill(cache, server)
    size = WARC.stat().st_size
    result = runner.invoke(app, ["--cache", str(cache.root), "--max-size", str(2 * size)])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        f"{cache.root}: 2 entries kept ({2 * size / 1024:.1f} KiB), 1 removed, 3 leftovers "
        f"removed, {size / 1024:.1f} KiB freed, 0 in use skipped"]
    bad = runner.invoke(app, ["--cache", str(cache.root), "--max-size", "12Q"])
    assert bad.exit_code == 2 and bad.stdout == ""
    assert bad.stderr.splitlines() == [
        "error: --max-size must be a size such as 50G, 500M or 1000000 (bytes), got '12Q'"]
    missing = runner.invoke(app, ["--cache", str(cache.root / "nothing")])
    assert missing.exit_code == 2 and "no such cache folder" in missing.stderr
    assert runner.invoke(app, []).exit_code == 2  # --cache is required
