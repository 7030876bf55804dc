"""A large input file reaches a dataset stage as parts of at most ``part_bytes`` of text (so a
dedup task's memory does not grow with the input files), cut by rows alone: the same documents
survive whatever the part size, and a rerun writes the same bytes."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from curator import Pipeline, ReadJsonl, WriteParquet
from curator.stages.base import stage_class
from tests.conftest import assert_accounting, sample_documents


def run(tmp_path, name: str, part_bytes: int, dedup: str) -> tuple[set[str], list]:
    src = tmp_path / "one-big-file.jsonl"
    if not src.exists():
        docs = sample_documents()
        docs += [{**d, "id": f"copy-{d['id']}"} for d in docs[::3]]  # exact duplicates
        src.write_text("".join(json.dumps(d) + "\n" for d in docs))
    out = tmp_path / name
    Pipeline([ReadJsonl(path=str(src)), stage_class(dedup)(), WriteParquet()], output=str(out),
             part_bytes=part_bytes, batch_bytes=50_000).run(executor="local", progress=False)
    assert_accounting(out)
    parts = sorted((out / "_work" / "segment-00").glob("part-*.parquet"))
    kept = set(pq.read_table(out / "write_parquet").column("id").to_pylist())
    return kept, parts


def test_parts_are_bounded_and_decisions_do_not_depend_on_their_size(tmp_path):
    for dedup in ("exact_dedup", "fuzzy_dedup"):
        whole, one = run(tmp_path, f"{dedup}-whole", 1 << 30, dedup)
        cut, many = run(tmp_path, f"{dedup}-cut", 600_000, dedup)
        assert len(one) == 1 and len(many) > 5
        for part in many[:-1]:
            text = pq.read_table(part, columns=["text"]).column("text")
            sizes = [len(t.encode()) for t in text.to_pylist()]
            assert sum(sizes[:-1]) < 600_000 <= sum(sizes)  # cut after the row reaching it
        assert whole == cut and len(whole) < sum(
            pq.read_metadata(p).num_rows for p in many)


def test_part_cuts_do_not_depend_on_batching(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in sample_documents()))
    digests = []
    for batch_bytes in (30_000, 3_000_000):
        out = tmp_path / f"b{batch_bytes}"
        Pipeline([ReadJsonl(path=str(src)), stage_class("exact_dedup")(), WriteParquet()],
                 output=str(out), part_bytes=400_000, batch_bytes=batch_bytes).run(
                     executor="local", progress=False)
        parts = sorted((out / "_work" / "segment-00").glob("part-*.parquet"))
        digests.append([p.read_bytes() for p in parts])
    assert digests[0] == digests[1]


def test_intermediate_compression_changes_the_parts_not_the_output(tmp_path):
    """``intermediate_compression`` is how the run stores its own parts (before the dataset
    stage, and the kept rows after it where more than a Parquet writer follows); the output and
    rejected files are the same bytes."""
    src = tmp_path / "in.jsonl"
    docs = sample_documents()
    docs += [{**d, "id": f"copy-{d['id']}"} for d in docs[::4]]
    src.write_text("".join(json.dumps(d) + "\n" for d in docs))
    outputs = []
    for compression in ("none", "zstd"):
        out = tmp_path / compression
        Pipeline([ReadJsonl(path=str(src)), stage_class("exact_dedup")(), WriteParquet()],
                 output=str(out), part_bytes=400_000,
                 intermediate_compression=compression).run(executor="local", progress=False)
        assert_accounting(out)
        written = list((out / "_work" / "segment-00").glob("part-*.parquet"))
        assert len(written) > 2
        codecs = {pq.read_metadata(p).row_group(0).column(0).compression for p in written}
        assert codecs == {"UNCOMPRESSED" if compression == "none" else "ZSTD"}
        # the kept rows a writer alone follows are in that writer's layout (writer fusion)
        kept = list((out / "_work" / "segment-01" / "out").glob("part-*.parquet"))
        assert kept and {pq.read_metadata(p).row_group(0).column(0).compression
                         for p in kept if pq.read_metadata(p).num_rows} == {"SNAPPY"}
        outputs.append({p.relative_to(out): p.read_bytes() for folder in ("write_parquet",
                        "rejected") for p in sorted((out / folder).rglob("*.parquet"))})
    assert outputs[0] == outputs[1] and outputs[0]
