"""Where a contaminated document is cut (GPT-3 / NeMo Curator): each matched n-gram is removed
with ``margin`` characters on each side; overlapping removals merge into one region, and each
region splits the document. Fragments shorter than ``min_fragment`` characters are dropped; a
document with more than ``max_splits`` regions, or no fragment left, is dropped whole. The
fragments that remain are joined with ``separator`` into the document's new text."""

from __future__ import annotations

from dataclasses import dataclass

SPLIT_TOO_OFTEN = "split_too_often"
FRAGMENTS_TOO_SHORT = "fragments_too_short"


@dataclass(frozen=True)
class CutRules:
    margin: int
    min_fragment: int
    max_splits: int
    separator: str


@dataclass(frozen=True)
class Cut:
    """What happens to one document: its removed regions, the fragments kept, and why it is
    dropped whole (``None`` when it is kept with the fragments' text)."""

    regions: list[tuple[int, int]]
    fragments: list[tuple[int, int]]
    dropped: str | None

    def text(self, original: str, separator: str) -> str:
        return separator.join(original[a:b] for a, b in self.fragments)


def merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted spans with the overlapping or touching ones merged."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def plan_cut(spans: list[tuple[int, int]], length: int, rules: CutRules) -> Cut:
    """The cut of a document of ``length`` code points whose matched n-grams are ``spans``."""
    regions = merge([(max(0, s - rules.margin), min(length, e + rules.margin))
                     for s, e in spans])
    bounds = [0] + [x for region in regions for x in region] + [length]
    fragments = [(a, b) for a, b in zip(bounds[::2], bounds[1::2], strict=True)
                 if b - a >= rules.min_fragment]
    if len(regions) > rules.max_splits:
        return Cut(regions, [], SPLIT_TOO_OFTEN)
    if not fragments:
        return Cut(regions, [], FRAGMENTS_TOO_SHORT)
    return Cut(regions, fragments, None)
