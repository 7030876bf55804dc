"""The preset registry: a preset name -> its rule family (published rules and thresholds)."""

from __future__ import annotations

from curator.stages.filters.heuristic import c4, fineweb, gopher_quality, gopher_repetition, nemo
from curator.stages.filters.heuristic.japanese import FINEWEB2_JA, HOJICHAR, SWALLOW
from curator.stages.filters.heuristic.rules import Family

PRESETS: dict[str, Family] = {f.name: f for f in (
    gopher_quality.FAMILY, gopher_repetition.FAMILY, c4.FAMILY, fineweb.FAMILY, nemo.FAMILY,
    SWALLOW, HOJICHAR, FINEWEB2_JA)}

#: Languages written without spaces between words: word rules never run on them.
UNSPACED = frozenset({"ja", "zh", "th", "lo", "km", "my", "bo", "yue", "wuu"})


def describe() -> str:
    """One line per preset and rule, for the parameter documentation."""
    lines = []
    for family in PRESETS.values():
        rules = ", ".join(f"{r.name}={r.default}" for r in family.rules)
        lines.append(f"{family.name} [{family.languages}]: {rules}")
    return "; ".join(lines)
