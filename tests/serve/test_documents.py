"""The document browser's data layer on real runs: removed documents by reason and id, kept
documents after a stage in the middle of a segment, score ranges, text search, one document's
history of rewrites, malformed queries, and files outside the run refused."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator import Clean, ExactDedup, LengthFilter, Pipeline, ReadJsonl, WriteParquet
from curator.rejected import in_sample
from curator.serve.documents import (
    DocumentQuery,
    UnknownScore,
    UnknownStage,
    get_document,
    query_documents,
    stage_catalog,
)
from curator.store.doc_index import lookup
from curator.store.run_dir import RunDir
from tests.conftest import sample_documents

#: A copy of a sample page under another id: exact_dedup removes one of the two.
DUPLICATE = "copy-of-first"


def input_documents() -> list[dict]:
    """The sample documents with a URL and a language, every third one with spaces and a
    zero-width character that clean removes, and one exact duplicate."""
    docs = []
    for i, doc in enumerate(sample_documents()):
        text = doc["text"] if i % 3 else f"  {doc['text']}  \u200b\n\n\n"
        docs.append({"id": doc["id"], "text": text, "url": f"https://example.org/{doc['id']}",
                     "lang": "ja" if doc["id"][0].isdigit() else "en"})
    docs.append({**docs[1], "id": DUPLICATE, "url": "https://example.org/copy"})
    return docs


def build_run(folder: Path, rejected: str = "documents") -> Path:
    """read → clean → length_filter (2,000 chars) | exact_dedup | length_filter_2 (5,000 chars)
    → write_parquet: three segments, the middle one a dataset stage."""
    inputs = folder / "in"
    inputs.mkdir(parents=True)
    docs = input_documents()
    for shard in range(3):
        (inputs / f"shard-{shard}.jsonl").write_text(
            "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs[shard::3]),
            encoding="utf-8")
    run = folder / "run"
    Pipeline([ReadJsonl(path=f"{inputs}/*.jsonl"), Clean(), LengthFilter(min_chars=2000),
              ExactDedup(), LengthFilter(min_chars=5000), WriteParquet()],
             rejected=rejected).run(output=run, executor="local", progress=False)
    return run


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return build_run(tmp_path_factory.mktemp("documents"))


def table(folder: Path) -> pa.Table:
    return pa.concat_tables([pq.read_table(p) for p in sorted(folder.glob("*.parquet"))],
                            promote_options="permissive")


def ask(run: Path, **params: str) -> dict:
    return query_documents(run, DocumentQuery.from_params({"limit": "500", **params}))


def test_catalog_names_segments_counts_rewrites_and_scores(run):
    stages = {s["name"]: s for s in stage_catalog(run)}
    assert list(stages) == ["read_jsonl", "clean", "length_filter", "exact_dedup",
                            "length_filter_2", "write_parquet"]
    assert [stages[n]["segment"] for n in stages] == [0, 0, 0, 1, 2, 2]
    assert stages["exact_dedup"]["kind"] == "dataset"
    for name in ("length_filter", "exact_dedup", "length_filter_2"):
        assert stages[name]["removed"] == table(run / "rejected" / name).num_rows > 0
    assert stages["exact_dedup"]["reasons"] == {"exact_duplicate": 1}
    assert [n for n, s in stages.items() if s["rewrites"]] == ["clean"]
    assert stages["length_filter"]["score_columns"] == ["chars"]
    assert all(s["kept_available"] for s in stages.values())


def test_removed_documents_by_reason_and_by_id_with_their_text(run):
    removed = table(run / "rejected" / "length_filter")
    texts = dict(zip(removed.column("id").to_pylist(), removed.column("text").to_pylist(),
                     strict=True))
    found = ask(run, stage="length_filter", removed="true", reason="too_short")
    assert {d["id"] for d in found["documents"]} == set(texts)
    assert found["matched"] == len(texts) and not found["has_more"]
    assert all(d["stage"] == "length_filter" for d in found["documents"])
    assert ask(run, stage="length_filter", removed="true", reason="other")["matched"] == 0

    short = min(texts, key=lambda i: len(texts[i]))
    by_id = ask(run, removed="true", id=short)
    assert by_id["indexed"] and by_id["matched"] == 1
    [doc] = by_id["documents"]
    assert (doc["stage"], doc["reason"], doc["text"]) == ("length_filter", "too_short",
                                                          texts[short])
    whole = get_document(run, short)
    assert whole["end"] == {"status": "removed", "stage": "length_filter",
                            "reason": "too_short", "file": whole["end"]["file"]}
    assert whole["text"] == texts[short]
    assert whole["scores"]["length_filter"]["chars"] == len(texts[short])


def test_kept_after_a_stage_in_the_middle_of_a_segment(run):
    """Kept after clean (segment 0 goes on to length_filter): every document read, with the
    text clean left; kept after length_filter_2 (before the writer): the writer's documents."""
    after_clean = ask(run, stage="clean")
    assert after_clean["matched"] == len(input_documents())
    assert {d["id"] for d in after_clean["documents"]} == {d["id"] for d in input_documents()}
    handed_on = table(run / "_work" / "segment-00")
    dropped = table(run / "rejected" / "length_filter")
    reference = dict(zip(handed_on.column("id").to_pylist() + dropped.column("id").to_pylist(),
                         handed_on.column("text").to_pylist() + dropped.column("text").to_pylist(),
                         strict=True))
    for doc in after_clean["documents"]:
        assert doc["stage"] is None and doc["reason"] is None
        assert doc["text"] == reference[doc["id"]][:2000]
        assert doc["text_truncated"] == (len(reference[doc["id"]]) > 2000)

    written = set(table(run / "write_parquet").column("id").to_pylist())
    assert {d["id"] for d in ask(run, stage="length_filter_2")["documents"]} == written
    assert {d["id"] for d in ask(run)["documents"]} == written
    deduplicated = set(table(run / "_work" / "segment-01" / "out").column("id").to_pylist())
    assert {d["id"] for d in ask(run, stage="exact_dedup")["documents"]} == deduplicated


def test_score_range_joins_the_filters_scores(run):
    scores = table(run / "_store" / "scores" / "length_filter")
    chars = dict(zip(scores.column("id").to_pylist(), scores.column("chars").to_pylist(),
                     strict=True))
    expected = {i for i, c in chars.items() if 3000 <= c <= 10000}
    found = ask(run, stage="clean", score="chars:3000:10000")
    assert {d["id"] for d in found["documents"]} == expected and found["matched"] == len(expected)
    assert all(3000 <= d["scores"]["chars"] <= 10000 for d in found["documents"])
    below = ask(run, stage="length_filter_2", removed="true", score="chars::4000", lang="en")
    removed = table(run / "rejected" / "length_filter_2").to_pylist()
    later = table(run / "_store" / "scores" / "length_filter_2")
    chars_2 = dict(zip(later.column("id").to_pylist(), later.column("chars").to_pylist(),
                       strict=True))
    assert {d["id"] for d in below["documents"]} == {
        r["id"] for r in removed if r["lang"] == "en" and chars_2[r["id"]] <= 4000}
    with pytest.raises(UnknownScore, match="no score 'no_such_score'"):
        ask(run, score="no_such_score:1:")


def test_text_search_pages_and_stops_early(run):
    written = table(run / "write_parquet")
    hits = [i for i, t in zip(written.column("id").to_pylist(), written.column("text").to_pylist(),
                              strict=True) if "liberty" in t.lower()]
    assert len(hits) > 4
    everything = ask(run, q="LiBeRtY")
    assert sorted(d["id"] for d in everything["documents"]) == sorted(hits)
    assert everything["matched"] == len(hits)
    first = query_documents(run, DocumentQuery(q="liberty", limit=2))
    assert first["has_more"] and first["matched"] is None and len(first["documents"]) == 2
    second = query_documents(run, DocumentQuery(q="liberty", limit=2, offset=2))
    assert [d["id"] for d in first["documents"] + second["documents"]] == \
        [d["id"] for d in everything["documents"][:4]]


def test_one_document_with_the_text_before_and_after_clean(run):
    written = {r["id"]: r for r in table(run / "write_parquet").to_pylist()}
    originals = {d["id"]: d["text"] for d in input_documents()}
    doc_id = next(i for i in written if originals[i].startswith("  "))
    doc = get_document(run, doc_id)
    assert doc["end"]["status"] == "kept" and doc["text"] == written[doc_id]["text"]
    assert doc["url"] == f"https://example.org/{doc_id}" and doc["lang"] == written[doc_id]["lang"]
    [step] = doc["history"]
    assert step["stage"] == "clean" and step["before"] == originals[doc_id]
    assert step["after"] == written[doc_id]["text"]
    assert "".join(t for op, t in step["diff"] if op != "+") == step["before"]
    assert "".join(t for op, t in step["diff"] if op != "-") == step["after"]
    assert ["-", "  "] in step["diff"]
    assert set(doc["scores"]) == {"length_filter", "length_filter_2"}
    assert get_document(run, "no-such-document") is None


def test_rejected_ids_runs_list_mid_segment_documents_without_the_text_not_kept(tmp_path):
    """Kept after a stage in the middle of a segment: the segment's output and what later
    stages of it removed; with ``rejected: ids`` those come with their ids and reasons, their
    text for the 1 % sample only, and the answer says so."""
    run = build_run(tmp_path, rejected="ids")
    stages = {s["name"]: s for s in stage_catalog(run)}
    assert stages["clean"]["kept_available"] and stages["length_filter"]["kept_available"]
    answer = ask(run, stage="clean", limit="500")
    later = pq.read_table(run / "rejected" / "length_filter").column("id").to_pylist()
    passed = {s["name"]: s for s in json.loads((run / "stats.json").read_text())["stages"]}
    assert later and answer["available"] and answer["matched"] == passed["length_filter"]["in"]
    listed = {d["id"]: d for d in answer["documents"]}
    assert set(later) <= set(listed)
    assert any("rejected: ids" in w for w in answer["warnings"])
    assert all(listed[i]["text"] is None for i in later
               if not in_sample(pa.array([i]))[0])
    shutil.rmtree(run / "_work" / "segment-01" / "out")
    trimmed = ask(run, stage="exact_dedup")
    assert trimmed["available"] is False and "not there" in trimmed["why"]


@pytest.mark.parametrize("params, message", [
    ({"colour": "red"}, "unknown parameter"),
    ({"limit": "ten"}, "whole number"),
    ({"limit": "0"}, "between 1 and 500"),
    ({"limit": "501"}, "between 1 and 500"),
    ({"offset": "-1"}, "0 or more"),
    ({"removed": "maybe"}, "true or false"),
    ({"score": "chars"}, "NAME:MIN:MAX"),
    ({"score": ":1:2"}, "NAME:MIN:MAX"),
    ({"score": "chars::"}, "a minimum, a maximum or both"),
    ({"score": "chars:a:2"}, "not a number"),
    ({"score": "chars:1:inf"}, "not a finite number"),
    ({"reason": "too_short"}, "removed=true"),
])
def test_malformed_queries_raise_value_error(params, message):
    with pytest.raises(ValueError, match=message):
        DocumentQuery.from_params(params)


def test_query_parameters_parse():
    query = DocumentQuery.from_params({"stage": "clean", "removed": "true", "score": "chars:1.5:",
                                       "token": "t", "q": "", "limit": "7"})
    assert (query.stage, query.removed, query.scores, query.q, query.limit) == (
        "clean", True, {"chars": (1.5, None)}, None, 7)


def test_unknown_stage_is_a_lookup_error(run):
    with pytest.raises(UnknownStage):
        ask(run, stage="no_such_stage")


def test_files_leading_out_of_the_run_are_refused(run, tmp_path):
    """A rejected folder that is a link to a folder outside the run, and an index naming a file
    outside it: neither is read (nor is a broken file, which is named)."""
    copy = tmp_path / "run"
    shutil.copytree(run, copy, symlinks=True)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    pq.write_table(pa.table({"id": ["secret"], "text": ["outside text"], "reason": ["x"]}),
                   outside / "part-0.parquet")
    os.symlink(outside, copy / "rejected" / "linked")
    (copy / "rejected" / "length_filter" / "part-broken.parquet").write_bytes(b"PAR1 cut short")
    answer = ask(copy, removed="true")
    assert "secret" not in {d["id"] for d in answer["documents"]}
    assert answer["matched"] == sum(stage["removed"] for stage in stage_catalog(run))
    assert any("outside the run folder" in w for w in answer["warnings"])
    assert any("part-broken.parquet: not readable" in w for w in answer["warnings"])
    assert ask(copy, removed="true", id="secret")["documents"] == []
    assert get_document(copy, "secret") is None

    listing = json.loads((copy / "_index" / "files.json").read_text())
    ordinal, first = next((i, f["path"]) for i, f in enumerate(listing["files"])
                          if pq.ParquetFile(copy / f["path"]).metadata.num_rows)
    shutil.copy2(copy / first, outside / "copy.parquet")  # same size and mtime
    listing["files"][ordinal]["path"] = "../elsewhere/copy.parquet"
    (copy / "_index" / "files.json").write_text(json.dumps(listing))
    doc_id = pq.read_table(copy / first).column("id")[0].as_py()
    found = lookup(RunDir(copy), doc_id, "id")
    assert not any(loc.path.startswith("..") for loc in found)
    assert [loc.via for loc in found if loc.path == first] == ["scan"]
