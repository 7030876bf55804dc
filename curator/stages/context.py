"""What a dataset-wide stage gets from the runtime: restartable phases on the executor, the
shared removal phase, side inputs, and one counting type. Stages never import the runtime."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar, get_args, get_origin, get_type_hints

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


R = TypeVar("R", bound="PhaseResult")


@dataclass(frozen=True)
class PhaseResult:
    """What one phase task returns, kept in its marker: a frozen dataclass whose fields are
    numbers, strings, booleans, tuples or lists of them, or dicts with string keys of them
    (``Any``: any JSON value)."""

    def to_record(self) -> dict[str, Any]:
        """The fields as a JSON-able dict."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_record(cls: type[R], record: dict[str, Any]) -> R:
        """The result ``to_record`` gave; ``TypeError`` for a record of another form."""
        hints = _hints(cls)
        if not isinstance(record, dict) or set(record) != set(hints):
            raise TypeError(f"not a {cls.__name__} record: {record!r:.200}")
        return cls(**{name: _typed(record[name], hint) for name, hint in hints.items()})


@cache
def _hints(cls: type[PhaseResult]) -> dict[str, Any]:
    """Each field's type, by name."""
    hints = get_type_hints(cls)
    return {f.name: hints[f.name] for f in fields(cls)}


def _typed(value: Any, hint: Any) -> Any:
    """``value`` read back from JSON as a ``hint`` (tuples come back as lists); ``TypeError``
    if it is not one."""
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        return value
    if origin in (tuple, list) and isinstance(value, (list, tuple)):
        kinds = [args[0]] * len(value) if len(args) == 1 or args[-1] is ... else list(args)
        if len(kinds) != len(value):
            raise TypeError(f"{value!r:.200} is not a {hint}")
        return origin(_typed(v, kind) for v, kind in zip(value, kinds, strict=True))
    if origin is dict and isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _typed(v, args[1]) for k, v in value.items()}
    if hint in (int, float, str, bool) and isinstance(value, (int, float) if hint is float
                                                      else hint):
        return value
    raise TypeError(f"{value!r:.200} is not a {hint}")


#: Reads one part's decisions: (part index, the part's table) -> Decisions. Must be picklable
#: (a module-level function or a frozen dataclass with ``__call__``).
Decide = Callable[[int, pa.Table], Decisions]


class DatasetContext(Protocol):
    """The runtime's services for one dataset stage of one run."""

    stage_name: str
    work_dir: Path
    rejected: Literal["ids", "documents"]
    batch_bytes: int

    def run_phase(self, phase: str, fn: Callable[[Any], R], tasks: list[Any], keys: list[str],
                  result: type[R], resources: dict[str, float] | None = None,
                  reads: list[Path] | None = None) -> list[R]:
        """Map ``fn`` over ``tasks`` (each commits its own files and returns a ``result``, a
        :class:`PhaseResult`), one result per task in order; tasks finished by an earlier, cut
        run of the same configuration are not redone (their saved results returned). With
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
