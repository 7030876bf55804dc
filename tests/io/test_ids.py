"""Ids come out as the same strings whatever their neighbours and whichever parser read them: a
non-string id is turned into a string with ``str`` and counted in stats.json."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from curator import Pipeline, ReadJsonl, ReadParquet, WriteParquet
from tests.conftest import sample_documents


def _write(path, records: list[dict], bad_line_at: int | None = None) -> None:
    lines = [json.dumps(r, ensure_ascii=False) for r in records]
    if bad_line_at is not None:  # a malformed line: the block is re-read line by line
        lines.insert(bad_line_at, '{"id": "broken", "text": ')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _run(source, tmp_path, name: str) -> tuple[dict[str, str], dict]:
    """id → text of the written documents, and the reader's stats entry."""
    run = tmp_path / name
    result = Pipeline([source, WriteParquet()], name="ids").run(
        output=run, executor="local", progress=False)
    rows = pq.read_table(run / "write_parquet").to_pylist()
    return {r["id"]: r["text"] for r in rows}, result.stats["stages"][0]


def test_a_numeric_id_among_strings_changes_no_other_id_and_is_counted(tmp_path):
    texts = [d["text"] for d in sample_documents()[:12]]
    records = [{"id": f"ok-{i}", "text": t} for i, t in enumerate(texts)]
    records[3]["id"] = 5
    records[5]["id"] = 5.5
    records[7]["id"] = True
    records[8]["id"] = None
    records[9]["id"] = {"nested": 1}
    (tmp_path / "in").mkdir()
    _write(tmp_path / "in" / "mixed.jsonl", records)
    ids, reader = _run(ReadJsonl(path=f"{tmp_path}/in/*.jsonl"), tmp_path, "run")
    expected = {f"ok-{i}": texts[i] for i in (0, 1, 2, 4, 6, 10, 11)}
    expected.update({"5": texts[3], "5.5": texts[5], "True": texts[7],
                     "mixed.jsonl:9": texts[8], "mixed.jsonl:10": texts[9]})
    assert ids == expected
    assert reader["notes"] == {"id_converted": 3, "id_replaced": 1}
    assert reader["kept"] == len(records)


def test_arrow_and_line_by_line_parsing_give_the_same_ids(tmp_path):
    """Blocks of int ids, of ints and floats, and of date-like string ids, read by Arrow and
    (with a malformed line in the block) line by line."""
    texts = [d["text"] for d in sample_documents()[:9]]
    shapes = {
        "ints": [7, 8, 9],
        "ints_and_floats": [10, 11.5, 12],
        "dates": ["2020-01-01", "2020-01-02", "2021-03-04T05:06:07"],
    }
    runs = {}
    for parser, bad in (("arrow", None), ("lines", 1)):
        folder = tmp_path / parser
        folder.mkdir()
        for k, (shape, values) in enumerate(shapes.items()):
            _write(folder / f"{shape}.jsonl",
                   [{"id": v, "text": texts[3 * k + j]} for j, v in enumerate(values)], bad)
        runs[parser] = _run(ReadJsonl(path=f"{folder}/*.jsonl"), tmp_path, f"run-{parser}")
    (arrow_ids, arrow_reader), (line_ids, line_reader) = runs["arrow"], runs["lines"]
    assert arrow_ids == line_ids
    assert sorted(arrow_ids) == sorted(["7", "8", "9", "10", "11.5", "12", "2020-01-01",
                                        "2020-01-02", "2021-03-04T05:06:07"])
    assert line_reader["failed"] == 3
    assert arrow_reader["notes"] == line_reader["notes"] == {"id_converted": 6}


def test_parquet_input_with_a_numeric_id_column(tmp_path):
    texts = [d["text"] for d in sample_documents()[:6]]
    (tmp_path / "in").mkdir()
    pq.write_table(pa.table({"id": pa.array([1, 2, None], pa.int64()), "text": texts[:3]}),
                   tmp_path / "in" / "a.parquet")
    pq.write_table(pa.table({"id": pa.array([1.0, 2.5, 3.0]), "text": texts[3:]}),
                   tmp_path / "in" / "b.parquet")
    ids, reader = _run(ReadParquet(path=f"{tmp_path}/in/*.parquet"), tmp_path, "run")
    assert ids == {"1": texts[0], "2": texts[1], "a.parquet:2": texts[2],
                   "1.0": texts[3], "2.5": texts[4], "3.0": texts[5]}
    assert reader["notes"] == {"id_converted": 5}
