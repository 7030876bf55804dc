"""The report's examples read the first documents a row group at a time, in file order, and
those with text only where asked: what they cost does not grow with the run."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from curator.report.show import first_documents


def test_first_documents_stop_at_the_row_group_that_completes_them(tmp_path, monkeypatch):
    for n in range(3):
        texts = [None if k % 4 else f"text {n}-{k}" for k in range(1000)]
        table = pa.table({"id": [f"{n}-{k:04d}" for k in range(1000)], "text": texts})
        pq.write_table(table, tmp_path / f"part-{n}.parquet", row_group_size=100)
    read = []
    original = pq.ParquetFile.read_row_group

    def counting(self, group, *args, **kwargs):
        read.append(group)
        return original(self, group, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", counting)
    assert [r["id"] for r in first_documents(tmp_path, 3)] == ["0-0000", "0-0001", "0-0002"]
    assert read == [0]
    read.clear()
    rows = first_documents(tmp_path, 30, with_text=True)
    assert [r["id"] for r in rows] == [f"0-{k:04d}" for k in range(0, 120, 4)]
    assert read == [0, 1]  # 25 with text in the first group, 5 more in the second
    assert len(first_documents(tmp_path, 5000, with_text=True)) == 750


def test_show_keeps_the_smallest_ids_of_all_files_holding_n_at_a_time(tmp_path, monkeypatch):
    from curator.report import show

    for n in range(3):  # the smallest ids sit in the last file
        ids = [f"{'z' if n < 2 else 'a'}-{n}-{k:04d}" for k in range(1000)]
        pq.write_table(pa.table({"id": ids[::-1], "text": ["t"] * 1000}),
                       tmp_path / f"part-{n}.parquet", row_group_size=100)
    held = []
    original = show._smallest

    def recording(best, table, n):
        out = original(best, table, n)
        held.append(0 if out is None else out.num_rows)
        return out

    monkeypatch.setattr(show, "_smallest", recording)
    picked = show.kept(tmp_path, None, 5)
    assert [r["id"] for r in picked.rows] == [f"a-2-{k:04d}" for k in range(5)]
    assert picked.matched == 3000 and len(held) == 30 and max(held) == 5
