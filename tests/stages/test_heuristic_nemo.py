"""The ``nemo_en`` preset: NeMo Curator 1.4's English heuristic pipeline. Each planted case breaks
one of NeMo's rules as NeMo defines it (its YAML thresholds) on top of a clean real document;
word rules stay off Japanese documents. Decision parity with NeMo itself on the 3141 real
English documents is measured by benchmarks/bench_nemo.py (NeMo needs its own virtualenv)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pytest

from curator import HeuristicFilter
from curator.stages.filters.heuristic.presets import PRESETS

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus"
SPEECHES = CORPUS / "text_corpus" / "speeches" / "inaugural.jsonl.gz"
COMMON = {"the", "be", "to", "of", "and", "that", "have", "with"}


@pytest.fixture(scope="module")
def clean() -> str:
    if not SPEECHES.exists():
        pytest.skip("shared corpus not staged")
    with gzip.open(SPEECHES, "rt", encoding="utf-8") as f:
        return json.loads(f.readline())["text"]


def reasons(texts: list[str], langs: list[str] | None = None) -> list[str | None]:
    table = pa.table({"text": texts, "lang": langs or ["en"] * len(texts)})
    return HeuristicFilter(presets=["nemo_en"]).reasons(table).to_pylist()


def test_a_real_speech_passes_and_each_planted_defect_fails_its_own_rule(clean):
    words = clean.split()
    one_line = clean.replace("\n", " ")
    distinct = list(dict.fromkeys(w.strip(".,;:") for w in words))
    planted = {
        "nemo_en.max_urls_ratio": clean + " " + " ".join(
            f"https://example.com/page/{i}/index.html" for i in range(400)),
        "nemo_en.min_repeated_lines": "\n".join([one_line] + ["Buy now."] * 3),
        "nemo_en.min_word_count": " ".join(words[:40]),
        "nemo_en.max_boilerplate_string_ratio": "\n\n".join(
            [one_line] + ["Read our privacy policy."] * 2),
        # NeMo counts lower-case forms only: capitalised "The" does not save it
        "nemo_en.min_common_english_words": " ".join(w for w in words if w not in COMMON),
        "nemo_en.max_bullet_ratio": "\n".join(
            "•" + " ".join(distinct[k:k + 3]) + "." for k in range(0, 300, 3)),
    }
    got = reasons([clean, *planted.values()])
    assert got[0] is None
    assert dict(zip(planted, got[1:], strict=True)) == {k: k for k in planted}


def test_duplicate_ngrams_are_charged_as_nemo_counts_them():
    # 60 distinct words twice: the first repeated 5-gram costs its 5 words and 4 spaces, each
    # later one (overlapping the previous by 4 words) one word and one space: the second half.
    words = [f"w{i:02d}" for i in range(60)]
    text = " ".join(words + words)
    scores = HeuristicFilter(presets=["nemo_en"]).scores(pa.table({"text": [text]}))
    dup5 = scores["nemo_en.repeating_dup_5gram"][0].as_py()
    assert dup5 == pytest.approx(len(" ".join(words)) / len(text), rel=1e-12)


def test_word_rules_stay_off_japanese_documents():
    text = "これは日本語の文章です。" * 20
    table = pa.table({"text": [text], "lang": ["ja"]})
    scores = HeuristicFilter(presets=["nemo_en"]).scores(table)
    for score, scope in PRESETS["nemo_en"].scopes.items():
        value = scores[f"nemo_en.{score}"][0].as_py()
        assert (value is None) == (scope in ("words", "english")), score
    assert reasons([text], ["ja"]) == [None]
