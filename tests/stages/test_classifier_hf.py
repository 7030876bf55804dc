"""classifier_filter on a local Hugging Face model directory: a tiny BERT built from a config
(2 layers, hidden 32, seeded random weights) with a word-level tokenizer trained here, so nothing
is downloaded. Labels by index or name, batching, workers and the GPU path (where CUDA is) give
the same scores; a text without words is removed unscored (no_text); a directory that is not a
model is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator import ClassifierFilter, Pipeline, ReadJsonl, WriteParquet
from tests.conftest import assert_accounting, sample_documents

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

SENTENCES = [
    "the committee approved the annual budget after a long debate",
    "click here to buy cheap watches now free shipping",
    "researchers published the results of the clinical trial",
    "best price best price best price order today",
    "the river flows through the old town and into the sea",
    "login register cart checkout privacy policy terms",
]


def build_tiny_model(folder: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    words = [*SENTENCES, *(d["text"] for d in sample_documents()[:40])]
    tok.train_from_iterator(words, trainers.WordLevelTrainer(vocab_size=3000,
                                                             special_tokens=specials))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]",
                                   cls_token="[CLS]", sep_token="[SEP]")
    config = BertConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=128,
                        initializer_range=0.5, num_labels=2, id2label={0: "low", 1: "high"},
                        label2id={"low": 0, "high": 1})
    torch.manual_seed(0)
    BertForSequenceClassification(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> str:
    return str(build_tiny_model(tmp_path_factory.mktemp("tiny-bert")))


def _texts() -> list[str | None]:
    docs = [d["text"] for d in sample_documents()[:40]]
    return [*SENTENCES, *docs, "", None, "😀" * 50, "word " * 200_000]


def _scores(stage: ClassifierFilter, texts: list[str | None]) -> np.ndarray:
    """Every text's score in order (NaN: not scored, removed as no_text)."""
    table = pa.table({"id": [f"d{i}" for i in range(len(texts))],
                      "text": pa.array(texts, pa.string())})
    result = stage.process(table)
    assert result.kept.num_rows + result.n_removed == len(texts)
    assert set(result.removed.column("reason").to_pylist()) <= {"no_text"}
    rows = pa.concat_tables([result.kept, result.removed.drop_columns(["reason"])])
    scores = dict(zip(rows.column("id").to_pylist(),
                      rows.column("quality_score").to_pylist(), strict=True))
    return np.array([np.nan if scores[f"d{i}"] is None else scores[f"d{i}"]
                     for i in range(len(texts))])


def test_labels_by_index_or_name(model_dir):
    texts = _texts()
    high = _scores(ClassifierFilter(model=model_dir, device="cpu"), texts)
    assert np.array_equal(high, _scores(ClassifierFilter(model=model_dir, label="high",
                                                         device="cpu"), texts), equal_nan=True)
    low = _scores(ClassifierFilter(model=model_dir, label=0, device="cpu"), texts)
    filled = np.array([bool(t and t.strip()) for t in texts])
    np.testing.assert_allclose(low[filled] + high[filled], 1.0, atol=1e-6)
    assert np.isnan(high[~filled]).all() and ((high[filled] > 0) & (high[filled] < 1)).all()
    assert len(set(np.round(high[filled], 6))) > 10  # the model does tell texts apart
    with pytest.raises(ValueError, match="label 'medium' is not one of"):
        ClassifierFilter(model=model_dir, label="medium").setup()


def test_batching_does_not_change_scores(model_dir):
    texts = _texts()[:12] + _texts()[-4:]
    one = _scores(ClassifierFilter(model=model_dir, device="cpu", batch_size=1), texts)
    many = _scores(ClassifierFilter(model=model_dir, device="cpu", batch_size=64), texts)
    np.testing.assert_allclose(one, many, atol=1e-6)  # NaN where both leave a text unscored


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_gpu_scores_equal_cpu_scores(model_dir):
    texts = _texts()
    cpu = _scores(ClassifierFilter(model=model_dir, device="cpu", batch_size=16), texts)
    gpu_stage = ClassifierFilter(model=model_dir, device="gpu", batch_size=16)
    assert gpu_stage.resources() == {"GPU": 1}
    gpu = _scores(gpu_stage, texts)
    assert gpu_stage._scorer.device == "cuda"
    np.testing.assert_allclose(gpu, cpu, atol=1e-5)


def test_one_or_two_workers_keep_the_same_documents(model_dir, tmp_path, dask_scheduler):
    src = tmp_path / "in"
    src.mkdir()
    texts = [t for t in _texts() if t is not None]
    for part in range(3):
        with open(src / f"part-{part}.jsonl", "w", encoding="utf-8") as f:
            for i in range(part, len(texts), 3):
                f.write(json.dumps({"id": f"doc-{i}", "text": texts[i]}) + "\n")
    all_scores = _scores(ClassifierFilter(model=model_dir, device="cpu"), texts)
    threshold = float(np.nanmedian(all_scores))
    kept = []
    # this process alone, then the two worker processes of a Dask LocalCluster; on the CPU in
    # both, as the GPU's float32 kernels differ from the CPU's in the sixth decimal
    for workers, where in ((1, {"executor": "local"}), (2, {"scheduler": dask_scheduler})):
        run = tmp_path / f"run{workers}"
        Pipeline([ReadJsonl(path=f"{src}/*.jsonl"),
                  ClassifierFilter(model=model_dir, threshold=threshold, batch_size=8,
                                   device="cpu"),
                  WriteParquet()], output=str(run)).run(progress=False, **where)
        stats = assert_accounting(run)
        entry = next(s for s in stats["stages"] if s["type"] == "classifier_filter")
        assert set(entry["removed_by_reason"]) == {"low_quality", "no_text"}
        table = pq.read_table(run / "write_parquet")
        kept.append(dict(zip(table.column("id").to_pylist(),
                             table.column("quality_score").to_pylist(), strict=True)))
    assert kept[0].keys() == kept[1].keys() and 0 < len(kept[0]) < len(texts)
    for doc, score in kept[0].items():
        assert score == pytest.approx(kept[1][doc], abs=1e-6)
        assert score == pytest.approx(all_scores[int(doc.split("-")[1])], abs=1e-6)


def test_auto_device_follows_the_cluster(model_dir):
    stage = ClassifierFilter(model=model_dir)
    assert stage.for_cluster(False).device == "cpu"
    assert stage.for_cluster(False).resources() == {}
    expected = "gpu" if torch.cuda.is_available() else "cpu"
    assert stage.for_cluster(True).device == expected
    assert stage.requirements() == {"torch": "hf", "transformers": "hf"}


def test_a_directory_that_is_not_a_model(model_dir, tmp_path):
    with pytest.raises(ValueError, match=r"without config\.json"):
        ClassifierFilter(model=str(tmp_path))
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a JSON model config"):
        ClassifierFilter(model=str(tmp_path))
    (tmp_path / "config.json").write_text(Path(model_dir, "config.json").read_text())
    with pytest.raises(ValueError, match="has no model weights"):
        ClassifierFilter(model=str(tmp_path))
    (tmp_path / "model.safetensors").write_bytes(b"\x00" * 100)
    (tmp_path / "tokenizer.json").write_text("{}")
    stage = ClassifierFilter(model=str(tmp_path))
    with pytest.raises(ValueError, match="cannot load the model") as err:
        stage.setup()
    assert "\n" not in str(err.value)
