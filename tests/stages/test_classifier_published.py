"""classifier_filter on quality models as published (tests/stages/quality_models.py builds them
from configs with random weights, saved as their authors save them): its scores equal each
model's reference computation on the same texts within 1e-5 (CPU, fp32), in the stage and
through a pipeline run read back from its output; decisions are rules over those columns; a
model applies to its languages only."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator import ClassifierFilter, LangId, Pipeline, ReadJsonl, WriteParquet
from tests.conftest import assert_accounting, require_lid_model, sample_documents
from tests.stages import quality_models as qm

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("fasttext")

TOL = 1e-5


def _paragraphs(lang: str, n: int, chars: int = 1500) -> list[str]:
    """``n`` real paragraphs (200 characters or more, cut at ``chars``): English speeches or
    Japanese literature from the bundled sample."""
    docs = [d for d in sample_documents() if d["id"].startswith("000") == (lang == "ja")]
    blocks = [b.strip() for d in docs for b in d["text"].split("\n\n" if lang == "en" else "\n")]
    return [b[:chars] for b in blocks if len(b) >= 200][:n]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    english = _paragraphs("en", 30)
    long = " ".join(english)  # far beyond the 128 tokens the FineWeb-Edu model reads
    return [*english, long, "x", "Mixed 日本語 text with ümlauts.", "word " * 5000]


@pytest.fixture(scope="module")
def fineweb(tmp_path_factory, texts) -> Path:
    return qm.fineweb_edu_model(tmp_path_factory.mktemp("fineweb-edu"), texts)


@pytest.fixture(scope="module")
def nemo(tmp_path_factory, texts):
    folder = tmp_path_factory.mktemp("nemo-quality")
    backbone = tmp_path_factory.mktemp("deberta-v3-config")
    return folder, backbone, qm.nemo_checkpoint(folder, backbone, texts)


def _table(texts: list[str | None], **columns) -> pa.Table:
    return pa.table({"id": [f"d{i}" for i in range(len(texts))],
                     "text": pa.array(texts, pa.string()), **columns})


def _write(folder: Path, records: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "in.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                    encoding="utf-8")
    return path


def _run(tmp_path: Path, records: list[dict], *stages) -> tuple[dict[str, dict], dict]:
    """The records through read_jsonl -> stages -> write_parquet; each kept row by id, and
    stats.json (accounting checked)."""
    path = _write(tmp_path / "in", records)
    run = tmp_path / "run"
    Pipeline([ReadJsonl(path=str(path)), *stages, WriteParquet()], output=str(run)).run(
        progress=False, executor="local")
    stats = assert_accounting(run)
    rows = pq.read_table(run / "write_parquet").to_pylist()
    return {r["id"]: r for r in rows}, stats


# ---------------------------------------------------------------------------- FineWeb-Edu
def test_fineweb_edu_regression_scores_equal_the_model_cards_code(fineweb, texts, tmp_path):
    score, int_score = qm.fineweb_edu_reference(fineweb, texts)
    assert len(set(int_score)) >= 3  # the head spreads scores over the scale
    stage = ClassifierFilter(model=str(fineweb), device="cpu", batch_tokens=300)
    out = stage.process(_table(texts)).kept
    np.testing.assert_allclose(out.column("quality_score").to_numpy(), score, rtol=0, atol=TOL)
    assert out.column("quality_score_int").to_pylist() == int_score
    assert "quality_score_label" not in out.column_names

    # through a pipeline, FineWeb-Edu's decision (int_score >= 3) and its column names
    kept, stats = _run(tmp_path, [{"id": f"d{i}", "text": t} for i, t in enumerate(texts)],
                       ClassifierFilter(model=str(fineweb), score_field="score",
                                        min_int_score=3, device="cpu"))
    expected = {f"d{i}" for i, s in enumerate(int_score) if s >= 3}
    assert set(kept) == expected and 0 < len(expected) < len(texts)
    for doc, row in kept.items():
        assert row["score"] == pytest.approx(score[int(doc[1:])], abs=TOL)
        assert row["score_int"] == int_score[int(doc[1:])]
    entry = next(s for s in stats["stages"] if s["type"] == "classifier_filter")
    assert entry["removed_by_reason"] == {"low_quality": len(texts) - len(expected)}
    assert sum(entry["histograms"]["regression_score"]["counts"]) == len(texts)


def test_int_score_rounds_as_python_does():
    from curator.stages.filters.classifier_heads import int_scores

    values = np.array([-1.0, 0.5, 1.5, 2.4999, 2.5, 3.5, 4.5, 5.2, 7.0])
    expected = [int(round(max(0, min(v, 5)))) for v in values]  # noqa: RUF046 (FineWeb-Edu's)
    assert int_scores(values).tolist() == expected


def test_batches_budgets_and_chunks_do_not_change_scores(fineweb, texts, monkeypatch):
    """One text per batch (never padded, so no attention mask), one large padded batch, and
    texts tokenized in chunks of 4 while the model runs the previous chunk: the same scores."""
    from curator.stages.filters import classifier_torch

    table = _table(texts)
    one = ClassifierFilter(model=str(fineweb), device="cpu", batch_size=1).process(table)
    monkeypatch.setattr(classifier_torch, "CHUNK", 4)
    chunked = ClassifierFilter(model=str(fineweb), device="cpu").process(table)
    np.testing.assert_allclose(one.kept.column("quality_score").to_numpy(),
                               chunked.kept.column("quality_score").to_numpy(), rtol=0, atol=TOL)
    monkeypatch.undo()
    many = ClassifierFilter(model=str(fineweb), device="cpu", batch_tokens=100_000,
                            threads=1).process(table)
    np.testing.assert_allclose(one.kept.column("quality_score").to_numpy(),
                               many.kept.column("quality_score").to_numpy(), rtol=0, atol=TOL)


def test_a_long_text_is_read_from_its_head(fineweb):
    """Tokens from the head of a long text (cut at a space) equal the whole text's: the model
    reads its first 128 tokens either way; a head that does not fill them is not used."""
    from transformers import AutoTokenizer

    from curator.stages.filters.classifier_torch import batch_encoder, head, token_ids

    tokenizer = AutoTokenizer.from_pretrained(fineweb)
    long = " ".join(_paragraphs("en", 40))
    sparse = "a" * 3000 + " end"  # one long word: its head would be empty
    texts = [long, long[:5000], sparse, "short", ""]
    assert len(head(long, 128 * 16)) < 128 * 16 < len(long)
    whole = tokenizer(texts, truncation=True, max_length=128)["input_ids"]
    assert token_ids(batch_encoder(tokenizer, 128), texts, 128) == whole

    class WithoutBackend:  # a tokenizer with no Rust backend (one in Python only)
        def __call__(self, *args, **kwargs):
            return tokenizer(*args, **kwargs)

    assert token_ids(batch_encoder(WithoutBackend(), 128), texts, 128) == whole
    # the backend cuts where the tokenizer says, and the tokenizer itself is left as it was
    tokenizer.truncation_side = "left"
    tail = tokenizer(texts, truncation=True, max_length=128)["input_ids"]
    assert tail != whole
    assert token_ids(batch_encoder(tokenizer, 128), texts, 128, "left") == tail
    assert tokenizer(texts[:1])["input_ids"][0] == tokenizer(texts[:1], truncation=False
                                                              )["input_ids"][0]


def test_text_the_model_cannot_score_is_removed_and_counted(fineweb, tmp_path):
    texts = ["A real sentence about science.", "", "   \n\t ", None]
    result = ClassifierFilter(model=str(fineweb), device="cpu").process(_table(texts))
    assert result.kept.column("id").to_pylist() == ["d0"]
    assert result.removed.column("reason").to_pylist() == ["no_text"] * 3
    assert result.removed.column("quality_score").null_count == 3
    assert result.rule_failures["no_text"] == 3


# ---------------------------------------------------------------------------- NeMo Curator
def test_nemo_checkpoint_scores_equal_nemos_module(nemo, texts, tmp_path):
    folder, backbone, module = nemo
    config = json.loads((folder / "config.json").read_text())
    assert config["base_model"] == qm.NEMO_BASE_MODEL and "model_type" not in config
    probs = qm.nemo_reference(module, folder, texts, max_chars=600, max_length=64)
    predicted = [qm.NEMO_LABELS[i] for i in probs.argmax(axis=1)]
    assert len(set(predicted)) == 3

    stage = ClassifierFilter(model=str(folder), backbone=str(backbone), label="High",
                             max_chars=600, max_length=64, device="cpu")
    out = stage.process(_table(texts)).kept
    np.testing.assert_allclose(out.column("quality_score").to_numpy(), probs[:, 0], rtol=0,
                               atol=TOL)
    assert out.column("quality_score_label").to_pylist() == predicted

    # NeMo's filter_by: keep the documents predicted High or Medium
    kept, stats = _run(tmp_path, [{"id": f"d{i}", "text": t} for i, t in enumerate(texts)],
                       ClassifierFilter(model=str(folder), backbone=str(backbone),
                                        keep_labels=["High", "Medium"], max_chars=600,
                                        max_length=64, device="cpu"))
    assert set(kept) == {f"d{i}" for i, p in enumerate(predicted) if p != "Low"}
    for doc, row in kept.items():  # no label: the predicted label's probability
        assert row["quality_score"] == pytest.approx(probs[int(doc[1:])].max(), abs=TOL)
    entry = next(s for s in stats["stages"] if s["type"] == "classifier_filter")
    assert entry["removed_by_reason"] == {"label_not_kept": predicted.count("Low")}


def test_nemo_encoder_from_a_local_base_model(nemo, texts, tmp_path):
    """``base_model`` naming a local directory is read there, as NeMo's ``from_pretrained``
    would; a name found nowhere is one line saying how to fetch it."""
    folder, backbone, module = nemo
    local = tmp_path / "checkpoint"
    local.mkdir()
    for file in folder.iterdir():
        (local / file.name).write_bytes(file.read_bytes())
    config = json.loads((folder / "config.json").read_text())
    (local / "config.json").write_text(json.dumps({**config, "base_model": str(backbone)}))
    out = ClassifierFilter(model=str(local), label=0, max_length=64, device="cpu").process(
        _table(texts[:5])).kept
    probs = qm.nemo_reference(module, folder, texts[:5], max_chars=10**9, max_length=64)
    np.testing.assert_allclose(out.column("quality_score").to_numpy(), probs[:, 0], atol=TOL)

    stage = ClassifierFilter(model=str(folder), label="High", device="cpu")
    with pytest.raises(ValueError, match=r"encoder 'microsoft/deberta-v3-base' is neither a "
                       r"local directory nor in the Hugging Face cache.*set backbone:") as err:
        stage.check()
    assert "\n" not in str(err.value)


def test_a_nemo_checkpoint_of_another_encoder_is_refused(nemo, tmp_path):
    folder, _, _ = nemo
    other = tmp_path / "other-encoder"
    from transformers import BertConfig

    BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
               intermediate_size=64).save_pretrained(other)
    stage = ClassifierFilter(model=str(folder), backbone=str(other), device="cpu")
    with pytest.raises(ValueError, match=r"cannot load the model|lacks"):
        stage.setup()


# ---------------------------------------------------------------------------- fastText
@pytest.mark.parametrize("labels", [("hq", "cc"), ("high", "mid", "low")])
def test_fasttext_bigram_scores_equal_fasttexts_predict(labels, texts, tmp_path):
    english = _paragraphs("en", 60)
    model = qm.fasttext_model(tmp_path / "model.bin",
                              [(labels[i % len(labels)], t) for i, t in enumerate(english)])
    texts = [t for t in texts if len(t) < 20_000]  # a model without sidecar reads 20,000
    reference = qm.fasttext_reference(model, texts)
    label = f"__label__{labels[0]}"
    stage = ClassifierFilter(model=str(model), label=labels[0])
    out = stage.process(_table(texts)).kept
    np.testing.assert_allclose(out.column("quality_score").to_numpy(),
                               [r[label] for r in reference], rtol=0, atol=TOL)
    assert out.column("quality_score_label").to_pylist() == [max(r, key=r.get)
                                                             for r in reference]

    # fastText reads a certain label as 1.00001 (1e-5 inside its log): a threshold is <= 1
    threshold = min(float(np.median([r[label] for r in reference])), 1.0)
    kept, _ = _run(tmp_path, [{"id": f"d{i}", "text": t} for i, t in enumerate(texts)],
                   ClassifierFilter(model=str(model), label=labels[0], threshold=threshold))
    assert set(kept) == {f"d{i}" for i, r in enumerate(reference) if r[label] >= threshold}
    for doc, row in kept.items():
        assert row["quality_score"] == pytest.approx(reference[int(doc[1:])][label], abs=TOL)


# ---------------------------------------------------------------------------- languages
def test_each_language_is_scored_by_its_own_model_only(fineweb, tmp_path):
    """A mixed English/Japanese run: language ID, then FineWeb-Edu on en and a Japanese fastText
    model on ja; each language's rows carry its model's score and null for the other's."""
    require_lid_model()
    from curator.stages.filters.classifier_fasttext import Preprocessing
    from curator.stages.filters.classifier_training import TrainOptions, train

    english, japanese = _paragraphs("en", 20), _paragraphs("ja", 40, chars=400)
    ja_model = tmp_path / "ja.bin"
    train(japanese[:20], japanese[20:], ja_model,  # in a fresh process, as curator trains
          TrainOptions(epochs=5, valid_fraction=0), Preprocessing())
    records = [{"id": f"en{i}", "text": t} for i, t in enumerate(english)]
    records += [{"id": f"ja{i}", "text": t} for i, t in enumerate(japanese[::2])]
    edu = ClassifierFilter(name="edu", model=str(fineweb), score_field="edu", languages=["en"],
                           min_int_score=3, device="cpu")
    ja = ClassifierFilter(name="ja_quality", model=str(ja_model), score_field="ja_score",
                          languages=["ja"])
    kept, stats = _run(tmp_path, records, LangId(), edu, ja)

    en_score, en_int = qm.fineweb_edu_reference(fineweb, english)
    ja_score = [r["__label__hq"] for r in qm.fasttext_reference(
        ja_model, [" ".join(Preprocessing().apply([t]).to_pylist()) for t in japanese[::2]])]
    assert {r["lang"] for r in kept.values()} == {"en", "ja"}
    assert all(row["lang"] == doc[:2] for doc, row in kept.items())
    for doc, row in kept.items():
        i = int(doc[2:])
        if doc.startswith("en"):
            assert row["edu"] == pytest.approx(en_score[i], abs=TOL) and en_int[i] >= 3
            assert row["ja_score"] is None and row["ja_score_label"] is None
        else:
            assert row["ja_score"] == pytest.approx(ja_score[i], abs=TOL)
            assert row["edu"] is None and row["edu_int"] is None
    ja_ids = {r["id"] for r in records if r["id"].startswith("ja")}
    assert ja_ids <= set(kept)  # the English model's decision never touches Japanese rows
    assert {d for d in kept if d.startswith("en")} == {
        f"en{i}" for i, s in enumerate(en_int) if s >= 3}
    counts = {s["name"]: s for s in stats["stages"]}
    assert counts["edu"]["notes"]["other_language"] == len(ja_ids)
    assert counts["ja_quality"]["notes"]["other_language"] == len(kept) - len(ja_ids)


def test_one_score_column_shared_by_two_languages_keeps_each_models_value(fineweb, tmp_path):
    """Two stages writing the same column: a row out of a stage's languages keeps the value
    the other stage wrote."""
    english = _paragraphs("en", 6)
    table = _table(english, lang=pa.array(["en", "de"] * 3))
    en = ClassifierFilter(model=str(fineweb), languages=["en"], device="cpu")
    de = ClassifierFilter(model=str(fineweb), languages=["de"], device="cpu", max_length=16)
    both = de.process(en.process(table).kept).kept.column("quality_score").to_numpy()
    score_en, _ = qm.fineweb_edu_reference(fineweb, english)
    assert np.allclose(both[0::2], score_en[0::2], atol=TOL)
    assert not np.allclose(both[1::2], score_en[1::2], atol=TOL)  # 16 tokens: other scores
    assert not np.isnan(both).any()


def test_languages_without_a_lang_column_score_nothing(fineweb):
    stage = ClassifierFilter(model=str(fineweb), languages=["en"], min_int_score=3,
                             device="cpu")
    result = stage.process(_table(["Some text.", ""]))
    assert result.kept.num_rows == 2 and result.kept.column("quality_score").null_count == 2
    assert result.notes == {"other_language": 2}


# ---------------------------------------------------------------------------- configuration
def test_decisions_that_do_not_fit_the_head_are_refused(fineweb, nemo):
    folder, backbone, _ = nemo
    with pytest.raises(ValueError, match="regression head"):
        ClassifierFilter(model=str(fineweb), keep_labels=["x"])
    with pytest.raises(ValueError, match="regression head"):
        ClassifierFilter(model=str(fineweb), pareto={"alpha": 9})
    with pytest.raises(ValueError, match="min_int_score: the model is a classifier"):
        ClassifierFilter(model=str(folder), backbone=str(backbone), min_int_score=3)
    with pytest.raises(ValueError, match="not a probability"):
        ClassifierFilter(model=str(folder), backbone=str(backbone), threshold=3)
    with pytest.raises(ValueError, match="set one decision, not threshold and keep_labels"):
        ClassifierFilter(model=str(folder), threshold=0.5, keep_labels=["High"])
    with pytest.raises(ValueError, match="backbone: only for NeMo"):
        ClassifierFilter(model=str(fineweb), backbone=str(backbone))
    stage = ClassifierFilter(model=str(folder), backbone=str(backbone), keep_labels=["Top"])
    with pytest.raises(ValueError, match=r"keep_labels: \['Top'\] not among"):
        stage.check()
    assert ClassifierFilter(model=str(fineweb), threshold=4.2).threshold == 4.2


def test_a_new_threshold_is_a_decision_only(fineweb):
    a = ClassifierFilter(model=str(fineweb), min_int_score=3)
    b = ClassifierFilter(model=str(fineweb), min_int_score=2)
    assert a.score_params() == b.score_params() and a.fingerprint() != b.fingerprint()
    c = ClassifierFilter(model=str(fineweb), min_int_score=3, languages=["en"])
    assert c.score_params() != a.score_params()
    d = ClassifierFilter(model=str(fineweb), min_int_score=3, batch_tokens=64, threads=1)
    assert d.fingerprint() == a.fingerprint()  # placement


def test_cpu_batches_hold_texts_of_about_one_length():
    """On the CPU a batch's longest text is within 1.1x its shortest: padding stays under 10 %
    of the tokens, and every row is in one batch."""
    from curator.stages.filters.classifier_torch import CPU_SPREAD, length_batches

    lengths = np.random.default_rng(0).integers(1, 513, 2000)
    batches = length_batches(lengths, 256, 16384, CPU_SPREAD)
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(lengths)))
    for rows in batches:
        assert lengths[rows].max() <= CPU_SPREAD * lengths[rows].min()
        assert len(rows) == 1 or len(rows) * lengths[rows].max() <= 16384
    padded = sum(len(rows) * lengths[rows].max() for rows in batches)
    assert padded <= 1.1 * lengths.sum()
    wide = length_batches(lengths, 256, 16384)  # a GPU's: full batches, more padding
    assert len(wide) < len(batches)


@pytest.mark.parametrize("pad_left", [False, True])
def test_padded_batches_keep_each_rows_tokens_in_place(pad_left):
    from curator.stages.filters.classifier_torch import padded

    rows = [[5, 6, 7], [8], [9, 10, 11, 12, 13]]
    ids, mask = padded(rows, 0, pad_left, multiple=4)
    assert ids.shape == mask.shape == (3, 8)
    for row, got, real in zip(rows, ids, mask, strict=True):
        assert got[real == 1].tolist() == row and (got[real == 0] == 0).all()
        assert real.tolist() == ([0] * (8 - len(row)) + [1] * len(row) if pad_left
                                 else [1] * len(row) + [0] * (8 - len(row)))
    same, none = padded([[1, 2], [3, 4]], 0, pad_left)
    assert same.tolist() == [[1, 2], [3, 4]] and none is None  # no padding: no mask
