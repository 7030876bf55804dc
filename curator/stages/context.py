"""What a dataset-wide stage gets from the runtime: restartable phases on the executor, the
shared removal phase, side inputs, and one counting type. Stages never import the runtime."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
import pyarrow as pa

from curator.counts import StageCount


@dataclass
class Decisions:
    """What a dataset stage decided for the rows of one part.

    ``removed`` marks the rows that go, each with ``reason``; ``columns`` are set on every row
    (kept and removed: a new column such as ``cluster_id``, or a rewritten ``text``),
    ``removed_columns`` on removed rows only (e.g. ``duplicate_of``, aligned with the removed
    rows in row order)."""

    removed: np.ndarray
    reason: str
    columns: dict[str, pa.Array] = field(default_factory=dict)
    removed_columns: dict[str, pa.Array] = field(default_factory=dict)


#: Reads one part's decisions: (part index, the part's table) -> Decisions. Must be picklable
#: (a module-level function or a frozen dataclass with ``__call__``).
Decide = Callable[[int, pa.Table], Decisions]


class DatasetContext(Protocol):
    """The runtime's services for one dataset stage of one run."""

    stage_name: str
    work_dir: Path
    rejected: Literal["ids", "documents"]
    batch_bytes: int

    def run_phase(self, phase: str, fn: Callable[[Any], dict], tasks: list[Any],
                  keys: list[str], resources: dict[str, float] | None = None,
                  reads: list[Path] | None = None) -> list[dict]:
        """Map ``fn`` over ``tasks`` (each commits its own files and returns a JSON-able dict);
        tasks finished by an earlier, cut run of the same configuration are not redone. With
        ``reads`` (the one part each task reads, its output depending on nothing else, named by
        ``keys``), a task is also reused by a run whose other parts changed."""

    def remove(self, parts: list[Path], decide: Decide,
               resources: dict[str, float] | None = None) -> tuple[list[Path], StageCount]:
        """The shared last phase: per part, drop what ``decide`` says (to ``rejected/``, with
        the reason), add its columns, write the part for the next segment; count it all."""

    def side_input(self, path: str) -> Path:
        """A local copy of a file the stage reads besides the dataset (task files of
        decontamination), the same on every worker."""

    def count(self) -> StageCount:
        """An empty count for this stage."""
