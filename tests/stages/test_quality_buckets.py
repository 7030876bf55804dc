"""quality_buckets on runs over data the test builds (three score columns with ties and missing
values, two languages, texts of varied length): buckets, the ensemble, levels and the top
fraction equal a plain reference (sort, walk the cumulative weight); the same bytes whatever
the executor, workers and batch size; frozen cut points give an earlier run's buckets to the
same documents when a snapshot is added."""

from __future__ import annotations

import json
import random

import pyarrow.parquet as pq
import pytest

from curator import Pipeline, QualityBuckets, ReadJsonl, WriteParquet
from tests.conftest import assert_accounting

COLUMNS = ["edu", "dclm", "nemo"]
FILES = 4


def _docs(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    docs = []
    for k in range(n):
        doc = {"id": f"d{seed}-{k:05d}", "lang": rng.choice(["en", "ja", "ja", None]),
               "text": "x" * rng.randint(1, 400) + ("日本" * rng.randint(0, 50))}
        for column in COLUMNS:
            value = round(rng.gauss(0, 1), 1)  # one decimal: many ties
            doc[column] = None if rng.random() < 0.03 else value
        docs.append(doc)
    return docs


def _write(folder, docs, prefix="f"):
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(FILES):
        with open(folder / f"{prefix}-{n}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in docs[n::FILES])


def _run(tmp_path, name, executor="local", workers=None, small_batches=False, **options):
    run = tmp_path / name
    sizes = {"batch_bytes": 4096, "part_bytes": 20_000} if small_batches else {}
    Pipeline([ReadJsonl(path=str(tmp_path / "in" / "*.jsonl")), QualityBuckets(**options),
              WriteParquet()], **sizes).run(output=run, executor=executor, workers=workers,
                                            progress=False)
    return run


def _reference_points(scores, weights, steps):
    """The inverted-CDF rule walked by hand: for each p, the first score (in score order)
    where the running weight reaches p % of the total."""
    pairs = sorted((s, w) for s, w in zip(scores, weights, strict=True) if s is not None)
    total = sum(w for _, w in pairs)
    points = []
    for p in steps:
        running = 0
        for score, weight in pairs:
            running += weight
            if running * 100 >= p * total:
                points.append(score)
                break
    return points


def _reference(docs, by_lang, weight, buckets=20, top=None, columns=tuple(COLUMNS)):
    """Per document: each column's bucket, the ensemble, and whether the top fraction keeps
    it."""
    def group(d):
        return (d["lang"] or "") if by_lang else ""

    def weight_of(d):
        return len(d["text"].encode()) if weight == "bytes" else 1

    steps = [k * 100 / buckets for k in range(1, buckets)]
    out = {d["id"]: {} for d in docs}
    for name in {group(d) for d in docs}:
        members = [d for d in docs if group(d) == name]
        for column in columns:
            scores = [d[column] for d in members]
            weights = [weight_of(d) for d in members]
            points = _reference_points(scores, weights, steps)
            cut = _reference_points(scores, weights, [round(100 * (1 - top), 2)]) if top else []
            for d in members:
                s = d[column]
                out[d["id"]][column] = None if s is None else sum(p <= s for p in points)
                out[d["id"]].setdefault("top", False)
                out[d["id"]]["top"] |= s is not None and bool(cut) and s >= cut[0]
    for d in docs:  # no score at all: no top fraction judges it
        out[d["id"]]["top"] |= all(d[c] is None for c in columns)
    for entry in out.values():
        values = [entry[c] for c in columns if entry[c] is not None]
        entry["ensemble"] = max(values) if values else None
    return out


def _rows(run):
    kept = pq.read_table(run / "write_parquet").to_pylist()
    removed = (pq.read_table(run / "rejected" / "quality_buckets").to_pylist()
               if (run / "rejected" / "quality_buckets").exists() else [])
    return kept, removed


@pytest.mark.parametrize(("by_lang", "weight"), [(False, "bytes"), (True, "documents"),
                                                 (True, "bytes")])
def test_buckets_equal_the_reference(tmp_path, by_lang, weight):
    docs = _docs(1500, 1)
    _write(tmp_path / "in", docs)
    run = _run(tmp_path, "run", columns=COLUMNS, weight=weight,
               **({"by": "lang"} if by_lang else {}))
    assert_accounting(run)
    want = _reference(docs, by_lang, weight)
    kept, removed = _rows(run)
    assert removed == [] and len(kept) == len(docs)
    levels = {0: "low", 4: "medium_low", 8: "medium", 12: "medium_high", 16: "high"}
    for row in kept:
        entry = want[row["id"]]
        for column in COLUMNS:
            assert row[f"{column}_bucket"] == entry[column], (row["id"], column)
        assert row["quality_bucket"] == entry["ensemble"]
        assert row["quality_bucket"] == max((row[f"{c}_bucket"] for c in COLUMNS
                                             if row[f"{c}_bucket"] is not None), default=None)
        if entry["ensemble"] is None:
            assert row["quality"] is None
        else:
            assert row["quality"] == levels[max(k for k in levels if k <= entry["ensemble"])]
    used = {r["dclm_bucket"] for r in kept} - {None}
    assert len(used) >= 15 and max(used) == 19  # the data spread over the buckets


def test_top_fraction_keeps_what_the_reference_keeps(tmp_path):
    """DCLM's rule: the top 10 % by weight of one score (ties at the cut all kept)."""
    docs = _docs(1500, 2)
    _write(tmp_path / "in", docs)
    run = _run(tmp_path, "run", columns=["dclm"], top_fraction=0.1)
    assert_accounting(run)
    reference = _reference(docs, False, "bytes", top=0.1, columns=("dclm",))
    kept, removed = _rows(run)
    assert {r["id"] for r in kept} == {k for k, v in reference.items() if v["top"]}
    unscored = [d["id"] for d in docs if d["dclm"] is None]
    assert unscored and set(unscored) <= {r["id"] for r in kept}
    assert {r["reason"] for r in removed} == {"quality_top_fraction"}
    share = sum(len(r["text"].encode()) for r in kept) / sum(len(d["text"].encode())
                                                            for d in docs)
    assert 0.1 <= share < 0.15


def test_same_bytes_whatever_executor_workers_and_batches(tmp_path):
    docs = _docs(800, 3)
    _write(tmp_path / "in", docs)
    options = {"columns": COLUMNS, "by": "lang", "top_fraction": 0.3}
    runs = [_run(tmp_path, "local", **options),
            _run(tmp_path, "dask", executor="dask", workers=2, small_batches=True, **options)]
    tables = [pq.read_table(r / "write_parquet").sort_by("id") for r in runs]
    assert tables[0].equals(tables[1])
    stats = [json.loads((r / "stats.json").read_text()) for r in runs]
    facts = [next(s for s in st["stages"] if s["type"] == "quality_buckets")["quality_buckets"]
             for st in stats]
    assert facts[0]["cutpoints"] == facts[1]["cutpoints"]


def test_frozen_cut_points_keep_an_earlier_run_s_buckets(tmp_path):
    """A second snapshot added with the first run's cut points frozen: the first snapshot's
    documents keep their buckets; cut points recomputed over both would move them."""
    first = _docs(1000, 4)
    _write(tmp_path / "in", first)
    earlier = _run(tmp_path, "first", columns=COLUMNS)
    before = {r["id"]: r["quality_bucket"] for r in _rows(earlier)[0]}
    shifted = [{**d, **{c: (None if d[c] is None else d[c] + 1.0) for c in COLUMNS}}
               for d in _docs(1000, 5)]  # a better snapshot
    _write(tmp_path / "in", shifted, prefix="g")
    frozen = _run(tmp_path, "frozen", columns=COLUMNS,
                  cutpoints_from=str(earlier / "stats.json"))
    moved = _run(tmp_path, "moved", columns=COLUMNS)
    after = {r["id"]: r["quality_bucket"] for r in _rows(frozen)[0]}
    assert {k: after[k] for k in before} == before
    recomputed = {r["id"]: r["quality_bucket"] for r in _rows(moved)[0]}
    assert sum(recomputed[k] != before[k] for k in before) > 100


def test_a_frozen_file_without_the_column_is_one_clear_error(tmp_path):
    (tmp_path / "cuts.json").write_text(json.dumps({"cutpoints": {"edu": {"": [0.0]}}}))
    stage = QualityBuckets(columns=["dclm"], cutpoints_from=str(tmp_path / "cuts.json"))
    with pytest.raises(ValueError, match="no cut points for 'dclm'"):
        stage.check()
