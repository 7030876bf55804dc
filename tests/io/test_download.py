"""The robust downloader against a real HTTP server on 127.0.0.1 that misbehaves on purpose."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

from curator.io.download import DownloadError, GzipCheck, RetryPolicy, download
from tests.faulty_http import FaultyServer

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
WARC = CORPUS / "warc" / "wget" / "dolma-sample-0000.warc.gz"
FAST = RetryPolicy(max_tries=4, base_delay_s=0.01, max_delay_s=2.0, timeout_s=5.0)
NAME = "crawl-data/CC-MAIN-2099-01/segments/1/warc/a.warc.gz"

pytestmark = pytest.mark.skipif(not WARC.exists(), reason="shared corpus not staged")


@pytest.fixture
def served(tmp_path: Path) -> Path:
    root = tmp_path / "www"
    (root / NAME).parent.mkdir(parents=True)
    shutil.copyfile(WARC, root / NAME)
    return root


def fetch(server: FaultyServer, tmp_path: Path, policy: RetryPolicy = FAST, per_host: int = 4):
    return download(server.url + NAME, tmp_path / "cache" / NAME, policy, per_host)


def test_reset_mid_body_resumes_with_range(served: Path, tmp_path: Path) -> None:
    with FaultyServer(served, faults={NAME: ["reset"]}) as server:
        got = fetch(server, tmp_path)
        log = server.requests(NAME)
    assert got.path.read_bytes() == WARC.read_bytes()
    assert [r.status for r in log] == [200, 206]
    first_bytes = int(log[1].range.removeprefix("bytes=").rstrip("-"))
    assert 0 < first_bytes < WARC.stat().st_size and got.resumed == 1


def test_clean_early_close_resumes(served: Path, tmp_path: Path) -> None:
    with FaultyServer(served, faults={NAME: ["short", "short"]}) as server:
        got = fetch(server, tmp_path)
        log = server.requests(NAME)
    assert got.path.read_bytes() == WARC.read_bytes()
    assert [r.status for r in log] == [200, 206, 206] and got.resumed == 2


def test_503_then_success(served: Path, tmp_path: Path) -> None:
    with FaultyServer(served, faults={NAME: ["503", "503"]}) as server:
        got = fetch(server, tmp_path)
        log = server.requests(NAME)
    assert [r.status for r in log] == [503, 503, 200]
    assert got.path.read_bytes() == WARC.read_bytes() and got.errors == ["HTTP 503"] * 2


def test_429_honours_retry_after(served: Path, tmp_path: Path) -> None:
    with FaultyServer(served, faults={NAME: ["429"]}, retry_after=1) as server:
        got = fetch(server, tmp_path)
        log = server.requests(NAME)
    assert [r.status for r in log] == [429, 200]
    assert log[1].at - log[0].at >= 0.95  # the backoff alone would wait ~0.01 s
    assert got.path.read_bytes() == WARC.read_bytes()


def test_slow_response_times_out_and_resumes(served: Path, tmp_path: Path) -> None:
    policy = RetryPolicy(max_tries=4, base_delay_s=0.01, timeout_s=0.3)
    with FaultyServer(served, faults={NAME: ["slow"]}, stall_s=1.5) as server:
        got = fetch(server, tmp_path, policy)
        log = server.requests(NAME)
    assert [r.status for r in log] == [200, 206] and log[1].range != "bytes=0-"
    assert "timed out" in got.errors[0]
    assert got.path.read_bytes() == WARC.read_bytes()


def test_server_ignoring_range_restarts_cleanly(served: Path, tmp_path: Path) -> None:
    with FaultyServer(served, faults={NAME: ["reset", "ignore_range"]}) as server:
        got = fetch(server, tmp_path)
        log = server.requests(NAME)
    assert [r.status for r in log] == [200, 200] and log[1].range is not None
    assert got.path.read_bytes() == WARC.read_bytes() and got.resumed == 0


def test_truncated_gzip_served_whole_is_kept_as_served(served: Path, tmp_path: Path) -> None:
    cut = WARC.read_bytes()[: WARC.stat().st_size * 2 // 3]
    (served / NAME).write_bytes(cut)
    with FaultyServer(served) as server:
        got = fetch(server, tmp_path)
        log = server.requests(NAME)
    # fetched twice (a transfer error would differ), then the server's copy is what it is
    assert [r.status for r in log] == [200, 200]
    assert got.damaged == "truncated gzip member at the end of the file"
    assert got.path.read_bytes() == cut


def test_garbled_transfer_is_caught_by_the_gzip_check_and_fetched_again(served: Path,
                                                                        tmp_path: Path) -> None:
    with FaultyServer(served, faults={NAME: ["garble"]}) as server:
        got = fetch(server, tmp_path)
        log = server.requests(NAME)
    assert [r.status for r in log] == [200, 200] and got.damaged is None
    assert got.errors[0].startswith("corrupt gzip data")
    assert got.path.read_bytes() == WARC.read_bytes()


def test_unrecoverable_file_fails_naming_the_url(served: Path, tmp_path: Path) -> None:
    with FaultyServer(served, always={NAME: "503"}) as server:
        with pytest.raises(DownloadError) as err:
            fetch(server, tmp_path)
        assert len(server.requests(NAME)) == FAST.max_tries
        message = str(err.value)
        assert message.startswith(server.url + NAME) and "\n" not in message
        assert "HTTP 503" in message
        with pytest.raises(DownloadError, match="HTTP 404") as err:
            download(server.url + "missing.warc.gz", tmp_path / "m.warc.gz", FAST)
        assert len(server.requests("missing.warc.gz")) == 1  # not retried
    assert not (tmp_path / "cache" / NAME).exists()


def test_complete_cached_file_is_reused_without_a_request(served: Path, tmp_path: Path) -> None:
    with FaultyServer(served) as server:
        first = fetch(server, tmp_path)
        second = fetch(server, tmp_path)
        assert len(server.requests()) == 1
    assert not first.cached and second.cached and second.requests == 0


def test_per_host_limit(served: Path, tmp_path: Path) -> None:
    names = [f"crawl-data/x/{i}.warc.gz" for i in range(4)]
    for name in names:
        (served / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(WARC, served / name)
    with FaultyServer(served, faults={n: ["pause"] for n in names}, stall_s=0.2) as server:
        threads = [threading.Thread(target=download, args=(server.url + n, tmp_path / n, FAST, 2))
                   for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert server.most_in_flight == 2
    assert all((tmp_path / n).read_bytes() == WARC.read_bytes() for n in names)


def test_one_downloader_per_file(served: Path, tmp_path: Path) -> None:
    with FaultyServer(served, faults={NAME: ["pause"]}, stall_s=0.3) as server:
        results = []
        threads = [threading.Thread(target=lambda: results.append(fetch(server, tmp_path)))
                   for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(server.requests(NAME)) == 1
    assert sorted(r.cached for r in results) == [False, True, True]
    assert (tmp_path / "cache" / NAME).read_bytes() == WARC.read_bytes()


def test_gzip_check_fed_in_pieces() -> None:
    data = WARC.read_bytes()
    whole, cut = GzipCheck(), GzipCheck()
    for i in range(0, len(data), 7001):
        whole.feed(data[i:i + 7001])
    cut.feed(data[: len(data) // 2])
    assert whole.damage() is None
    assert cut.damage() == "truncated gzip member at the end of the file"


def test_other_schemes_go_through_fsspec_and_resume_by_seeking(tmp_path: Path) -> None:
    dest = tmp_path / "cache" / "a.warc.gz"
    dest.parent.mkdir()
    data = WARC.read_bytes()
    (dest.parent / f".{dest.name}.part").write_bytes(data[:1000])  # a transfer cut earlier
    got = download(WARC.as_uri(), dest, FAST)
    assert got.resumed == 1 and got.requests == 1 and dest.read_bytes() == data
    with pytest.raises(DownloadError, match="not found"):
        download((tmp_path / "nothing.gz").as_uri(), tmp_path / "n.gz", FAST)
