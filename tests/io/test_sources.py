"""Readers over fsspec: a real HTTP server on loopback, Parquet in and out, rejected documents."""

from __future__ import annotations

import functools
import http.server
import threading

import pyarrow.parquet as pq
import pytest

from curator import LengthFilter, Pipeline, ReadJsonl, ReadParquet, WriteJsonl, WriteParquet
from tests.conftest import SAMPLE, assert_accounting, sample_documents


@pytest.fixture
def http_root():
    """Serve data/sample over HTTP on 127.0.0.1."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(SAMPLE))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_read_jsonl_gz_over_http_matches_local(http_root, tmp_path):
    names = ["inaugural.jsonl.gz", "state_union.jsonl.gz"]
    remote = Pipeline([ReadJsonl(path=[f"{http_root}/{n}" for n in names]), WriteParquet()])
    local = Pipeline([ReadJsonl(path=[str(SAMPLE / n) for n in names]), WriteParquet()])
    remote.run(output=tmp_path / "remote", executor="local", progress=False)
    local.run(output=tmp_path / "local", executor="local", progress=False)
    got = pq.read_table(tmp_path / "remote" / "write_parquet")
    want = pq.read_table(tmp_path / "local" / "write_parquet")
    assert got.column("id").to_pylist() == want.column("id").to_pylist()
    assert got.column("text").to_pylist() == want.column("text").to_pylist()
    assert got.num_rows == 124
    assert_accounting(tmp_path / "remote")


def test_parquet_round_trip_with_custom_fields_and_rejected_documents(tmp_path):
    first = Pipeline([ReadJsonl(path=str(SAMPLE / "*.jsonl.gz")), LengthFilter(min_chars=5000),
                      WriteParquet(row_group_rows=7), WriteJsonl(compression="gzip")],
                     rejected="documents")
    first.run(output=tmp_path / "one", executor="local", progress=False)
    assert_accounting(tmp_path / "one")
    rejected = pq.read_table(tmp_path / "one" / "rejected" / "length_filter")
    assert set(rejected.column("reason").to_pylist()) == {"too_short"}
    assert all(len(t) < 5000 for t in rejected.column("text").to_pylist())
    kept = pq.read_table(tmp_path / "one" / "write_parquet")
    assert kept.num_rows + rejected.num_rows == len(sample_documents())
    assert pq.ParquetFile(next((tmp_path / "one" / "write_parquet").glob("*.parquet"))) \
        .metadata.row_group(0).num_rows == 7

    again = Pipeline([ReadParquet(path=str(tmp_path / "one" / "write_parquet" / "*.parquet")),
                      WriteParquet()])
    again.run(output=tmp_path / "two", executor="local", progress=False)
    reread = pq.read_table(tmp_path / "two" / "write_parquet")
    assert reread.column("id").to_pylist() == kept.column("id").to_pylist()
    assert reread.column("text").to_pylist() == kept.column("text").to_pylist()

    from_jsonl = Pipeline([ReadJsonl(path=str(tmp_path / "one" / "write_jsonl" / "*.jsonl.gz"))])
    from_jsonl.run(output=tmp_path / "three", executor="local", progress=False)
    stats = assert_accounting(tmp_path / "three")
    assert stats["stages"][0]["kept"] == kept.num_rows
