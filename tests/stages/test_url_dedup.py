"""url_dedup as a barrier on real runs: planted variants of one URL collapse to the configured
survivor, distinct URLs and documents without one never do, every document is accounted for,
and an added input file reuses the old parts' hashes and publishes a from-scratch run's bytes."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator import Pipeline, ReadJsonl, ReadParquet, UrlDedup, WriteParquet
from tests.conftest import assert_accounting, sample_documents
from tests.published import published_differences

#: Planted pages: every URL of a group names one page. Each variant has its date (hours after
#: BASE, written in the style given; None: no date; "bad": not a date) and its text's length.
SAME_PAGE = {
    "tracking": [("https://example.com/news/article?id=7&page=2", 3, "Z", 300),
                 ("http://EXAMPLE.com/news/article?page=2&id=7&utm_source=mail#comments", 10,
                  "+09:00", 900),
                 ("https://example.com:443/news/article?id=7&page=2&fbclid=abc", None, "Z", 900),
                 ("HTTPS://Example.COM/news/article?gclid=1&page=2&id=7&UTM_Campaign=x&_ga=2",
                  10, "naive", 200)],
    "escapes": [("https://example.org/%7Euser/a%2fb?q=%e3%81%82", 1, "Z", 500),
                ("http://example.org:80/~user/a%2Fb?q=%E3%81%82#top", None, "Z", 400),
                ("https://example.org/%7euser/a%2Fb?q=あ", 2, "+09:00", 600)],
    "idn": [("https://日本語.jp/記事/1", None, "Z", 700),
            ("https://xn--wgv71a119e.jp/%E8%A8%98%E4%BA%8B/1", None, "Z", 100),
            ("http://日本語.JP/記事/1?utm_campaign=z#top", None, "Z", 700)],
    "root": [("https://shop.example.jp", 5, "Z", 250), ("https://shop.example.jp/", 7, "Z", 150),
             ("http://SHOP.example.jp:80/#top", 6, "+09:00", 350),
             ("https://shop.example.jp/?", "bad", "Z", 50)],
}
#: Each a page of its own, though close to a planted one.
DISTINCT = [
    "https://example.com/news/article?id=8&page=2",           # another value of a parameter
    "https://example.com/news/article?id=7&page=2&ref=home",  # a parameter that is no tracker
    "https://example.com/news/Article?id=7&page=2",           # paths are case-sensitive
    "https://example.com/news/article/?id=7&page=2",          # a trailing / on a path
    "https://example.net/news/article?id=7&page=2",           # another host
    "https://example.com:8443/news/article?id=7&page=2",      # not the default port
    "https://www.example.com/news/article?id=7&page=2",       # www. is not folded by default
    "https://example.org/~user/a/b?q=%E3%81%82",              # %2F is not /
    "https://日本語.jp/記事/2",
]
NO_URL = [None, "", "   ", "not a url", "/relative/path", "mailto:someone@example.com"]
BASE = datetime(2024, 5, 1, tzinfo=timezone.utc)
FILES = 5


def _date(hours, style: str) -> str | None:
    if hours is None:
        return None
    if hours == "bad":
        return "last Tuesday"
    when = BASE + timedelta(hours=hours)
    if style == "+09:00":
        return when.astimezone(timezone(timedelta(hours=9))).isoformat()
    if style == "naive":
        return when.replace(tzinfo=None).isoformat()
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _records() -> list[dict]:
    """The planted variants (ids in reverse order of listing, so that the smallest id is not the
    first met), the distinct and URL-less documents (all of one text: text plays no part), and
    real documents with unique URLs. ``_group`` and ``_hours`` are the test's truth."""
    texts = [d["text"] for d in sample_documents() if len(d["text"]) >= 1000]
    records = []
    for group, variants in SAME_PAGE.items():
        for k, (url, hours, style, length) in enumerate(variants):
            records.append({"id": f"{group}-{len(variants) - k}", "url": url,
                            "date": _date(hours, style), "text": texts[k][:length],
                            "_group": group, "_hours": hours})
    for k, url in enumerate(DISTINCT + NO_URL):
        records.append({"id": f"single-{k:02d}", "url": url, "date": _date(k, "Z"),
                        "text": texts[0][:400], "_group": None, "_hours": k})
    records.append({"id": "single-nokey", "text": texts[0][:400], "_group": None, "_hours": None})
    for k, text in enumerate(texts[:30]):
        records.append({"id": f"web-{k:02d}", "url": f"https://blog.example.net/{k}/",
                        "date": _date(k, "Z"), "text": text[:2000], "_group": None,
                        "_hours": k})
    return records


def _write_jsonl(folder, records, files=FILES):
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(files):
        with open(folder / f"f-{n}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps({k: v for k, v in r.items() if not k.startswith("_")},
                                    ensure_ascii=False) + "\n" for r in records[n::files])


def _expected(records, keep: str) -> dict[str, str]:
    """Each planted document's survivor (by the planted dates or lengths; ties: smallest id)."""
    def score(r):
        if keep == "longest":
            return len(r["text"])
        return r["_hours"] if isinstance(r["_hours"], int) else -math.inf

    survivors = {}
    for group in SAME_PAGE:
        members = [r for r in records if r["_group"] == group]
        best = min(members, key=lambda r: (-score(r), r["id"]))["id"]
        survivors.update({r["id"]: best for r in members})
    return survivors


def _check(run, records, keep: str) -> dict:
    """Kept = every document but the planted non-survivors; each removed one names its
    survivor; in == kept + removed everywhere; the stage's facts."""
    stats = assert_accounting(run)
    survivors = _expected(records, keep)
    kept = pq.read_table(run / "write_parquet").column("id").to_pylist()
    removed = pq.read_table(run / "rejected" / "url_dedup").to_pylist()
    assert len(kept) == len(set(kept))
    assert set(kept) == {r["id"] for r in records} - set(survivors) | set(survivors.values())
    assert {r["id"]: r["duplicate_of"] for r in removed} == \
        {i: s for i, s in survivors.items() if i != s}
    assert {r["reason"] for r in removed} == {"duplicate_url"}
    stage = next(s for s in stats["stages"] if s["name"] == "url_dedup")
    assert stage["removed_by_reason"] == {"duplicate_url": len(removed)}
    assert stage["dedup"] == {"keep": keep, "no_url": len(NO_URL) + 1,
                              "cluster_sizes": {"3": 2, "4": 2}}
    return stats


def test_url_variants_collapse_to_the_latest_copy(tmp_path, dask_scheduler):
    """Tracking parameters, host case, fragments, http/https, default ports, parameter order,
    escapes' case and IDN hosts collapse; the latest date survives (an offset read as one,
    a missing or unreadable date loses, a tie goes to the smallest id), on a Dask cluster."""
    records = _records()
    _write_jsonl(tmp_path / "in", records)
    pipeline = Pipeline([ReadJsonl(path=str(tmp_path / "in" / "*.jsonl")), UrlDedup(buckets=3),
                         WriteParquet()], name="urls")
    assert [s.kind for s in pipeline.plan().segments] == ["shard", "dataset", "shard"]
    pipeline.run(output=tmp_path / "run", scheduler=dask_scheduler, progress=False)
    _check(tmp_path / "run", records, "latest")
    assert _expected(records, "latest")["tracking-1"] == "tracking-1"  # the tie, by id


@pytest.mark.parametrize("keep", ["latest", "longest"])
def test_parquet_timestamps_and_the_longest_copy(tmp_path, keep):
    """Parquet inputs whose dates are Arrow timestamps (null: missing); or the longest text."""
    records = [r for r in _records() if r["_hours"] != "bad"]
    folder = tmp_path / "in"
    folder.mkdir()
    for n in range(3):
        rows = records[n::3]
        pq.write_table(pa.table({
            "id": [r["id"] for r in rows], "url": [r.get("url") for r in rows],
            "text": [r["text"] for r in rows],
            "date": pa.array([BASE + timedelta(hours=r["_hours"]) if r["_hours"] is not None
                              else None for r in rows], pa.timestamp("us", "UTC"))}),
            folder / f"f-{n}.parquet")
    run = tmp_path / "run"
    Pipeline([ReadParquet(path=str(folder / "*.parquet")), UrlDedup(keep=keep),
              WriteParquet()]).run(output=run, executor="local", progress=False)
    stats = assert_accounting(run)
    survivors = _expected(records, keep)
    kept = set(pq.read_table(run / "write_parquet").column("id").to_pylist())
    assert kept == {r["id"] for r in records} - set(survivors) | set(survivors.values())
    assert stats["stages"][1]["dedup"]["cluster_sizes"] == {"3": 3, "4": 1}
    if keep == "longest":
        assert survivors["tracking-3"] == "tracking-2"  # two of 900 characters: smallest id


def test_added_files_reuse_the_old_parts_hashes(tmp_path):
    """Four files, then a fifth that sorts between them, holding the latest copy of two planted
    pages (their survivors change): the hash phase reuses the four parts' work, and the run
    publishes a from-scratch run's bytes."""
    records = _records()
    _write_jsonl(tmp_path / "all", records)
    inputs = tmp_path / "in"
    inputs.mkdir()
    for n in (0, 2, 3, 4):
        (tmp_path / "all" / f"f-{n}.jsonl").rename(inputs / f"f-{n}.jsonl")

    def pipeline(output):
        return Pipeline([ReadJsonl(path=str(inputs / "*.jsonl")), UrlDedup(),
                         WriteParquet()], output=str(output))

    run = tmp_path / "run"
    pipeline(run).run(executor="local", progress=False)
    before = {r["id"]: r["duplicate_of"] for r in
              pq.read_table(run / "rejected" / "url_dedup").to_pylist()}
    assert before["escapes-2"] == "escapes-3" and before["root-4"] == "root-2"
    (tmp_path / "all" / "f-1.jsonl").rename(inputs / "f-1.jsonl")
    stats = pipeline(run).run(executor="local", progress=False).stats
    phases = stats["reuse"]["segment-01"]["phases"]
    assert (phases["hash"]["tasks"], phases["hash"]["reused"]) == (5, 4)
    assert phases["group"]["reused"] == 0
    _check(run, records, "latest")
    pipeline(tmp_path / "scratch").run(executor="local", progress=False)
    assert published_differences(run, tmp_path / "scratch") == []
