"""From a model's outputs to scores: a classifier's probability of one label (or of the label
it predicts) and the predicted label; a regression head's raw output, and the integer score
FineWeb-Edu's code derives from it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: FineWeb-Edu's integer score: ``int(round(max(0, min(score, 5))))``
INT_SCORE_RANGE = (0, 5)


@dataclass
class ModelScores:
    """Per text: the score (float64, NaN where the model could not score the text) and, for a
    classifier, the predicted label (None where unscored)."""

    score: np.ndarray
    label: list[str | None] | None = None


def classifier_scores(logits: np.ndarray, id2label: dict[int, str], index: int | None
                      ) -> ModelScores:
    """Softmax over the labels: the probability of label ``index`` (None: of the predicted
    label) and the predicted label's name."""
    z = logits.astype(np.float64)
    z = np.exp(z - z.max(axis=1, keepdims=True))
    probs = z / z.sum(axis=1, keepdims=True)
    predicted = probs.argmax(axis=1)
    score = probs[np.arange(len(probs)), predicted] if index is None else probs[:, index]
    return ModelScores(score, [id2label[int(i)] for i in predicted])


def regression_scores(logits: np.ndarray) -> ModelScores:
    """The single output as it is (no activation)."""
    return ModelScores(logits[:, 0].astype(np.float64))


def int_scores(score: np.ndarray) -> np.ndarray:
    """``int(round(max(0, min(score, 5))))`` per score, as FineWeb-Edu's code computes it
    (Python's ``round``: halves to even, as ``np.rint``); NaN stays NaN (as float)."""
    low, high = INT_SCORE_RANGE
    return np.rint(np.clip(score, low, high))
