"""A rule family: named scores computed over a list of texts, and rules that threshold them.

Each rule is ``<family>.<rule>`` (its removal reason and its override key); its score lands as
column ``<family>.<score>``. A rule's scope says on which documents it may run:

* ``neutral``: counts lines, characters or substrings; runs on every language a family serves
  and, for a language that no family serves, on that language too;
* ``words``: splits on spaces (word counts, word n-grams): space-delimited languages only;
* ``english``: needs an English word list (Gopher's stop words): ``en`` only;
* ``ja``: Japanese character and sentence statistics: ``ja`` only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from curator.counts import ScoreBins


@dataclass(frozen=True)
class Rule:
    name: str                 # override key and reason suffix
    score: str                # score it thresholds
    op: str                   # fails when score < threshold ("min"), > it ("max"), >= it ("ge")
    default: float | None     # the published threshold; None: off unless overridden
    doc: str = ""


@dataclass(frozen=True)
class Family:
    """One published rule set. ``compute(texts, params)`` gives one float64 array per score."""

    name: str
    languages: str            # "space" (space-delimited languages) or "ja"
    scopes: dict[str, str]    # score -> scope
    bins: dict[str, ScoreBins]
    rules: tuple[Rule, ...]
    compute: Callable[[list[str], dict[str, float | None]], dict[str, np.ndarray]]
    source: str = ""
    params: dict[str, float | None] = field(default_factory=dict)  # non-rule knobs

    def defaults(self) -> dict[str, float | None]:
        return {**self.params, **{r.name: r.default for r in self.rules}}


def empty_scores(n: int, names) -> dict[str, np.ndarray]:
    return {name: np.full(n, np.nan) for name in names}
