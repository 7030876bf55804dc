"""The one counting type: per stage (and per shard, or per dataset stage), every document is
``kept``, ``removed`` (with a reason) or ``failed``, so ``in == kept + removed + failed``."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ScoreBins:
    """Fixed histogram bins of a filter score, so that per-shard histograms add up."""

    low: float
    high: float
    bins: int = 20
    log: bool = False

    def edges(self) -> np.ndarray:
        if self.log:
            return np.logspace(np.log10(self.low), np.log10(self.high), self.bins + 1)
        return np.linspace(self.low, self.high, self.bins + 1)

    def count(self, values: np.ndarray) -> list[int]:
        """Counts per bin; values outside the range land in the first or last bin, NaN nowhere."""
        values = values[~np.isnan(values)]
        edges = self.edges()
        index = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, self.bins - 1)
        return np.bincount(index, minlength=self.bins).tolist()


@dataclass
class StageCount:
    """Accounting of one stage: ``in == kept + removed + failed``, removals by reason, every
    filter rule's failures (a document may fail several), score histograms and notes (counted
    events such as ids converted to strings)."""

    name: str
    type: str
    n_in: int = 0
    kept: int = 0
    removed: int = 0
    failed: int = 0
    removed_by_reason: Counter = field(default_factory=Counter)
    seconds: float = 0.0
    rules: Counter = field(default_factory=Counter)
    notes: Counter = field(default_factory=Counter)
    histograms: dict[str, dict[str, Any]] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)  # a dataset stage's own figures

    def check(self) -> None:
        if self.n_in != self.kept + self.removed + self.failed:
            raise AssertionError(f"stage {self.name!r} lost documents: in={self.n_in} "
                                 f"kept={self.kept} removed={self.removed} failed={self.failed}")

    def add_histogram(self, score: str, bins: ScoreBins, values: np.ndarray) -> None:
        counts = bins.count(np.asarray(values, dtype=np.float64))
        entry = self.histograms.setdefault(
            score, {"edges": [float(e) for e in bins.edges()], "counts": [0] * bins.bins})
        entry["counts"] = [a + b for a, b in zip(entry["counts"], counts, strict=True)]

    def merge(self, other: StageCount) -> StageCount:
        """The sum of two counts of the same stage (shards of one run)."""
        total = StageCount(self.name, self.type, self.n_in + other.n_in, self.kept + other.kept,
                           self.removed + other.removed, self.failed + other.failed,
                           self.removed_by_reason + other.removed_by_reason,
                           self.seconds + other.seconds, self.rules + other.rules,
                           self.notes + other.notes, {k: dict(v) for k, v in
                                                      self.histograms.items()},
                           {**other.facts, **self.facts})
        for score, entry in other.histograms.items():
            mine = total.histograms.setdefault(score, {"edges": entry["edges"],
                                                       "counts": [0] * len(entry["counts"])})
            mine["counts"] = [a + b for a, b in zip(mine["counts"], entry["counts"], strict=True)]
        return total

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name, "type": self.type, "in": self.n_in, "kept": self.kept,
            "removed": self.removed, "failed": self.failed,
            "removed_by_reason": dict(sorted(self.removed_by_reason.items())),
            "seconds": round(self.seconds, 4)}
        if self.rules:
            out["rules"] = dict(sorted(self.rules.items()))
        if self.notes:
            out["notes"] = dict(sorted(self.notes.items()))
        if self.histograms:
            out["histograms"] = {k: self.histograms[k] for k in sorted(self.histograms)}
        return {**out, **self.facts}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StageCount:
        known = {"name", "type", "in", "kept", "removed", "failed", "removed_by_reason",
                 "seconds", "rules", "notes", "histograms"}
        return cls(data["name"], data["type"], data["in"], data["kept"], data["removed"],
                   data["failed"], Counter(data.get("removed_by_reason", {})),
                   data.get("seconds", 0.0), Counter(data.get("rules", {})),
                   Counter(data.get("notes", {})), dict(data.get("histograms", {})),
                   {k: v for k, v in data.items() if k not in known})
