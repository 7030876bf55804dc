"""Train a fastText quality classifier from positive and negative JSONL documents, hold out a
stratified fraction, and measure it there (AUC, precision and recall at 0.5)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from curator.stages.filters.classifier_fasttext import (
    NEGATIVE,
    POSITIVE,
    FastTextScorer,
    Preprocessing,
    write_sidecar,
)


@dataclass(frozen=True)
class TrainOptions:
    epochs: int = 10
    lr: float = 0.5
    word_ngrams: int = 2
    dim: int = 32
    bucket: int = 200_000  # hashed n-gram rows: the model holds bucket x dim floats
    min_count: int = 1
    valid_fraction: float = 0.1
    seed: int = 0
    threads: int = 1  # one thread, one fresh process: the same input and seed, the same model


@dataclass(frozen=True)
class Metrics:
    train_positive: int
    train_negative: int
    valid_positive: int
    valid_negative: int
    auc: float | None
    precision: float | None
    recall: float | None


def _lines(path: Path) -> Iterator[str]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        yield from f


def read_texts(path: str | Path, text_field: str = "text") -> list[str]:
    """The ``text_field`` of every JSON line; a one-line ValueError at the first bad line."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    texts = []
    try:
        for number, line in enumerate(_lines(path), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as err:
                raise ValueError(f"{path}:{number}: malformed JSON ({err})") from None
            if not isinstance(record, dict) or text_field not in record:
                raise ValueError(f"{path}:{number}: no field {text_field!r}")
            text = record[text_field]
            if not isinstance(text, str):
                raise ValueError(f"{path}:{number}: field {text_field!r} is not a string")
            texts.append(text)
    except (OSError, EOFError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: cannot read ({type(err).__name__}: {err})") from None
    if not texts:
        raise ValueError(f"{path}: no documents")
    return texts


def labelled_texts(path: str | Path, text_field: str, label_field: str, positive: str
                   ) -> tuple[list[str], np.ndarray]:
    """The texts of a JSONL (.gz) file and whether each one's label is ``positive``;
    ``ValueError`` (one line) for a line without the fields or a file with one class only."""
    if not Path(path).is_file():
        raise ValueError(f"{path}: no such file")
    texts, good = [], []
    for n, line in enumerate(_lines(Path(path)), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            texts.append(str(record[text_field]))
            good.append(str(record[label_field]) == positive)
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{path}:{n}: not a JSON object with {text_field!r} and "
                             f"{label_field!r} ({type(err).__name__})") from None
    if all(good) or not any(good):
        raise ValueError(f"{path}: every document is labelled the same: the AUC needs both")
    return texts, np.array(good)


def split(texts: list[str], fraction: float, rng: np.random.Generator
          ) -> tuple[list[str], list[str]]:
    """(train, held out): a seeded shuffle, ``fraction`` held out (none when fraction is 0)."""
    order = rng.permutation(len(texts))
    n_valid = round(len(texts) * fraction)
    if fraction > 0 and len(texts) > 1:
        n_valid = min(max(n_valid, 1), len(texts) - 1)
    return [texts[i] for i in order[n_valid:]], [texts[i] for i in order[:n_valid]]


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float | None:
    """Area under the ROC curve by ranks (Mann-Whitney U, ties averaged); None without both
    classes."""
    labels = labels.astype(bool)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if not n_pos or not n_neg:
        return None
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    start = 0
    while start < len(scores):  # average ranks over runs of equal scores
        end = start
        while end + 1 < len(scores) and sorted_scores[end + 1] == sorted_scores[start]:
            end += 1
        ranks[order[start:end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def precision_recall(labels: np.ndarray, scores: np.ndarray, at: float = 0.5
                     ) -> tuple[float | None, float | None]:
    labels, predicted = labels.astype(bool), scores >= at
    tp = int((labels & predicted).sum())
    precision = tp / int(predicted.sum()) if predicted.any() else None
    recall = tp / int(labels.sum()) if labels.any() else None
    return precision, recall


#: fastText trained in a child interpreter: it keeps state from one training to the next in a
#: process (the same input and seed gave 5 different models in 20 trainings in one process,
#: half of them diverging to NaN), while a process's first training is the same every time.
_TRAIN = """
import json, sys
import fasttext
try:
    model = fasttext.train_supervised(sys.argv[1], **json.loads(sys.argv[3]))
except RuntimeError as err:  # fastText's 'Encountered NaN.'
    sys.exit(f"diverged: {err}")
model.save_model(sys.argv[2])
"""


def train_in_fresh_process(train_file: Path, output: Path, params: dict) -> None:
    """``fasttext.train_supervised`` in a fresh interpreter; a divergence is a one-line
    ValueError that names the learning rate."""
    done = subprocess.run([sys.executable, "-c", _TRAIN, str(train_file), str(output),
                           json.dumps(params)], capture_output=True, text=True)
    if done.returncode == 0:
        return
    last = (done.stderr.strip().splitlines() or ["no message"])[-1]
    if last.startswith("diverged"):
        raise ValueError(f"fastText training diverged (NaN) at learning rate {params['lr']}: "
                         "lower it (--lr)")
    raise RuntimeError(f"fastText training failed: {last}")


def train(positive: list[str], negative: list[str], output: Path, options: TrainOptions,
          prep: Preprocessing | None = None, source: dict | None = None) -> Metrics:
    """Train, save ``output`` and its sidecar, and measure the held-out part."""
    import fasttext

    if not hasattr(fasttext, "train_supervised"):
        raise ValueError("the installed module fasttext cannot train (fasttext-predict replaced "
                         "it?): pip uninstall fasttext-predict; pip install --force-reinstall "
                         "fasttext-numpy2-wheel")

    prep = prep or Preprocessing()
    rng = np.random.default_rng(options.seed)
    pos_train, pos_valid = split(positive, options.valid_fraction, rng)
    neg_train, neg_valid = split(negative, options.valid_fraction, rng)
    lines = [f"{POSITIVE} {t}" for t in prep.apply(pos_train).to_pylist()]
    lines += [f"{NEGATIVE} {t}" for t in prep.apply(neg_train).to_pylist()]
    lines = [lines[i] for i in rng.permutation(len(lines))]
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".txt", dir=output.parent,
                                     delete=False) as f:
        f.write("\n".join(lines) + "\n")
        train_file = Path(f.name)
    try:
        train_in_fresh_process(train_file, output, {
            "epoch": options.epochs, "lr": options.lr, "wordNgrams": options.word_ngrams,
            "dim": options.dim, "bucket": options.bucket, "minCount": options.min_count,
            "seed": options.seed, "thread": options.threads, "verbose": 0})
    finally:
        train_file.unlink()
    auc = precision = recall = None
    write_sidecar(output, prep, {"options": asdict(options), "source": source or {}})
    if pos_valid or neg_valid:
        # a held-out text that prepares to an empty line scores 0 here
        scores = np.nan_to_num(FastTextScorer(output, None).score([*pos_valid, *neg_valid]).score)
        labels = np.array([1] * len(pos_valid) + [0] * len(neg_valid))
        auc = roc_auc(labels, scores)
        precision, recall = precision_recall(labels, scores)
    metrics = Metrics(len(pos_train), len(neg_train), len(pos_valid), len(neg_valid), auc,
                      precision, recall)
    write_sidecar(output, prep, {"options": asdict(options), "source": source or {},
                                 "metrics": asdict(metrics)})
    return metrics
