"""Quality classifier filter: a fastText model (``curate classifier train``) or a local Hugging
Face sequence-classification directory scores each document; a threshold or GPT-3-style Pareto
sampling decides."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from curator.batch import ID, TEXT, BatchResult, id_fractions, split_by_reason
from curator.counts import ScoreBins
from curator.stages.base import Filter
from curator.stages.filtering import apply_rules
from curator.stages.filters.classifier_fasttext import sidecar_path
from curator.stages.filters.classifier_hf import check_hf_dir, is_hf_dir
from curator.stages.langid import check_model_file


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


class ClassifierFilter(Filter):
    """Score documents with a quality classifier and keep the good ones.

    ``model`` is a fastText ``.bin``/``.ftz`` (its text preprocessing read from the JSON sidecar
    ``curate classifier train`` writes beside it) or a local Hugging Face sequence-classification
    directory (batched torch inference, on a GPU worker where there is one). The score, the
    probability of ``label``, is written to ``score_field``. With ``threshold``, documents below it
    are removed (``low_quality``); with ``pareto``, a document is kept when a seeded per-document
    Pareto draw exceeds ``1 - score`` (``pareto_sampled_out``); with neither, all are kept."""

    type = "classifier_filter"
    version: ClassVar[int] = 1
    placement: ClassVar[frozenset[str]] = frozenset({"device", "batch_size"})
    #: the score's histogram in stats.json, whatever ``score_field`` is called
    score_bins: ClassVar[dict[str, ScoreBins]] = {"quality_score": ScoreBins(0.0, 1.0, 20)}

    model: str = Field(description="fastText model file (.bin/.ftz) or a local Hugging Face "
                       "sequence-classification model directory.")
    label: str | int | None = Field(
        None, description="Positive label: fastText name (hq or __label__hq; default: the "
        "sidecar's); HF index or id2label name (default: 1 of 2 labels).")
    score_field: str = Field("quality_score", description="Column that receives the score.")
    keep_scores: bool = Field(True, description="Keep the score column in the output.")
    threshold: float | None = Field(None, ge=0, le=1, description="Remove documents scoring "
                                    "below it (reason low_quality).")
    pareto: Pareto | None = Field(None, description="GPT-3 Pareto sampling {alpha, seed}: keep "
                                  "when a per-document draw exceeds 1 - score.")
    device: Literal["auto", "cpu", "gpu"] = Field(
        "auto", description="HF models: auto runs on GPU workers when the cluster has them.")
    batch_size: int = Field(64, gt=0, description="HF models: documents per forward pass.")
    max_length: int = Field(512, gt=0, description="HF models: tokens read per document.")

    _scorer: Any = None

    @field_validator("model")
    @classmethod
    def _check_model(cls, value: str) -> str:
        if is_hf_dir(value):
            check_hf_dir(value)
        else:
            try:
                check_model_file(value)
            except ValueError as err:
                raise ValueError(f"{err}, nor a Hugging Face model directory") from None
        return value

    @model_validator(mode="after")
    def _one_decision(self) -> ClassifierFilter:
        if self.threshold is not None and self.pareto is not None:
            raise ValueError("set threshold or pareto, not both")
        if isinstance(self.label, int) and not self.is_hf:
            raise ValueError("a fastText label is a name (hq or __label__hq), not an index")
        return self

    decision_params: ClassVar[frozenset[str]] = frozenset({"keep_scores", "threshold",
                                                           "pareto"})

    def side_inputs(self) -> list[str]:
        return [self.model]

    def decisive(self) -> dict[str, Any]:
        return {**super().decisive(), "model_digest": model_digest(self.model)}

    @property
    def is_hf(self) -> bool:
        return is_hf_dir(self.model)

    def check(self) -> None:
        super().check()
        if self.is_hf:
            from curator.stages.filters.classifier_hf import configured_labels, label_index

            id2label = configured_labels(self.model)
            if id2label is not None:
                label_index(self.label, id2label, Path(self.model))
        else:
            from curator.stages.filters.classifier_fasttext import positive_label, read_sidecar
            from curator.stages.langid import model_labels

            default = read_sidecar(self.model)[1]
            positive_label(self.model, self.label or default, model_labels(self.model))

    def requirements(self) -> dict[str, str]:
        if self.is_hf:
            return {"torch": "hf", "transformers": "hf"}
        return {"fasttext": "classifier"}

    def resources(self) -> dict[str, float]:
        return {"GPU": 1} if self.is_hf and self.device == "gpu" else {}

    def for_cluster(self, gpus: bool) -> ClassifierFilter:
        if self.device != "auto" or not self.is_hf:
            return self
        gpu = gpus and importlib.util.find_spec("torch") is not None
        if gpu:
            from curator.stages.filters.classifier_hf import gpu_usable

            gpu = gpu_usable()
        return self.model_copy(update={"device": "gpu" if gpu else "cpu"})

    def setup(self) -> None:
        if self.is_hf:
            from curator.stages.filters.classifier_hf import HFScorer

            self._scorer = HFScorer(self.model, self.label, self.device, self.batch_size,
                                    self.max_length)
        else:
            from curator.stages.filters.classifier_fasttext import FastTextScorer

            self._scorer = FastTextScorer(Path(self.model).expanduser(), self.label)

    def scores(self, batch: pa.Table) -> dict[str, pa.Array]:
        if self._scorer is None:
            self.setup()
        text = batch.column(TEXT)
        values = self._scorer.score(text.to_pylist() if self.is_hf else text)
        return {self.score_field: pa.array(values, pa.float64())}

    def rules(self, scores: dict[str, pa.Array], ids: list[str] | None = None
              ) -> dict[str, pa.Array]:
        score = scores[self.score_field].to_numpy(zero_copy_only=False)
        if self.threshold is not None:
            return {"low_quality": pa.array(score < self.threshold)}
        if self.pareto is not None:
            if ids is None:
                raise ValueError("pareto sampling needs the document ids")
            draws = pareto_draws(ids, self.pareto.alpha, self.pareto.seed)
            return {"pareto_sampled_out": pa.array(~(draws > 1.0 - score))}
        return {}

    def decide(self, batch: pa.Table, scores: dict[str, pa.Array]) -> BatchResult:
        rules = self.rules(scores, self._draw_keys(batch) if self.pareto else None)
        verdict = apply_rules(batch, rules, scores, self.keep_scores)
        result = split_by_reason(verdict.table, verdict.reasons)
        result.rule_failures = verdict.failures
        result.scores = {"quality_score": scores[self.score_field]}
        result.signals = scores
        return result

    @staticmethod
    def _draw_keys(batch: pa.Table) -> list[str]:
        """The document ids; a document without one draws by its text, fixed by content alone."""
        n = batch.num_rows
        ids = batch.column(ID).to_pylist() if ID in batch.column_names else [None] * n
        if all(i is not None for i in ids):
            return ids
        texts = batch.column(TEXT).to_pylist()
        return [i if i is not None else f"text:{t}" for i, t in zip(ids, texts, strict=True)]
