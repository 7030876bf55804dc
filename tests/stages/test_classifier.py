"""classifier_filter with a fastText model trained by `curate classifier train` on real text
(Japanese Wikipedia paragraphs against mC4-ja lines labelled bad): held-out figures, threshold
and Pareto sampling through `curate run`, the same kept set across workers and batch sizes, bad
models and bad training input refused in one line."""

from __future__ import annotations

import gzip
import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytest.importorskip("fasttext")

from curator import ClassifierFilter
from curator.stages.filters.classifier import pareto_draws
from curator.stages.filters.classifier_training import roc_auc
from tests.conftest import ROOT, assert_accounting

DATA = ROOT / "tests" / "data" / "classifier"


def curate(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "curator.cli", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=timeout)


def _docs(name: str) -> list[dict]:
    with gzip.open(DATA / f"{name}.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    model = tmp_path_factory.mktemp("model") / "quality.bin"
    done = curate("classifier", "train", "--positive", str(DATA / "positive.jsonl.gz"),
                  "--negative", str(DATA / "negative.jsonl.gz"), "--output", str(model),
                  "--valid-fraction", "0.2", "--dim", "16", "--bucket", "20000", "--seed", "3")
    assert done.returncode == 0, done.stderr
    return model, done


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """Both classes, in three shards, ids kept."""
    folder = tmp_path_factory.mktemp("in")
    docs = [*_docs("positive"), *_docs("negative")]
    for i in range(3):
        with open(folder / f"part-{i}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in docs[i::3])
    return folder


def _table(texts: list[str | None]) -> pa.Table:
    return pa.table({"id": [f"d{i}" for i in range(len(texts))],
                     "text": pa.array(texts, pa.string())})


def test_train_reports_held_out_figures_and_writes_the_preprocessing(trained):
    model, done = trained
    line = next(x for x in done.stdout.splitlines() if x.startswith("held out:"))
    assert "30 positive, 30 negative" in line
    sidecar = json.loads(Path(f"{model}.json").read_text())
    assert sidecar["preprocessing"] == {"lowercase": True, "cjk_chars": True, "max_chars": 20000}
    metrics = sidecar["metrics"]
    assert f"AUC {metrics['auc']:.4f}" in line
    assert metrics["auc"] > 0.9  # Wikipedia prose against lines an annotator called bad


def test_the_same_seed_trains_the_same_model(trained, tmp_path):
    model, _ = trained
    again = tmp_path / "again.bin"
    done = curate("classifier", "train", "--positive", str(DATA / "positive.jsonl.gz"),
                  "--negative", str(DATA / "negative.jsonl.gz"), "--output", str(again),
                  "--valid-fraction", "0.2", "--dim", "16", "--bucket", "20000", "--seed", "3")
    assert done.returncode == 0, done.stderr
    assert again.read_bytes() == model.read_bytes()


def test_roc_auc_matches_counting_pairs():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 300)
    scores = np.round(rng.random(300) + labels * 0.3, 1)  # rounded: many ties
    pos, neg = scores[labels == 1], scores[labels == 0]
    pairs = [(p > n) + 0.5 * (p == n) for p, n in itertools.product(pos, neg)]
    assert roc_auc(labels, scores) == pytest.approx(np.mean(pairs), abs=1e-12)
    assert roc_auc(np.ones(3), np.arange(3.0)) is None


def test_scores_follow_the_sidecar_preprocessing(trained):
    stage = ClassifierFilter(model=str(trained[0]))
    text = "東京都は日本の首都である。\nIt Has A Population Of Many Millions."
    variants = [text, text.replace("\n", " "), text.lower(), text.replace("\n", "\r\n\x00")]
    scores = stage.process(_table(variants)).kept.column("quality_score").to_pylist()
    assert len(set(scores)) == 1
    assert stage.process(_table(["全く別の文章"])).kept.column("quality_score")[0].as_py() \
        != scores[0]


def test_texts_that_must_not_crash(trained):
    stage = ClassifierFilter(model=str(trained[0]), threshold=0.5)
    texts = ["", None, " \n\t ", "😀🎉👍" * 100, "\x00\x01\x1b\x7f\x08", "あ" * 10_000_000,
             "word " * 2_000_000]
    result = stage.process(_table(texts))
    assert result.kept.num_rows + result.removed.num_rows == len(texts)
    removed = {r["id"]: r for r in result.removed.to_pylist()}
    for doc in ("d0", "d1", "d2", "d4"):  # nothing left once prepared: not scored, counted
        assert removed[doc]["quality_score"] is None and removed[doc]["reason"] == "no_text"
    assert result.rule_failures["no_text"] == 4
    others = [r for d, r in removed.items() if d not in ("d0", "d1", "d2", "d4")]
    assert all(r["reason"] == "low_quality" and r["quality_score"] < 0.5 for r in others)


def _run(config: Path, output: Path, *args: str) -> dict:
    done = curate("run", str(config), "--output", str(output), *args, timeout=180)
    assert done.returncode == 0, done.stderr
    return assert_accounting(output)


def _config(tmp_path: Path, inputs: Path, stage: str, name: str = "p.yaml") -> Path:
    config = tmp_path / name
    config.write_text(f"stages:\n  - {{type: read_jsonl, path: '{inputs}/*.jsonl'}}\n"
                      f"  - {stage}\n  - {{type: write_parquet}}\n")
    return config


def _kept(run: Path) -> dict[str, float]:
    table = pq.read_table(run / "write_parquet")
    return dict(zip(table.column("id").to_pylist(), table.column("quality_score").to_pylist(),
                    strict=True))


def test_threshold_through_curate_run(trained, inputs, tmp_path):
    stage = f"{{type: classifier_filter, model: '{trained[0]}', threshold: 0.5}}"
    stats = _run(_config(tmp_path, inputs, stage), tmp_path / "run", "--workers", "1")
    entry = next(s for s in stats["stages"] if s["type"] == "classifier_filter")
    kept = _kept(tmp_path / "run")
    assert entry["in"] == 300 and entry["kept"] == len(kept)
    assert entry["removed_by_reason"] == {"low_quality": 300 - len(kept)}
    assert all(score >= 0.5 for score in kept.values())
    wiki = sum(i.startswith("wiki-") for i in kept)
    assert wiki >= 135 and len(kept) - wiki <= 30  # the classes it was trained on
    assert sum(entry["histograms"]["quality_score"]["counts"]) == 300


def test_pareto_keeps_the_same_set_across_workers_and_batches(trained, inputs, tmp_path):
    def stage(seed: int) -> str:
        return (f"{{type: classifier_filter, model: '{trained[0]}', "
                f"pareto: {{alpha: 1, seed: {seed}}}}}")

    config = _config(tmp_path, inputs, stage(7))
    _run(config, tmp_path / "a", "--workers", "1")
    _run(config, tmp_path / "b", "--executor", "dask", "--workers", "2",
         "--set", "batch_bytes=4096")
    other = _run(_config(tmp_path, inputs, stage(8), "q.yaml"), tmp_path / "c", "--workers", "1")
    a, b, c = _kept(tmp_path / "a"), _kept(tmp_path / "b"), _kept(tmp_path / "c")
    assert a == b
    assert set(a) != set(c)
    entry = next(s for s in other["stages"] if s["type"] == "classifier_filter")
    assert entry["removed_by_reason"] == {"pareto_sampled_out": 300 - len(c)}
    # P(Pareto(alpha) > 1 - s) = (2 - s) ** -alpha: the kept count is what the scores predict
    docs = [*_docs("positive"), *_docs("negative")]
    scorer = ClassifierFilter(model=str(trained[0]))  # no decision: every score
    scores = scorer.process(_table([d["text"] for d in docs])).kept.column("quality_score")
    p = (2 - np.asarray(scores)) ** -1.0
    assert abs(len(a) - p.sum()) < 4 * np.sqrt((p * (1 - p)).sum())


def test_pareto_draws_follow_numpy_pareto():
    draws = pareto_draws([f"doc-{i}" for i in range(50_000)], alpha=9.0, seed=1)
    reference = np.random.default_rng(0).pareto(9.0, 50_000)
    for x in (0.01, 0.05, 0.1, 0.2, 0.5):  # survival functions agree (two-sample, 50,000 each)
        assert np.mean(draws > x) == pytest.approx(np.mean(reference > x), abs=0.012)
    assert (pareto_draws(["x", "y"], 9.0, 1) == pareto_draws(["x", "y"], 9.0, 1)).all()


def test_a_file_that_is_not_a_model(tmp_path):
    bad = tmp_path / "quality.bin"
    bad.write_text("not a model\n")
    with pytest.raises(ValueError, match="is not a fastText model"):
        ClassifierFilter(model=str(bad), threshold=0.5)
    config = tmp_path / "p.yaml"
    config.write_text(f"output: {tmp_path}/run\nstages:\n"
                      f"  - {{type: read_jsonl, path: {tmp_path}/in.jsonl}}\n"
                      f"  - {{type: classifier_filter, model: {bad}, threshold: 0.5}}\n")
    done = curate("run", str(config))
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "p.yaml:4" in done.stderr and "is not a fastText model" in done.stderr


def test_contradictory_parameters_are_refused(trained):
    with pytest.raises(ValueError, match="set one decision, not threshold and pareto"):
        ClassifierFilter(model=str(trained[0]), threshold=0.5, pareto={"alpha": 9})
    with pytest.raises(ValueError, match="not an index"):
        ClassifierFilter(model=str(trained[0]), label=1)
    with pytest.raises(ValueError, match=r"label '__label__mid' is not one of"):
        ClassifierFilter(model=str(trained[0]), label="mid").setup()


@pytest.mark.parametrize(("content", "message"), [
    ("", "no documents"),
    ('{"text": "fine"}\n{"body": "no text"}\n', ":2: no field 'text'"),
    ('{"text": "fine"}\n{"text": "cut\n', ":2: malformed JSON"),
    ('{"text": 5}\n', ":1: field 'text' is not a string"),
])
def test_bad_training_input_is_one_line_and_exit_2(tmp_path, content, message):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    done = curate("classifier", "train", "--positive", str(DATA / "positive.jsonl.gz"),
                  "--negative", str(bad), "--output", str(tmp_path / "m.bin"))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {bad}{message}" if message[0] == ":"
                               else f"error: {bad}: {message}")
    assert not (tmp_path / "m.bin").exists()


def test_pareto_draw_of_a_document_without_id_follows_its_text(trained):
    stage = ClassifierFilter(model=str(trained[0]), pareto={"alpha": 0.5, "seed": 3})
    texts = [d["text"] for d in _docs("positive")[:40]]

    def kept(order: list[int]) -> set[str]:
        table = pa.table({"id": pa.array([None] * len(order), pa.string()),
                          "text": [texts[i] for i in order]})
        result = stage.process(table)
        assert result.kept.num_rows + result.removed.num_rows == len(order)
        return set(result.kept.column("text").to_pylist())

    forward = kept(list(range(40)))
    assert 0 < len(forward) < 40
    assert kept(list(range(39, -1, -1))) == forward  # another order, the same documents
    assert kept(list(range(20))) == forward & set(texts[:20])  # another batch


def test_a_model_replaced_at_the_same_path_changes_the_fingerprint(trained, tmp_path):
    import shutil

    model = tmp_path / "m.bin"
    shutil.copy(trained[0], model)
    shutil.copy(f"{trained[0]}.json", f"{model}.json")
    before = ClassifierFilter(model=str(model), threshold=0.5).fingerprint()
    assert ClassifierFilter(model=str(model), threshold=0.5).fingerprint() == before
    sidecar = json.loads(Path(f"{model}.json").read_text())
    sidecar["preprocessing"]["lowercase"] = False
    Path(f"{model}.json").write_text(json.dumps(sidecar))
    assert ClassifierFilter(model=str(model), threshold=0.5).fingerprint() != before


def test_trainings_in_one_process_give_the_same_model(tmp_path):
    """Each training runs in a fresh interpreter: fastText's state from an earlier training in
    the process changes the next one (different models, or NaN)."""
    from curator.stages.filters.classifier_training import TrainOptions, train

    positive = [d["text"] for d in _docs("positive")]
    negative = [d["text"] for d in _docs("negative")]
    options = TrainOptions(lr=0.1, dim=16, bucket=20000, epochs=5, valid_fraction=0)
    models = [tmp_path / f"m{i}.bin" for i in range(5)]
    for model in models:
        train(positive, negative, model, options)
    assert len({model.read_bytes() for model in models}) == 1


def test_a_diverging_training_is_one_line_naming_the_learning_rate(tmp_path):
    from curator.stages.filters.classifier_training import TrainOptions, train

    positive = [d["text"] for d in _docs("positive")]
    negative = [d["text"] for d in _docs("negative")]
    with pytest.raises(ValueError, match=r"diverged .* learning rate 1000000\.0"):
        train(positive, negative, tmp_path / "m.bin",
              TrainOptions(lr=1e6, dim=16, bucket=20000, epochs=5, valid_fraction=0))
