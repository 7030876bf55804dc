"""The report's figures: a throughput never reads 0 for a slow stage (49 documents in 93 s is
0.53 docs/s); the header counts the documents of every source; each score a rule cuts shows its
threshold."""

from __future__ import annotations

import json

from curator import ExactDedup, HeuristicFilter, LengthFilter, Pipeline, ReadJsonl, WriteParquet
from curator.counts import per_second
from curator.report.html import render_html
from tests.conftest import ROOT, write_shards


def test_per_second_keeps_two_figures_below_ten():
    assert per_second(49, 93) == "0.53"
    assert per_second(30, 2) == "15"
    assert per_second(12_345, 2) == "6,172"
    assert per_second(0, 5) == "0" and per_second(5, 0) == "0"


def test_a_slow_stage_does_not_read_zero_documents_per_second_in_the_report():
    stage = {"name": "exact_dedup", "type": "exact_dedup", "in": 49, "kept": 49, "removed": 0,
             "failed": 0, "removed_by_reason": {}, "seconds": 93.0}
    page = render_html({"name": "slow", "stages": [stage], "seconds": 93.0})
    assert "0.53 docs/s" in page and "0.53 documents/s" in page
    assert " 0 docs/s" not in page


def test_the_header_counts_the_documents_of_every_source():
    def stage(name: str, n_in: int, kept: int, source: bool = False) -> dict:
        return {"name": name, "type": name, "in": n_in, "kept": kept, "removed": n_in - kept,
                "failed": 0, "removed_by_reason": {}, "seconds": 1.0,
                **({"source": True} if source else {})}

    page = render_html({"name": "two", "stages": [stage("web", 6, 6, True),
                                                  stage("books", 12, 12, True),
                                                  stage("filter", 18, 15)]})
    assert "18 documents in, 15 kept" in page


def test_every_score_a_rule_cuts_has_its_threshold_line(tmp_path):
    inputs = tmp_path / "in"
    write_shards(inputs, 2)
    run_dir = tmp_path / "run"
    Pipeline([ReadJsonl(path=f"{inputs}/*.jsonl"), LengthFilter(min_chars=2000),
              HeuristicFilter(presets=["gopher_quality", "c4", "fineweb"]), WriteParquet()],
             ).run(output=run_dir, executor="local", progress=False)
    stats = json.loads((run_dir / "stats.json").read_text())
    length, heuristic = stats["stages"][1], stats["stages"][2]
    assert length["thresholds"] == {"chars": [2000.0]}
    assert heuristic["thresholds"] and set(heuristic["thresholds"]) <= set(heuristic["histograms"])
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    drawn = sum(len(v) for s in (length, heuristic) for v in s["thresholds"].values())
    assert page.count('class="threshold"') == drawn
    assert "scored; threshold 2000)" in page


def test_the_dedup_phases_are_on_the_run_timeline(tmp_path):
    inputs = tmp_path / "in"
    write_shards(inputs, 2, copies=2)
    run_dir = tmp_path / "run"
    Pipeline([ReadJsonl(path=f"{inputs}/*.jsonl"), ExactDedup(), WriteParquet()]).run(
        output=run_dir, executor="local", progress=False)
    stats = json.loads((run_dir / "stats.json").read_text())
    spans = stats["phase_timeline"]
    assert [(s[1], s[2]) for s in spans] == [("exact_dedup", p) for p in ("hash", "group",
                                                                           "remove")]
    for _, _, _, start, end in spans:
        assert 0 <= start <= end <= stats["seconds"]
    assert [s[3] for s in spans] == sorted(s[3] for s in spans)  # in the order they ran
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "exact_dedup phases" in page and "exact_dedup: phase group" in page


def test_a_blend_that_repeats_a_source_too_often_is_warned_of(tmp_path):
    from curator import Tokenize

    small, large = tmp_path / "small", tmp_path / "large"
    for folder, n in ((small, 20), (large, 200)):
        folder.mkdir()
        (folder / "docs.jsonl").write_text("".join(json.dumps(
            {"id": f"{folder.name}-{i}", "text": f"Document {i} of the {folder.name} source "
             "says a few words about the weather and the harvest."}) + "\n"
            for i in range(n)), encoding="utf-8")
    run_dir = tmp_path / "run"
    stats = Pipeline([ReadJsonl(path=f"{small}/*.jsonl", name="read_small", source="small"),
                      ReadJsonl(path=f"{large}/*.jsonl", name="read_large", source="large"),
                      Tokenize(tokenizer=str(ROOT / "data" / "tokenizer" / "tokenizer.json"),
                               weights={"small": 0.9, "large": 0.1}, max_epochs=2.0)]).run(
        output=run_dir, executor="local", progress=False).stats
    tokenize = stats["stages"][-1]
    tokens = {s: v["train"]["tokens"] for s, v in tokenize["by_source"].items()}
    total = sum(tokens.values())
    assert tokenize["epochs"] == {"small": round(0.9 * total / tokens["small"], 3),
                                  "large": round(0.1 * total / tokens["large"], 3)}
    assert tokenize["epochs"]["small"] > 2.0 > tokenize["epochs"]["large"]
    warned = [w for w in tokenize["warnings"] if "max_epochs" in w]
    assert len(warned) == 1 and warned[0].startswith("source 'small' is repeated")
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert "<h2>Warnings</h2>" in page and "source &#x27;small&#x27; is repeated" in page
    # the limit is not part of the stage's key: changing it re-tokenizes nothing
    tokenizer = str(ROOT / "data" / "tokenizer" / "tokenizer.json")
    assert Tokenize(tokenizer=tokenizer, max_epochs=2.0).fingerprint() == \
        Tokenize(tokenizer=tokenizer, max_epochs=8.0, train_tokens=10**12).fingerprint()
