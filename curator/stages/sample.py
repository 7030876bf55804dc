"""Keep a deterministic, seeded fraction of documents, decided by a hash of each id."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from curator.batch import ID, id_fractions
from curator.stages.base import Filter


class Sample(Filter):
    """Keep each document with probability ``fraction``; the same ids are kept on every run."""

    type = "sample"

    fraction: float = Field(gt=0.0, le=1.0, description="Share of documents kept.")
    seed: int = Field(0, ge=0, description="Change it to draw another sample.")

    def reasons(self, batch: pa.Table) -> pa.Array:
        drop = id_fractions(batch.column(ID), self.seed) >= self.fraction
        null = pa.scalar(None, pa.string())
        return pc.if_else(pa.array(drop), "not_sampled", null)
