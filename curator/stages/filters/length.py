"""Remove documents that are too short or too long, counted in Unicode characters."""

from __future__ import annotations

from typing import ClassVar

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, model_validator

from curator.batch import TEXT
from curator.counts import ScoreBins
from curator.stages.base import Filter


class LengthFilter(Filter):
    """Keep documents with ``min_chars <= len(text) <= max_chars`` (code points)."""

    type = "length_filter"
    holds_gil = False
    score_bins: ClassVar[dict[str, ScoreBins]] = {"chars": ScoreBins(1, 1e7, 28, log=True)}

    decision_params: ClassVar[frozenset[str]] = frozenset({"keep_scores", "min_chars",
                                                           "max_chars"})

    min_chars: int = Field(0, ge=0, description="Fewer characters: removed as 'too_short'.")
    max_chars: int | None = Field(None, gt=0, description="More characters: 'too_long'.")

    @model_validator(mode="after")
    def _bounds_in_order(self) -> LengthFilter:
        if self.max_chars is not None and self.max_chars < self.min_chars:
            raise ValueError(f"max_chars ({self.max_chars}) is below min_chars ({self.min_chars})")
        return self

    def scores(self, batch: pa.Table) -> dict[str, pa.Array]:
        return {"chars": pc.utf8_length(batch.column(TEXT)).combine_chunks()}

    def thresholds(self) -> dict[str, list[float]]:
        cuts = [float(c) for c in (self.min_chars or None, self.max_chars) if c is not None]
        return {"chars": cuts} if cuts else {}

    def rules(self, scores: dict[str, pa.Array]) -> dict[str, pa.Array]:
        rules = {"too_short": pc.less(scores["chars"], self.min_chars)}
        if self.max_chars is not None:
            rules["too_long"] = pc.greater(scores["chars"], self.max_chars)
        return rules
