"""The run options every task of a run carries: one frozen record instead of copies field by
field (``ShardTask``, ``PhaseContext``, the removal task)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal


@dataclass(frozen=True)
class RunSpec:
    """Where a run writes and the options that decide how its tasks write (picklable)."""

    run_dir: str
    on_error: Literal["skip", "fail"] = "skip"
    rejected: Literal["ids", "documents"] = "ids"
    batch_bytes: int = 32 << 20
    max_failed_fraction: float = 0.1
    part_bytes: int = 64 << 20  # text per intermediate part (a new file past it)
    intermediate_compression: str = "none"

    @classmethod
    def of(cls, pipeline: Any, root: str | Path) -> RunSpec:
        """The spec of ``pipeline`` (a ``PipelineModel``) run into ``root``."""
        return cls(str(root), pipeline.on_error, pipeline.rejected, pipeline.batch_bytes,
                   pipeline.max_failed_fraction, pipeline.part_bytes,
                   pipeline.intermediate_compression)
