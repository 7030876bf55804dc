"""Remove documents that are too short or too long, counted in Unicode characters."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, model_validator

from curator.batch import TEXT
from curator.stages.base import Filter


class LengthFilter(Filter):
    """Keep documents with ``min_chars <= len(text) <= max_chars`` (code points)."""

    type = "length_filter"
    holds_gil = False

    min_chars: int = Field(0, ge=0, description="Fewer characters: removed as 'too_short'.")
    max_chars: int | None = Field(None, gt=0, description="More characters: 'too_long'.")

    @model_validator(mode="after")
    def _bounds_in_order(self) -> LengthFilter:
        if self.max_chars is not None and self.max_chars < self.min_chars:
            raise ValueError(f"max_chars ({self.max_chars}) is below min_chars ({self.min_chars})")
        return self

    def reasons(self, batch: pa.Table) -> pa.Array:
        length = pc.utf8_length(batch.column(TEXT))
        null = pa.scalar(None, pa.string())
        reasons = pc.if_else(pc.less(length, self.min_chars), "too_short", null)
        if self.max_chars is not None:
            reasons = pc.if_else(pc.greater(length, self.max_chars), "too_long", reasons)
        return reasons
