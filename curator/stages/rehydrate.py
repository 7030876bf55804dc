"""``rehydrate``: how many times each document kept by dedup goes into the training data, from
the size of the duplicate cluster it survived (FineWeb-2's rehydration); ``tokenize`` with
``repeat_field`` writes it that many times."""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
from pydantic import Field, field_validator

from curator.batch import ID, BatchResult, Failure
from curator.stages.base import BatchStage

#: FineWeb-2's published weights (its README): (smallest cluster size, times written).
FINEWEB2_SCHEDULE = ((1, 1), (2, 2), (3, 3), (4, 3), (5, 5), (100, 8), (1000, 1))


class Rehydrate(BatchStage):
    """Set ``repeat_field`` from ``size_field`` (fuzzy or exact dedup's ``cluster_size``) by
    ``schedule``: a size gets the repeats of the last entry whose smallest size it reaches. In
    curator's pipelines dedup runs after the quality filters, so the size counts the cluster's
    documents that passed them (FineWeb-2 dedups first and counts every copy). A null size
    reads 1."""

    type = "rehydrate"
    holds_gil = False

    size_field: str = Field("cluster_size", description="Column with the duplicate cluster's "
                            "size of each kept document.")
    schedule: list[tuple[int, int]] = Field(
        default_factory=lambda: list(FINEWEB2_SCHEDULE),
        description="[smallest cluster size, times written], ascending from size 1 (default "
        "FineWeb-2's: 1 → 1, 2 → 2, 3 → 3, 4 → 3, 5-99 → 5, 100-999 → 8, 1000+ → 1).")
    repeat_field: str = Field("repeats", description="Column the repeat counts go to.")

    @field_validator("schedule")
    @classmethod
    def _ascending_from_one(cls, schedule: list[tuple[int, int]]) -> list[tuple[int, int]]:
        sizes = [size for size, _ in schedule]
        if not schedule or sizes[0] != 1 or any(b <= a for a, b in itertools.pairwise(sizes)):
            raise ValueError("schedule: smallest sizes ascending, the first 1")
        if any(times < 0 for _, times in schedule):
            raise ValueError("schedule: times written must be 0 or more")
        return schedule

    def repeats(self, sizes: np.ndarray) -> np.ndarray:
        """Times written for each cluster size (sizes below 1 read 1)."""
        smallest = np.array([size for size, _ in self.schedule])
        times = np.array([t for _, t in self.schedule], np.int32)
        return times[np.searchsorted(smallest, np.maximum(sizes, 1), side="right") - 1]

    def process(self, batch: pa.Table) -> BatchResult:
        if self.size_field not in batch.column_names:
            error = (f"no column {self.size_field!r} (size_field) in the batch: put rehydrate "
                     f"after fuzzy_dedup or exact_dedup; columns: {batch.column_names}")
            return BatchResult(kept=batch.slice(0, 0), failed=[
                Failure(stage=self.name or self.type, error=error, id=i)
                for i in batch.column(ID).to_pylist()])
        sizes = batch.column(self.size_field).cast(pa.int64()).fill_null(1).to_numpy(
            zero_copy_only=False)
        column = pa.array(self.repeats(sizes), pa.int32())
        if self.repeat_field in batch.column_names:
            batch = batch.drop_columns([self.repeat_field])
        return BatchResult(kept=batch.append_column(self.repeat_field, column))
