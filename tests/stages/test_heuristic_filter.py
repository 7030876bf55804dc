"""heuristic_filter: parity with datatrove on real English text, language routing, the Japanese
presets on real and planted text, accounting through the product path."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from curator import HeuristicFilter, Pipeline, ReadJsonl, WriteParquet
from curator.stages.filters.heuristic.presets import PRESETS
from tests.conftest import assert_accounting, sample_documents

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
CORPUS = Path(os.environ.get("CURATOR_CORPUS",
                           Path(__file__).resolve().parents[3] / "shared" / "corpus"))
needs_corpus = pytest.mark.skipif(not CORPUS.exists(), reason="shared corpus not staged")


def reasons(docs: list[dict], **kw) -> list[str | None]:
    table = pa.table({"text": [d["text"] for d in docs],
                      "lang": [d.get("lang", "en") for d in docs]})
    return HeuristicFilter(**kw).reasons(table).to_pylist()


@needs_corpus
def test_decisions_agree_with_datatrove_on_real_english_documents():
    pytest.importorskip("datatrove")
    pytest.importorskip("spacy")
    sys.path.insert(0, str(BENCH))
    from bench_heuristics import ENGLISH, datatrove_filters, datatrove_reasons
    from heuristic_docs import english_documents

    docs = english_documents(limit_books=0)
    sample = docs[:124:8] + docs[124:2124:25] + docs[2124:]  # speeches, reviews, web articles
    filters = datatrove_filters()
    for name in ENGLISH:
        theirs = datatrove_reasons(filters[name], sample)
        ours = reasons(sample, presets=[name])
        agree = sum((a is None) == (b is None) for a, b in zip(theirs, ours, strict=True))
        assert agree / len(sample) >= 0.99, (name, agree, len(sample))


def test_word_rules_never_run_on_japanese_documents():
    english_junk = {"text": "# # # ... ... a b c", "lang": "en"}
    japanese = {"text": "# # # ... ... これは短い。", "lang": "ja"}
    chinese = {"text": "# # # ... ... 这是中文。", "lang": "zh"}
    docs = [english_junk, japanese, chinese]
    table = pa.table({"text": [d["text"] for d in docs], "lang": [d["lang"] for d in docs]})
    flt = HeuristicFilter(presets=["gopher_quality", "gopher_repetition", "c4", "fineweb",
                                   "swallow"])
    scores = flt.scores(table)
    for family in ("gopher_quality", "gopher_repetition", "c4", "fineweb"):
        for score, scope in PRESETS[family].scopes.items():
            column = scores[f"{family}.{score}"].to_pylist()
            assert column[1] is None, (family, score)          # ja: Japanese presets only
            if scope in ("words", "english"):
                assert column[2] is None, (family, score)      # zh: neutral rules only
    for score in PRESETS["swallow"].scopes:
        values = scores[f"swallow.{score}"].to_pylist()
        assert values[0] is None and values[2] is None and values[1] is not None
    got = flt.reasons(table).to_pylist()
    assert got[0].startswith("gopher_quality.")
    assert got[1].startswith("swallow.")
    # without a Japanese preset, ja gets only the neutral rules: never a word rule
    english_only = HeuristicFilter(presets=["gopher_quality", "gopher_repetition", "c4",
                                            "fineweb"])
    verdict = english_only.process(table)
    word_rules = {f"{f}.{r.name}" for f in ("gopher_quality", "gopher_repetition", "c4",
                                            "fineweb")
                  for r in PRESETS[f].rules if PRESETS[f].scopes[r.score] != "neutral"}
    ja_scores = english_only.scores(table.slice(1, 1))
    rules = english_only.rules(ja_scores)
    assert not any(rules[name].to_pylist()[0] for name in word_rules if name in rules)
    assert verdict.kept.num_rows + verdict.removed.num_rows == 3


@needs_corpus
def test_japanese_presets_remove_planted_pages_and_keep_clean_prose():
    sys.path.insert(0, str(BENCH))
    from bench_heuristics import planted
    from heuristic_docs import japanese_clean

    wiki = [d for d in japanese_clean() if d["id"].startswith("wiki/")][:60]
    bad = planted()
    for preset in ("swallow", "hojichar", "fineweb2_ja"):
        assert all(r is not None for r in reasons(bad, presets=[preset])), preset
        kept = sum(r is None for r in reasons(wiki, presets=[preset]))
        assert kept / len(wiki) >= 0.75, (preset, kept)


def test_overrides_are_checked_and_applied():
    doc = [{"text": " ".join(["the cat and the dog"] * 8) + ".", "lang": "en"}]  # 40 words
    assert reasons(doc, presets=["gopher_quality"]) == ["gopher_quality.min_words"]
    assert reasons(doc, presets=["gopher_quality"],
                   overrides={"gopher_quality.min_words": 30}) == [None]
    assert reasons(doc, presets=["gopher_quality"],
                   overrides={"gopher_quality.min_words": None}) == [None]
    with pytest.raises(ValidationError, match="no rule or knob"):
        HeuristicFilter(presets=["c4"], overrides={"c4.min_words": 3})
    with pytest.raises(ValidationError, match="not selected"):
        HeuristicFilter(presets=["c4"], overrides={"fineweb.max_newline_ratio": 1})
    with pytest.raises(ValidationError, match="unknown preset"):
        HeuristicFilter(presets=["nope"])


def test_rules_are_counted_histogrammed_and_scores_kept(tmp_path):
    docs = sample_documents()
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": d["id"], "text": d["text"],
                                       "lang": "ja" if "aozora" in d["id"] else "en"},
                                      ensure_ascii=False) + "\n" for d in docs))
    run = tmp_path / "run"
    flt = HeuristicFilter(keep_scores=True)
    Pipeline([ReadJsonl(path=str(src)), flt, WriteParquet()], output=str(run)).run(
        executor="local", progress=False)
    stats = assert_accounting(run)
    entry = stats["stages"][1]
    expected = {"empty"} | {f"{p}.{r.name}" for p in flt.presets for r in PRESETS[p].rules
                            if r.default is not None}
    assert set(entry["rules"]) == expected
    assert sum(entry["histograms"]["gopher_quality.words"]["counts"]) == sum(
        "aozora" not in d["id"] for d in docs)
    assert sum(entry["histograms"]["swallow.letters"]["counts"]) == sum(
        "aozora" in d["id"] for d in docs)
    out = pq.read_table(run / "write_parquet")
    assert "fineweb.line_punct_ratio" in out.column_names
