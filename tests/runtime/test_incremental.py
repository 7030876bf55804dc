"""Incremental runs: a changed configuration or added input reruns only what no longer matches
its key, and publishes the bytes a from-scratch run of the final configuration publishes.

The data: eight WARC files of unique pages (paragraphs of the bundled speeches), with exact
duplicates planted across files and one page quoting a task item. Each case runs the first
configuration, changes one thing, reruns into the same folder (no --force), and compares with a
from-scratch run of the final configuration (tests/published.py)."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from curator.api import Pipeline
from curator.runtime.driver.reuse_plan import reuse_plan
from curator.stages.decontaminate.stage import Decontaminate
from curator.stages.dedup.exact import ExactDedup
from curator.stages.extract.html import ExtractHtml
from curator.stages.filters.heuristic import HeuristicFilter
from curator.stages.langid import LangId
from curator.stages.sources.warc import ReadWarc
from curator.stages.tokenize import Tokenize
from curator.stages.writers import WriteParquet
from curator.tokenization.training import train_bpe
from tests.published import published, published_differences
from tests.warc_builder import write_warc

ROOT = Path(__file__).resolve().parents[2]
FILES = 8
PAGES = 12


def _paragraphs() -> list[str]:
    texts = []
    for name in ("inaugural", "state_union"):
        with gzip.open(ROOT / "data" / "sample" / f"{name}.jsonl.gz", "rt") as f:
            for line in f:
                text = json.loads(line)["text"]
                texts += [p.strip() for p in text.split("\n\n") if len(p.split()) > 60]
    return texts


def _page(title: str, body: str) -> bytes:
    paragraphs = "".join(f"<p>{p}</p>" for p in body.split("\n"))
    return (f"<html><head><title>{title}</title></head><body><article><h1>{title}</h1>"
            f"{paragraphs}</article></body></html>").encode()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return build_corpus(tmp_path_factory.mktemp("incremental"))


def build_corpus(root: Path) -> Path:
    """``warc/f-XX.warc.gz`` (XX even: 00 to 14), ``task.jsonl`` (a custom decontamination
    task), ``tok/tokenizer.json`` (a tokenizer)."""
    paragraphs = _paragraphs()
    task = [{"question": p} for p in paragraphs[:3]]
    pages = []
    for k in range(FILES * PAGES):
        body = "\n".join(paragraphs[3 + 2 * k: 5 + 2 * k])
        pages.append((f"https://example.org/{k}", body))
    # planted: exact duplicates across files, a page quoting the task item
    pages[PAGES + 1] = (pages[PAGES + 1][0], pages[2][1])
    pages[5 * PAGES + 2] = (pages[5 * PAGES + 2][0], pages[3][1])
    pages[4 * PAGES] = (pages[4 * PAGES][0], pages[4 * PAGES][1] + "\n" + task[0]["question"])
    (root / "warc").mkdir()
    for f in range(FILES):
        rows = pages[f * PAGES:(f + 1) * PAGES]
        write_warc(root / "warc" / f"f-{2 * f:02d}.warc.gz",
                   [(url, _page(url, body), "text/html") for url, body in rows])
    (root / "task.jsonl").write_text("".join(json.dumps(t) + "\n" for t in task))
    train_bpe(512, texts=paragraphs[:200], output=root / "tok")
    return root


def pipeline(corpus: Path, out: Path, warcs: Path | None = None, min_words: int = 50,
             tokenizer: Path | None = None, task: Path | None = None) -> Pipeline:
    return Pipeline([
        ReadWarc(path=str((warcs or corpus / "warc") / "*.warc.gz")),
        ExtractHtml(),
        LangId(languages=["en"]),
        HeuristicFilter(presets=["gopher_quality"],
                        overrides={"gopher_quality.min_words": min_words}),
        ExactDedup(),
        Decontaminate(tasks=[{"name": "speech", "path": str(task or corpus / "task.jsonl"),
                              "fields": ["question"]}], min_words=8),
        WriteParquet(),
        Tokenize(tokenizer=str(tokenizer or corpus / "tok" / "tokenizer.json")),
    ], output=str(out))


def run(p: Pipeline) -> dict:
    return p.run(executor="local", progress=False).stats


def same_as_scratch(p_final: Pipeline, run_dir: Path, scratch: Path) -> None:
    run(p_final.model_copy(update={"output": str(scratch)}))
    assert published_differences(run_dir, scratch) == []


def files_seen(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_ino, p.stat().st_mtime_ns) for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_added_files_between_existing_ones_run_alone(corpus, tmp_path):
    """(a) six files, then two more that sort between them: only the new shards run."""
    warcs = tmp_path / "warcs"
    shutil.copytree(corpus / "warc", warcs)
    for extra in ("f-06.warc.gz", "f-10.warc.gz"):  # set aside, added back later
        (warcs / extra).rename(tmp_path / extra)
    run_dir = tmp_path / "run"
    first = pipeline(corpus, run_dir, warcs=warcs)
    run(first)
    names_before = {p.name for p in (run_dir / "write_parquet").iterdir()}
    for extra in ("f-06.warc.gz", "f-10.warc.gz"):
        (tmp_path / extra).rename(warcs / extra)
    assert reuse_plan(first, run_dir)[0] == "segment 0: 6 shards reused, 2 computed"
    stats = run(first)
    assert stats["reuse"]["segment-00"]["reused"] == 6
    assert stats["reuse"]["segment-00"]["ran"] == 2
    # exact dedup: the old parts' hashes are kept, the new ones' computed; the groups run again
    hashed = stats["reuse"]["segment-01"]["phases"]
    assert (hashed["hash"]["tasks"], hashed["hash"]["reused"]) == (8, 6)
    assert hashed["group"]["reused"] == 0
    # decontamination: the n-gram matches of parts exact dedup left as they were are kept
    matched = stats["reuse"]["segment-02"]["phases"]["match"]
    assert matched["tasks"] == 8 and 4 <= matched["reused"] < 8
    assert names_before < {p.name for p in (run_dir / "write_parquet").iterdir()}
    same_as_scratch(first, run_dir, tmp_path / "scratch")


@pytest.mark.parametrize("how", ["swap", "retrain"])
def test_a_changed_tokenizer_reruns_tokenize_alone(corpus, tmp_path, how):
    """(b) only the last segment runs, and in it only tokenize: the curated Parquet and every
    earlier file stay as they were (inode and mtime)."""
    tok = tmp_path / "tok.json"
    shutil.copy(corpus / "tok" / "tokenizer.json", tok)
    run_dir = tmp_path / "run"
    run(pipeline(corpus, run_dir, tokenizer=tok))
    untouched = files_seen(run_dir / "write_parquet") | files_seen(run_dir / "rejected")
    other = tmp_path / "other"
    train_bpe(300, texts=[json.dumps(i) * 40 for i in range(50)], output=other)
    final_tok = tok
    if how == "swap":
        final_tok = other / "tokenizer.json"
    else:
        shutil.copy(other / "tokenizer.json", tok)
    plan = reuse_plan(pipeline(corpus, run_dir, tokenizer=final_tok), run_dir)
    assert plan == [f"segment 0: {FILES} shards reused, 0 computed",
                    "segment 1 (exact_dedup): reused", "segment 2 (decontaminate): reused",
                    f"segment 3: 0 shards reused, {FILES} computed; writer files kept: "
                    f"write_parquet {FILES}"]
    stats = run(pipeline(corpus, run_dir, tokenizer=final_tok))
    reuse = stats["reuse"]
    last = f"segment-{len(reuse) - 1:02d}"
    assert reuse["segment-00"] == {**reuse["segment-00"], "reused": FILES, "ran": 0}
    assert reuse["segment-01"]["phases"]
    assert all(v["reused"] == v["tasks"] for v in reuse["segment-01"]["phases"].values())
    assert reuse[last]["stages_ran"] == {"write_parquet": 0, "tokenize": FILES}
    assert reuse[last]["writers"] == {"write_parquet": FILES}
    assert files_seen(run_dir / "write_parquet") | files_seen(run_dir / "rejected") == untouched
    same_as_scratch(pipeline(corpus, run_dir, tokenizer=final_tok), run_dir, tmp_path / "s")


def test_a_changed_threshold_decides_again_from_kept_scores(corpus, tmp_path):
    """(c) a heuristic threshold: no WARC read, no extraction, no language ID scoring; the
    filter decides from its kept scores; extraction's and langid's files stay untouched."""
    run_dir = tmp_path / "run"
    run(pipeline(corpus, run_dir, min_words=50))
    plan = reuse_plan(pipeline(corpus, run_dir, min_words=400), run_dir)
    assert plan[0] == (f"segment 0: 0 shards reused, {FILES} computed; from the checkpoint (no "
                       f"extraction) {FILES}; scores kept: heuristic_filter {FILES}; scores "
                       f"kept: langid {FILES}")
    assert plan[1].startswith("segment 1: computed where what it reads changes")
    untouched = files_seen(run_dir / "rejected" / "langid") \
        if (run_dir / "rejected" / "langid").exists() else {}
    stats = run(pipeline(corpus, run_dir, min_words=400))
    first = stats["reuse"]["segment-00"]
    assert first["ran"] == FILES
    assert first["stages_ran"]["read_warc"] == first["stages_ran"]["extract_html"] == 0
    assert first["checkpoint"] == {"shards": FILES}
    assert first["scores"] == {"heuristic_filter": FILES, "langid": FILES}
    counts = {s["name"]: s for s in stats["stages"]}
    assert counts["heuristic_filter"]["removed"] > 0
    if untouched:
        assert files_seen(run_dir / "rejected" / "langid") == untouched
    same_as_scratch(pipeline(corpus, run_dir, min_words=400), run_dir, tmp_path / "scratch")


def test_a_changed_task_file_reruns_decontamination_on(corpus, tmp_path):
    """(d) the task file's contents change at the same path: the shard segment and exact dedup
    are reused, decontamination and what follows run."""
    task = tmp_path / "task.jsonl"
    shutil.copy(corpus / "task.jsonl", task)
    run_dir = tmp_path / "run"
    run(pipeline(corpus, run_dir, task=task))
    task.write_text(json.dumps({"question": "entirely different words that match no page in "
                                "this corpus at all, none of them, whatever we try"}) + "\n")
    stats = run(pipeline(corpus, run_dir, task=task))
    assert stats["reuse"]["segment-00"]["ran"] == 0
    phases = stats["reuse"]["segment-01"]["phases"]
    assert phases
    assert all(v["reused"] == v["tasks"] for v in phases.values())
    decontam = stats["reuse"]["segment-02"]["phases"]
    assert any(v["reused"] < v["tasks"] for v in decontam.values())
    same_as_scratch(pipeline(corpus, run_dir, task=task), run_dir, tmp_path / "scratch")


def test_a_library_upgrade_reruns_the_stages_it_decides(corpus, tmp_path, monkeypatch):
    """(e) a new trafilatura (simulated): extraction and everything after it run again."""
    from curator.store import keys

    run_dir = tmp_path / "run"
    run(pipeline(corpus, run_dir))
    real = keys.library_version
    monkeypatch.setattr(keys, "library_version",
                        lambda name: "99.0" if name == "trafilatura" else real(name))
    stats = run(pipeline(corpus, run_dir))
    assert stats["reuse"]["segment-00"]["ran"] == FILES
    assert stats["reuse"]["segment-00"]["stages_ran"]["extract_html"] == FILES
    same_as_scratch(pipeline(corpus, run_dir), run_dir, tmp_path / "scratch")
    assert published(run_dir)


def test_gc_removes_what_the_current_configuration_does_not_use(corpus, tmp_path):
    """A filter dropped from the pipeline: each shard's rerun removes its kept scores (no
    manifest records them any more). ``curate gc RUN`` removes what no record names (here: the
    files a killed run left, planted) and nothing published; the next run reuses every shard."""
    from curator.runtime.driver.run_gc import gc_run

    run_dir = tmp_path / "run"
    run(pipeline(corpus, run_dir))
    final = pipeline(corpus, run_dir)
    final.stages = [s for s in final.stages if s.type != "heuristic_filter"]
    run(final)
    assert not list((run_dir / "_store" / "scores" / "heuristic_filter").glob("*.parquet"))
    assert len(list((run_dir / "_store" / "scores" / "langid").glob("*.parquet"))) == FILES
    planted = [run_dir / "_store" / "scores" / "dropped" / "part-x.parquet",
               run_dir / "_work" / "segment-00" / "part-x-0000.parquet",
               run_dir / "write_parquet" / ".part-x.parquet.tmp"]
    for path in planted:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"PAR1" + b"\0" * 100)
    before = published(run_dir)
    assert gc_run(run_dir).files == len(planted)
    assert not any(p.exists() for p in planted)
    assert published(run_dir) == before
    again = run(final)
    assert again["reuse"]["segment-00"] == {**again["reuse"]["segment-00"], "reused": FILES,
                                            "ran": 0}


def test_a_finished_run_holds_a_bounded_number_of_files_per_shard(corpus, tmp_path):
    """Per input shard, whatever the number of shuffle buckets: its manifests, intermediate
    parts, checkpoint and scores, its rejected and error files, one hash file and one n-gram
    match file, the dedup and decontamination outputs and markers, its writers' files
    (docs/reuse.md lists them); nothing per bucket once the dataset stages have finished."""
    run_dir = tmp_path / "run"
    p = pipeline(corpus, run_dir)
    p.stages[4] = ExactDedup(buckets=8)
    run(p)
    parts = sorted(f.stem for f in (run_dir / "_manifests" / "segment-00").glob("part-*.json"))
    assert len(parts) == FILES
    hashes = sorted((run_dir / "_work" / "segment-01" / "hash").glob("*.arrow"))
    assert [h.stem for h in hashes] == [f"{p}-0000" for p in parts]  # one per part, not per bucket
    files = [f for f in run_dir.rglob("*") if f.is_file()]
    per_shard = {part: sum(part in str(f.relative_to(run_dir)) for f in files) for part in parts}
    assert max(per_shard.values()) <= 40, per_shard
    assert not (run_dir / "_work" / "segment-01" / "decisions").exists()  # trimmed
    rest = len(files) - sum(per_shard.values())  # per run
    assert rest <= 40, sorted(str(f.relative_to(run_dir)) for f in files
                                      if not any(part in str(f) for part in parts))


def test_added_files_reuse_the_old_parts_minhash_signatures(corpus, tmp_path):
    """(a) with fuzzy dedup: the old parts' band rows are kept (one file per part, read as hash
    ranges whatever the bucket count), the new parts' computed; the rest runs over all."""
    from curator.stages.dedup.fuzzy import FuzzyDedup

    warcs = tmp_path / "warcs"
    shutil.copytree(corpus / "warc", warcs)
    for extra in ("f-06.warc.gz", "f-10.warc.gz"):
        (warcs / extra).rename(tmp_path / extra)
    run_dir = tmp_path / "run"

    def fuzzy(out: Path) -> Pipeline:
        p = pipeline(corpus, out, warcs=warcs)
        p.stages[4] = FuzzyDedup(shingle="word")
        return p

    run(fuzzy(run_dir))
    for extra in ("f-06.warc.gz", "f-10.warc.gz"):
        (tmp_path / extra).rename(warcs / extra)
    stats = run(fuzzy(run_dir))
    phases = stats["reuse"]["segment-01"]["phases"]
    assert (phases["signatures"]["tasks"], phases["signatures"]["reused"]) == (8, 6)
    assert phases["remove"]["reused"] == 0
    same_as_scratch(fuzzy(run_dir), run_dir, tmp_path / "scratch")
