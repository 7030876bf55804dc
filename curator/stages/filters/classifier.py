"""``classifier_filter``: model-based quality scoring as published, then decisions over the
scores. Models: fastText (``curate classifier train``'s, or any supervised ``.bin`` such as
DCLM's bigram model), Hugging Face sequence-classification directories (classifier or
regression head: FineWeb-Edu), NeMo Curator's classifier checkpoints. Scores are columns;
decisions (threshold, FineWeb-Edu's integer score, predicted labels, GPT-3-style Pareto
sampling) are rules over them, kept apart so that a new threshold decides again from kept
scores. A model may apply to some languages only."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from curator.batch import ID, TEXT, BatchResult, id_fractions, split_by_reason
from curator.counts import ScoreBins
from curator.stages.base import Filter
from curator.stages.filtering import apply_rules
from curator.stages.filters.classifier_fasttext import full_label, sidecar_path
from curator.stages.filters.classifier_heads import int_scores
from curator.stages.filters.classifier_models import (
    ModelInfo,
    check_dir,
    inspect_dir,
    is_dir,
    label_index,
)
from curator.stages.langid import check_model_file, normalise_label, normalised_languages

#: Histogram of the score in stats.json, whatever ``score_field`` is called: probabilities,
#: and regression outputs over FineWeb-Edu's 0-5 scale (outside values in the end bins).
PROBABILITY, REGRESSION = "quality_score", "regression_score"


class Pareto(BaseModel):
    """Keep a document when a Pareto(alpha) draw exceeds ``1 - score`` (GPT-3's filter)."""

    model_config = ConfigDict(extra="forbid")

    alpha: float = Field(9.0, gt=0, description="Pareto shape; GPT-3 used 9.")
    seed: int = Field(0, ge=0, description="Seed of the per-document draws.")


def pareto_draws(ids: list[str], alpha: float, seed: int) -> np.ndarray:
    """One Pareto(alpha) draw per document (NumPy's Lomax form, ``np.random.pareto``), fixed by
    (seed, id) alone: the inverse CDF ``(1 - u) ** (-1 / alpha) - 1`` of a uniform ``u`` hashed
    from the id, so batching, workers and resume never change it."""
    u = id_fractions(ids, seed)
    return (1.0 - u) ** (-1.0 / alpha) - 1.0


def model_digest(model: str | Path, sample: int = 1 << 20) -> str:
    """A fingerprint of the model's files (name, size, first and last MiB of each; the fastText
    sidecar too): a model replaced at the same path is a different configuration."""
    path = Path(model).expanduser()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [
        path, sidecar_path(path)]
    digest = hashlib.sha256()
    for file in files:
        if not file.is_file():
            continue
        size = file.stat().st_size
        name = file.relative_to(path) if path.is_dir() else file.name
        digest.update(f"{name}:{size}".encode())
        with open(file, "rb") as f:
            digest.update(f.read(sample))
            if size > 2 * sample:
                f.seek(size - sample)
                digest.update(f.read(sample))
    return digest.hexdigest()[:16]


def _column(values: np.ndarray, type_: pa.DataType) -> pa.Array:
    """NaN -> null."""
    return pa.array(values, type_, mask=np.isnan(values))


class ClassifierFilter(Filter):
    """Score documents with a quality model as published, and decide by rules over the scores.

    ``model``: a fastText ``.bin``/``.ftz`` of any labels (its text preparation read from the
    sidecar ``curate classifier train`` writes; a model trained elsewhere gets newlines made
    spaces), a local Hugging Face sequence-classification directory, or a NeMo Curator
    classifier checkpoint (batched torch inference, on a GPU worker where there is one). A
    classifier writes the probability of ``label`` to ``score_field`` and the label it predicts
    to ``<score_field>_label``; a regression head (FineWeb-Edu) writes its raw output to
    ``score_field`` and FineWeb-Edu's ``int(round(max(0, min(score, 5))))`` to
    ``<score_field>_int``. Decide with one of ``threshold`` (``low_quality``),
    ``min_int_score`` (``low_quality``), ``keep_labels`` (``label_not_kept``) or ``pareto``
    (``pareto_sampled_out``); with none, every document is kept. With ``languages``, only
    documents whose ``lang_field`` is one of them are scored and decided: the others pass
    untouched, with no score. A scored document without text is removed (``no_text``)."""

    type = "classifier_filter"
    version: ClassVar[int] = 2  # 2: no score for a document without text (no_text), not 0
    placement: ClassVar[frozenset[str]] = frozenset({"device", "batch_size", "batch_tokens",
                                                     "threads", "torch_compile"})
    score_bins: ClassVar[dict[str, ScoreBins]] = {PROBABILITY: ScoreBins(0.0, 1.0, 20),
                                                  REGRESSION: ScoreBins(0.0, 5.0, 20)}
    decision_params: ClassVar[frozenset[str]] = frozenset({
        "keep_scores", "threshold", "min_int_score", "keep_labels", "pareto"})

    model: str = Field(description="fastText model file (.bin/.ftz), a local Hugging Face "
                       "sequence-classification directory, or a NeMo Curator classifier "
                       "checkpoint directory.")
    label: str | int | None = Field(
        None, description="Classifiers: the label whose probability is the score: fastText name "
        "(hq or __label__hq; default: the sidecar's); HF/NeMo index or id2label name (default: "
        "1 of 2 labels, else the predicted label's probability).")
    score_field: str = Field("quality_score", description="Column that receives the score "
                             "(also <score_field>_label or <score_field>_int).")
    keep_scores: bool = Field(True, description="Keep the score columns in the output.")
    threshold: float | None = Field(None, description="Remove documents scoring below it "
                                    "(reason low_quality); a probability is in [0, 1].")
    min_int_score: int | None = Field(
        None, ge=0, le=5, description="Regression heads: remove documents whose integer score "
        "is below it (reason low_quality); FineWeb-Edu keeps 3.")
    keep_labels: list[str] | None = Field(
        None, description="Classifiers: remove documents whose predicted label is not one of "
        "these (reason label_not_kept), e.g. [High, Medium].")
    pareto: Pareto | None = Field(None, description="GPT-3 Pareto sampling {alpha, seed}: keep "
                                  "when a per-document draw exceeds 1 - score.")
    languages: list[str] | None = Field(
        None, description="Score and decide only documents in these languages (ISO 639-1, read "
        "from lang_field); the others pass untouched with no score. Default: every document.")
    lang_field: str = Field("lang", description="Column with the document language.")
    backbone: str | None = Field(
        None, description="NeMo checkpoints: a directory holding the encoder's config.json "
        "(default: base_model, a local directory or in the Hugging Face cache).")
    device: Literal["auto", "cpu", "gpu"] = Field(
        "auto", description="Torch models: auto runs on GPU workers when the cluster has them.")
    precision: Literal["auto", "fp32", "bf16"] = Field(
        "auto", description="Torch models: auto is bf16 weights on a GPU, fp32 on the CPU; bf16 "
        "on the CPU is autocast.")
    torch_compile: bool = Field(
        False, description="Torch models: run the forward pass through torch.compile (dynamic "
        "shapes; compiled once per worker, which takes a minute or more).")
    batch_size: int = Field(256, gt=0, description="Torch models: most documents per forward "
                            "pass.")
    batch_tokens: int | None = Field(
        None, gt=0, description="Torch models: most padded tokens per forward pass (documents "
        "batched by length); default 16,384 on the CPU, 131,072 on a GPU.")
    threads: int | None = Field(None, gt=0, description="Torch models on the CPU: torch threads "
                                "(default: the worker's share of the cores).")
    max_length: int = Field(512, gt=0, description="Torch models: tokens read per document "
                            "(never beyond the model's positions).")
    max_chars: int | None = Field(None, gt=0, description="Torch models: characters read per "
                                  "document before tokenizing (NeMo's max_chars).")

    _scorer: Any = None
    _info: ModelInfo | None = None

    _check_languages = field_validator("languages")(normalised_languages)

    @field_validator("model")
    @classmethod
    def _check_model(cls, value: str) -> str:
        if is_dir(value):
            check_dir(value)
        else:
            try:
                check_model_file(value)
            except ValueError as err:
                raise ValueError(f"{err}, nor a Hugging Face model directory") from None
        return value

    @model_validator(mode="after")
    def _consistent(self) -> ClassifierFilter:
        decisions = [d for d in ("threshold", "min_int_score", "keep_labels", "pareto")
                     if getattr(self, d) is not None]
        if len(decisions) > 1:
            raise ValueError(f"set one decision, not {' and '.join(decisions)}")
        info = self.info
        if isinstance(self.label, int) and info.format == "fasttext":
            raise ValueError("a fastText label is a name (hq or __label__hq), not an index")
        if info.regression:
            wrong = [p for p in ("label", "keep_labels", "pareto") if getattr(self, p) is not None]
            if wrong:
                raise ValueError(f"{', '.join(wrong)}: the model has a regression head (one "
                                 "score, no labels); decide with threshold or min_int_score")
        elif self.min_int_score is not None:
            raise ValueError("min_int_score: the model is a classifier; it is for regression "
                             "heads (FineWeb-Edu)")
        elif self.threshold is not None and not 0 <= self.threshold <= 1:
            raise ValueError(f"threshold: {self.threshold} is not a probability (0 to 1)")
        if self.backbone is not None and info.format != "nemo":
            raise ValueError("backbone: only for NeMo Curator checkpoints")
        return self

    @property
    def info(self) -> ModelInfo:
        if self._info is None:
            self._info = (inspect_dir(self.model) if is_dir(self.model)
                          else ModelInfo("fasttext", False, None))
        return self._info

    @property
    def int_field(self) -> str:
        return f"{self.score_field}_int"

    @property
    def label_field(self) -> str:
        return f"{self.score_field}_label"

    def side_inputs(self) -> list[str]:
        return [self.model, *([self.backbone] if self.backbone else [])]

    def decisive(self) -> dict[str, Any]:
        digests = {"model_digest": model_digest(self.model)}
        if self.backbone:
            digests["backbone_digest"] = model_digest(self.backbone)
        return {**super().decisive(), **digests}

    def check(self) -> None:
        super().check()
        if self.languages == []:
            raise ValueError("languages: an empty list scores no document; leave it out to "
                             "score every language")
        info = self.info
        if info.format == "fasttext":
            from curator.stages.filters.classifier_fasttext import positive_label, read_sidecar
            from curator.stages.langid import model_labels

            labels = list(model_labels(self.model))
            positive_label(self.model, self.label or read_sidecar(self.model)[1], labels)
            wanted = [full_label(k) for k in self.keep_labels or []]
        else:
            labels = list((info.id2label or {}).values())
            if info.id2label is not None and not info.regression:
                label_index(self.label, info.id2label, Path(self.model))
            wanted = list(self.keep_labels or [])
        unknown = [k for k in wanted if labels and k not in labels]
        if unknown:
            raise ValueError(f"keep_labels: {unknown} not among the model's labels {labels}")
        if info.format == "nemo":
            from curator.stages.filters.classifier_models import read_config
            from curator.stages.filters.classifier_nemo import backbone_config

            backbone_config(Path(self.model), str(read_config(self.model)["base_model"]),
                            self.backbone)

    def requirements(self) -> dict[str, str]:
        if self.info.format == "fasttext":
            return {"fasttext": "classifier"}
        return {"torch": "hf", "transformers": "hf"}

    def resources(self) -> dict[str, float]:
        return {"GPU": 1} if self.info.format != "fasttext" and self.device == "gpu" else {}

    def for_cluster(self, gpus: bool) -> ClassifierFilter:
        if self.device != "auto" or self.info.format == "fasttext":
            return self
        gpu = gpus and importlib.util.find_spec("torch") is not None
        if gpu:
            from curator.stages.filters.classifier_hf import gpu_usable

            gpu = gpu_usable()
        return self.model_copy(update={"device": "gpu" if gpu else "cpu"})

    def setup(self) -> None:
        info = self.info
        if info.format == "fasttext":
            from curator.stages.filters.classifier_fasttext import FastTextScorer

            self._scorer = FastTextScorer(Path(self.model).expanduser(), self.label)
            return
        from curator.stages.filters.classifier_hf import load_hf, torch_device
        from curator.stages.filters.classifier_torch import TorchScorer

        device = torch_device(self.device)
        if info.format == "nemo":
            from curator.stages.filters.classifier_nemo import load_nemo

            encoder = load_nemo(self.model, self.max_length, self.backbone)
        else:
            encoder = load_hf(self.model, self.max_length)
        index = None if info.regression else label_index(self.label, encoder.id2label,
                                                         Path(self.model))
        precision = self.precision if self.precision != "auto" else (
            "bf16" if device == "cuda" else "fp32")
        self._scorer = TorchScorer(encoder, device, precision, self.batch_size,
                                   self.batch_tokens, self.threads, self.max_chars,
                                   info.regression, index, self.torch_compile)

    def in_scope(self, batch: pa.Table) -> np.ndarray:
        """Per row: whether this model applies (its language is one of ``languages``)."""
        if self.languages is None:
            return np.ones(batch.num_rows, dtype=bool)
        if self.lang_field not in batch.column_names:
            return np.zeros(batch.num_rows, dtype=bool)
        langs = batch.column(self.lang_field)
        codes = [c for c in pc.unique(langs).to_pylist()
                 if c and normalise_label(str(c)) in self.languages]
        wanted = pc.is_in(langs, pa.array(codes, langs.type))
        return pc.fill_null(wanted, False).to_numpy(zero_copy_only=False)

    def scores(self, batch: pa.Table) -> dict[str, pa.Array]:
        if self._scorer is None:
            self.setup()
        texts = batch.column(TEXT).to_pylist()
        scope = self.in_scope(batch)
        rows = [i for i, t in enumerate(texts) if scope[i] and t and t.strip()]
        score = np.full(len(texts), np.nan)
        labels: list[str | None] = [None] * len(texts)
        if rows:
            out = self._scorer.score([texts[i] for i in rows])
            score[rows] = out.score
            for i, label in zip(rows, out.label or [None] * len(rows), strict=True):
                labels[i] = label
        columns = {self.score_field: _column(score, pa.float64())}
        if self.info.regression:
            columns[self.int_field] = _column(int_scores(score), pa.float64()).cast(pa.int64())
        else:
            columns[self.label_field] = pa.array(labels, pa.string())
        return columns

    def rules(self, scores: dict[str, pa.Array], ids: list[str] | None = None,
              scope: np.ndarray | None = None) -> dict[str, pa.Array]:
        """Failing masks: ``no_text`` (in scope, not scored), then the decision's; a row out of
        scope (null scores) fails none."""
        score = scores[self.score_field]
        unscored = pc.is_null(score)
        rules = {"no_text": unscored if scope is None else pc.and_(unscored, pa.array(scope))}
        if self.threshold is not None:
            rules["low_quality"] = pc.less(score, self.threshold)
        elif self.min_int_score is not None:
            rules["low_quality"] = pc.less(scores[self.int_field], self.min_int_score)
        elif self.keep_labels is not None:
            fasttext = self.info.format == "fasttext"
            keep = [full_label(k) if fasttext else k for k in self.keep_labels]
            label = scores[self.label_field]
            rules["label_not_kept"] = pc.if_else(
                pc.is_null(label), pa.scalar(None, pa.bool_()),
                pc.invert(pc.is_in(label, pa.array(keep, pa.string()))))
        elif self.pareto is not None:
            if ids is None:
                raise ValueError("pareto sampling needs the document ids")
            draws = pareto_draws(ids, self.pareto.alpha, self.pareto.seed)
            values = score.to_numpy(zero_copy_only=False)
            rules["pareto_sampled_out"] = pa.array(~(draws > 1.0 - values),
                                                   mask=np.isnan(values))
        return rules

    def decide(self, batch: pa.Table, scores: dict[str, pa.Array]) -> BatchResult:
        scope = self.in_scope(batch)
        rules = self.rules(scores, self._draw_keys(batch) if self.pareto else None, scope)
        verdict = apply_rules(batch, rules, {}, False)
        table = self._with_scores(batch, scores, scope) if self.keep_scores else batch
        result = split_by_reason(table, verdict.reasons)
        result.rule_failures = verdict.failures
        histogram = REGRESSION if self.info.regression else PROBABILITY
        result.scores = {histogram: scores[self.score_field]}
        result.signals = scores
        out = int(len(scope) - scope.sum())
        result.notes = {"other_language": out} if out else {}
        return result

    @staticmethod
    def _with_scores(batch: pa.Table, scores: dict[str, pa.Array], scope: np.ndarray
                     ) -> pa.Table:
        """The batch with the score columns; a row out of scope keeps the value the column
        had (another language's model wrote it), or null."""
        mask = pa.array(scope)
        for name, values in scores.items():
            if name in batch.column_names:
                old = batch.column(name).combine_chunks().cast(values.type)
                values = pc.if_else(mask, values, old)
                batch = batch.drop_columns([name])
            batch = batch.append_column(name, values)
        return batch

    @staticmethod
    def _draw_keys(batch: pa.Table) -> list[str]:
        """The document ids; a document without one draws by its text, fixed by content alone."""
        n = batch.num_rows
        ids = batch.column(ID).to_pylist() if ID in batch.column_names else [None] * n
        if all(i is not None for i in ids):
            return ids
        texts = batch.column(TEXT).to_pylist()
        return [i if i is not None else f"text:{t}" for i, t in zip(ids, texts, strict=True)]
