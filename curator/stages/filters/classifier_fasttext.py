"""A fastText quality classifier: the text preprocessing it was trained with (kept in a JSON
sidecar beside the model) and the probability of its positive label per document."""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curator.stages.filters.classifier_heads import ModelScores

SIDECAR_FORMAT = "curator-fasttext-classifier"
POSITIVE = "__label__hq"
NEGATIVE = "__label__lq"

# RE2 patterns, run by Arrow over a whole column
_CONTROL = r"[\x00-\x1f\x7f\x{85}\x{2028}\x{2029}]+"
# Han, kana and the long-vowel mark: scripts written without spaces become one token per character
_CJK = r"([\p{Han}\p{Hiragana}\p{Katakana}ー])"


@dataclass(frozen=True)
class Preprocessing:
    """How text becomes one fastText line: newlines and control characters always become spaces;
    optionally lower-cased, CJK characters split into tokens, and cut at ``max_chars``."""

    lowercase: bool = True
    cjk_chars: bool = True
    max_chars: int = 20_000

    def apply(self, texts: pa.Array | pa.ChunkedArray | list[str | None]) -> pa.Array:
        """One line per text (null -> empty), in Arrow: training and scoring share it."""
        if isinstance(texts, list):
            texts = pa.array(texts, pa.string())
        text = pc.utf8_slice_codeunits(pc.fill_null(texts, ""), 0, self.max_chars)
        text = pc.replace_substring_regex(text, _CONTROL, " ")
        if self.lowercase:
            text = pc.utf8_lower(text)
        if self.cjk_chars:
            text = pc.replace_substring_regex(text, _CJK, r" \1 ")
        # runs of spaces are left: fastText splits on whitespace and skips empty tokens
        text = pc.utf8_trim(text, " ")
        return text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text


def sidecar_path(model: str | Path) -> Path:
    """``model.bin`` -> ``model.bin.json``."""
    model = Path(model)
    return model.with_name(model.name + ".json")


def write_sidecar(model: Path, prep: Preprocessing, extra: dict) -> Path:
    path = sidecar_path(model)
    body = {"format": SIDECAR_FORMAT, "positive": POSITIVE, "negative": NEGATIVE,
            "preprocessing": asdict(prep), **extra}
    path.write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def read_sidecar(model: str | Path) -> tuple[Preprocessing, str | None]:
    """The preprocessing and positive label recorded by ``curate classifier train``; for a model
    without a sidecar (trained elsewhere): newlines made spaces only, and no default label."""
    path = sidecar_path(model)
    if not path.is_file():
        return Preprocessing(lowercase=False, cjk_chars=False), None
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
        return Preprocessing(**body["preprocessing"]), body.get("positive")
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: not a classifier sidecar ({type(err).__name__}: {err})"
                         ) from None


def full_label(label: str) -> str:
    """``hq`` -> ``__label__hq``; a label already prefixed stays as it is."""
    return label if label.startswith("__label__") else f"__label__{label}"


def positive_label(model: str | Path, chosen: str | None, labels: Sequence[str]) -> str:
    """The full positive label (the configured one, else the sidecar's), if the model has it;
    else a one-line ValueError naming the model's labels."""
    if chosen is None:
        raise ValueError(f"{model}: no sidecar names the positive label; set label: (one of "
                         f"{', '.join(sorted(labels))})")
    label = full_label(chosen)
    if label not in labels:
        close = difflib.get_close_matches(label, list(labels), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0].removeprefix('__label__')!r}?" if close else ""
        raise ValueError(f"{model}: label {label!r} is not one of the model's "
                         f"{sorted(labels)}{hint}")
    return label


class FastTextScorer:
    """Per text, under the model's own preprocessing: fastText's probability of ``label`` (as
    its ``predict`` gives it: fastText adds 1e-5 inside its log, so a certain label reads
    1.00001) and the label it predicts. A text that prepares to an empty line is not scored."""

    def __init__(self, model: str | Path, label: str | None):
        import fasttext

        self.prep, default = read_sidecar(model)
        self.model = fasttext.load_model(str(model))
        self.label = positive_label(model, label or default, self.model.get_labels())

    def score(self, texts: pa.Array | pa.ChunkedArray | list[str | None]) -> ModelScores:
        lines = self.prep.apply(texts).to_pylist()
        scores = np.full(len(lines), np.nan)
        predicted: list[str | None] = [None] * len(lines)
        todo = [i for i, line in enumerate(lines) if line]
        if not todo:
            return ModelScores(scores, predicted)
        labels, probs = self.model.predict([lines[i] for i in todo], k=-1)
        for i, names, values in zip(todo, labels, probs, strict=True):
            predicted[i] = names[0]
            scores[i] = dict(zip(names, values, strict=True)).get(self.label, 0.0)
        return ModelScores(scores, predicted)
