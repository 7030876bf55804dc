"""The one counting type: per stage (and per shard, or per dataset stage), every document is
``kept``, ``removed`` (with a reason) or ``failed``, so ``in == kept + removed + failed``."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


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


#: Bins of the kept documents' text lengths in UTF-8 bytes (1 B to 10 MB).
LENGTH_BINS = ScoreBins(1.0, 1e7, 28, log=True)


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
    bytes_kept: int = 0  # UTF-8 bytes of the kept documents' text
    languages: Counter = field(default_factory=Counter)  # kept documents per `lang`
    lengths: list[int] = field(default_factory=list)  # kept documents per LENGTH_BINS bin
    cpu_seconds: float = 0.0  # CPU time its work took (runtime/worker/cpu_clock.py)
    gpu_seconds: float = 0.0  # seconds it held a GPU

    def check(self) -> None:
        if self.n_in != self.kept + self.removed + self.failed:
            raise AssertionError(f"stage {self.name!r} lost documents: in={self.n_in} "
                                 f"kept={self.kept} removed={self.removed} failed={self.failed}")

    def add_histogram(self, score: str, bins: ScoreBins, values: np.ndarray,
                      kept: np.ndarray | None = None) -> None:
        """Count a score's values; with ``kept`` (a mask) also those of the kept documents."""
        values = np.asarray(values, dtype=np.float64)
        entry = self.histograms.setdefault(
            score, {"edges": [float(e) for e in bins.edges()], "counts": [0] * bins.bins})
        entry["counts"] = _add(entry["counts"], bins.count(values))
        if kept is not None:
            entry["kept"] = _add(entry.get("kept", [0] * bins.bins), bins.count(values[kept]))

    def observe_kept(self, table: pa.Table) -> None:
        """Bytes, text lengths and languages (``lang``, when present) of kept documents."""
        if table.num_rows == 0 or "text" not in table.column_names or not _is_text(
                table.schema.field("text").type):
            return
        sizes = pc.fill_null(pc.binary_length(table.column("text")), 0)
        self.bytes_kept += int(pc.sum(sizes).as_py() or 0)
        lengths = LENGTH_BINS.count(sizes.to_numpy().astype(np.float64))
        self.lengths = _add(self.lengths or [0] * LENGTH_BINS.bins, lengths)
        if "lang" in table.column_names:
            for item in pc.value_counts(table.column("lang")).to_pylist():
                self.languages[str(item["values"] or "unknown")] += item["counts"]

    def kept_figures(self) -> dict[str, Any]:
        """What ``observe_kept`` found, with the rows kept: for a writer that publishes these
        rows as they are (``add_kept_figures``) instead of reading their text again."""
        return {"rows": self.kept, "bytes": self.bytes_kept, "lengths": self.lengths,
                "languages": dict(self.languages)}

    def add_kept_figures(self, figures: dict[str, Any]) -> None:
        """Count ``kept_figures`` as if ``observe_kept`` had seen those rows."""
        self.bytes_kept += int(figures["bytes"])
        if figures["lengths"]:
            self.lengths = _add(self.lengths or [0] * LENGTH_BINS.bins, figures["lengths"])
        self.languages.update({str(k): int(v) for k, v in figures["languages"].items()})

    def merge(self, other: StageCount) -> StageCount:
        """The sum of two counts of the same stage (shards of one run)."""
        total = StageCount(self.name, self.type, self.n_in + other.n_in, self.kept + other.kept,
                           self.removed + other.removed, self.failed + other.failed,
                           self.removed_by_reason + other.removed_by_reason,
                           self.seconds + other.seconds, self.rules + other.rules,
                           self.notes + other.notes, {k: dict(v) for k, v in
                                                      self.histograms.items()},
                           {**other.facts, **self.facts}, self.bytes_kept + other.bytes_kept,
                           self.languages + other.languages,
                           _add(self.lengths, other.lengths),
                           cpu_seconds=self.cpu_seconds + other.cpu_seconds,
                           gpu_seconds=self.gpu_seconds + other.gpu_seconds)
        for score, entry in other.histograms.items():
            mine = total.histograms.setdefault(score, {"edges": entry["edges"],
                                                       "counts": [0] * len(entry["counts"])})
            for key in ("counts", "kept"):
                if key in entry:
                    mine[key] = _add(mine.get(key, []), entry[key])
        return total

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name, "type": self.type, "in": self.n_in, "kept": self.kept,
            "removed": self.removed, "failed": self.failed,
            "removed_by_reason": dict(sorted(self.removed_by_reason.items())),
            "seconds": round(self.seconds, 4), "cpu_seconds": round(self.cpu_seconds, 4)}
        if self.gpu_seconds:
            out["gpu_seconds"] = round(self.gpu_seconds, 4)
        if self.rules:
            out["rules"] = dict(sorted(self.rules.items()))
        if self.notes:
            out["notes"] = dict(sorted(self.notes.items()))
        if self.histograms:
            out["histograms"] = {k: self.histograms[k] for k in sorted(self.histograms)}
        if self.lengths:
            out["bytes_kept"] = self.bytes_kept
            out["lengths"] = {"edges": [float(e) for e in LENGTH_BINS.edges()],
                              "counts": self.lengths}
        if self.languages:
            out["languages"] = dict(self.languages.most_common())
        return {**out, **self.facts}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StageCount:
        known = {"name", "type", "in", "kept", "removed", "failed", "removed_by_reason",
                 "seconds", "rules", "notes", "histograms", "bytes_kept", "lengths", "languages",
                 "cpu_seconds", "gpu_seconds"}
        return cls(data["name"], data["type"], data["in"], data["kept"], data["removed"],
                   data["failed"], Counter(data.get("removed_by_reason", {})),
                   data.get("seconds", 0.0), Counter(data.get("rules", {})),
                   Counter(data.get("notes", {})), dict(data.get("histograms", {})),
                   {k: v for k, v in data.items() if k not in known},
                   data.get("bytes_kept", 0), Counter(data.get("languages", {})),
                   list(data.get("lengths", {}).get("counts", [])),
                   cpu_seconds=data.get("cpu_seconds", 0.0),
                   gpu_seconds=data.get("gpu_seconds", 0.0))


def _add(a: list[int], b: list[int]) -> list[int]:
    """Element-wise sum of two bin counts; an empty list counts as zeros."""
    if not a or not b:
        return list(a or b)
    return [x + y for x, y in zip(a, b, strict=True)]


def _is_text(kind: pa.DataType) -> bool:
    return (pa.types.is_string(kind) or pa.types.is_large_string(kind)
            or pa.types.is_binary(kind) or pa.types.is_large_binary(kind))


def per_second(count: float, seconds: float) -> str:
    """A throughput that never reads 0 for a slow stage: 1,234 or 12 or 0.35 (per second)."""
    rate = count / seconds if seconds > 0 else 0.0
    return f"{rate:,.0f}" if rate >= 10 or rate == 0 else f"{rate:.2g}"
