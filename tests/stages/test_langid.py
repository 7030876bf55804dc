"""langid: the bundled lid.176 model on real sentences (26 languages), label formats, filtering
by language and score, texts that must not crash it, and a run through the product path."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pytest

from curator import LangId, Pipeline, ReadJsonl, WriteParquet
from curator.stages.langid import normalise_label
from tests.conftest import assert_accounting, require_lid_model

require_lid_model()

DATA = Path(__file__).parents[1] / "data" / "langid" / "sentences.jsonl"


@pytest.fixture(scope="module")
def sentences() -> list[dict]:
    return [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def stage() -> LangId:
    stage = LangId()
    stage.setup()
    return stage


def _table(texts: list[str | None]) -> pa.Table:
    return pa.table({"id": [str(i) for i in range(len(texts))],
                     "text": pa.array(texts, pa.string())})


def test_accuracy_per_language(stage, sentences):
    result = stage.process(_table([d["text"] for d in sentences]))
    assert result.kept.num_rows == len(sentences)
    hits, total = defaultdict(int), defaultdict(int)
    for doc, lang in zip(sentences, result.kept.column("lang").to_pylist(), strict=True):
        total[doc["lang"]] += 1
        hits[doc["lang"]] += lang == doc["lang"]
    accuracy = {k: hits[k] / total[k] for k in total}
    assert len(accuracy) >= 20
    assert accuracy["ja"] >= 0.95 and accuracy["en"] >= 0.95, accuracy
    assert all(a >= 0.85 for a in accuracy.values()), accuracy
    scores = result.kept.column("lang_score").to_pylist()
    assert all(0.0 <= s <= 1.0 for s in scores)


def test_label_formats():
    assert normalise_label("__label__en") == "en"
    assert normalise_label("__label__eng_Latn") == "en"
    assert normalise_label("__label__jpn_Jpan") == "ja"
    assert normalise_label("__label__cmn_Hani") == "zh"
    assert normalise_label("__label__zsm_Latn") == "ms"
    assert normalise_label("__label__yue_Hant") == "yue"  # no 639-1 code: kept as written
    assert normalise_label("ja") == "ja"


def test_languages_and_min_score(sentences):
    stage = LangId(languages=["ja", "eng"], min_score={"en": 0.5, "ja": 0.99999})
    docs = [d for d in sentences if d["lang"] in ("ja", "en", "de")]
    result = stage.process(_table([d["text"] for d in docs]))
    reasons = result.removed.column("reason").to_pylist()
    assert stage.languages == ["ja", "en"]
    assert set(result.kept.column("lang").to_pylist()) <= {"ja", "en"}
    assert reasons.count("lang_not_wanted") >= 38  # the German sentences
    assert "lang_score_low" in reasons  # ja under its very high floor
    assert result.rule_failures["lang_not_wanted"] == reasons.count("lang_not_wanted")
    assert result.kept.num_rows + result.removed.num_rows == len(docs)
    assert "lang_score" in result.scores


def test_texts_that_must_not_crash(stage, sentences):
    ja = next(d["text"] for d in sentences if d["lang"] == "ja")
    en = next(d["text"] for d in sentences if d["lang"] == "en")
    texts = ["", None, "   \n\n ", "😀🎉👍", "\x00\x01\x1b\x7f\x08", "12345 678",
             f"{ja}\n{ja}\r\n{ja}", "a" * 10_000_000, (en + " ") * 200_000,
             f"{en}\x00{en}\u2028{en}"]
    result = stage.process(_table(texts))
    langs = result.kept.column("lang").to_pylist()
    scores = result.kept.column("lang_score").to_pylist()
    assert langs[:6] == [None] * 6 and scores[:6] == [0.0] * 6
    assert langs[6] == "ja" and langs[8] == "en" and langs[9] == "en"
    assert result.removed.num_rows == 0


def test_long_document_reads_several_windows(stage, sentences):
    ja = " ".join(d["text"] for d in sentences if d["lang"] == "ja")
    en = " ".join(d["text"] for d in sentences if d["lang"] == "en")
    # mostly English with a Japanese head: the windows over the whole text see English
    result = stage.process(_table([ja[:1500] + en * 3]))
    assert result.kept.column("lang").to_pylist() == ["en"]


def test_a_file_that_is_not_a_model(tmp_path):
    bad = tmp_path / "lid.bin"
    bad.write_text("not a model\n")
    with pytest.raises(ValueError, match="is not a fastText model"):
        LangId(model=str(bad))
    with pytest.raises(ValueError, match="does not exist"):
        LangId(model=str(tmp_path / "missing.ftz"))


def test_a_truncated_model_is_refused_without_hanging(tmp_path, monkeypatch):
    from curator.stages import langid
    from curator.stages.langid import bundled_model

    cut = tmp_path / "cut.ftz"
    cut.write_bytes(bundled_model().read_bytes()[:5000])
    monkeypatch.setattr(langid, "PROBE_SECONDS", 5.0)
    with pytest.raises(ValueError, match=r"truncated or corrupt|not a loadable"):
        LangId(model=str(cut))


def test_a_model_path_works(tmp_path, sentences):
    from curator.stages.langid import bundled_model

    stage = LangId(model=str(bundled_model()))
    result = stage.process(_table([sentences[0]["text"]]))
    assert result.kept.column("lang").to_pylist() == [sentences[0]["lang"]]


def test_pipeline_run(tmp_path, sentences):
    src = tmp_path / "in"
    src.mkdir()
    with open(src / "part-0.jsonl", "w", encoding="utf-8") as f:
        for d in sentences:
            f.write(json.dumps({"id": d["id"], "text": d["text"]}, ensure_ascii=False) + "\n")
    run = tmp_path / "run"
    Pipeline([ReadJsonl(path=f"{src}/*.jsonl"), LangId(languages=["ja", "en"]),
              WriteParquet()], output=str(run)).run(executor="local", progress=False)
    stats = assert_accounting(run)
    entry = next(s for s in stats["stages"] if s["type"] == "langid")
    assert entry["kept"] >= 190 and entry["removed_by_reason"]["lang_not_wanted"] >= 900
    assert sum(entry["histograms"]["lang_score"]["counts"]) == len(sentences)


def test_a_bad_model_in_yaml_is_one_line(tmp_path):
    from curator.config import ConfigError, load_pipeline

    bad = tmp_path / "lid.bin"
    bad.write_bytes(b"\x00" * 64)
    config = tmp_path / "p.yaml"
    config.write_text(f"output: {tmp_path}/run\nstages:\n"
                      f"  - {{type: read_jsonl, path: {tmp_path}/in.jsonl}}\n"
                      f"  - {{type: langid, model: {bad}}}\n")
    with pytest.raises(ConfigError) as err:
        load_pipeline(config)
    assert "p.yaml:4" in str(err.value) and "is not a fastText model" in str(err.value)
    assert "\n" not in str(err.value)
