"""FineWeb quality rules (Penedo et al. 2024), as datatrove 0.10.1's FineWebQualityFilter
computes them over the non-blank lines (``split("\\n")``), lines as they are (not stripped).

Which text: in datatrove's FineWeb recipe the filter runs after C4QualityFilter, which rewrites
the document to the lines it keeps, stripped; ``HeuristicFilter`` therefore hands these rules
the text C4 leaves when the ``c4`` preset comes before ``fineweb`` (the default), and the
document's own text otherwise (``curator/stages/filters/heuristic/__init__.py``)."""

from __future__ import annotations

import numpy as np

from curator.counts import ScoreBins
from curator.stages.filters.heuristic.gopher_repetition import find_duplicates
from curator.stages.filters.heuristic.rules import Family, Rule
from curator.stages.filters.heuristic.text import TERMINAL_PUNCTUATION, tokenize_all

SCORES = ("line_punct_ratio", "short_line_ratio", "char_dup_ratio", "newline_ratio")


def compute(texts: list[str], params: dict) -> dict[str, np.ndarray]:
    out = {name: np.full(len(texts), np.nan) for name in SCORES}
    short = int(params.get("short_line_length") or 30)
    stops = TERMINAL_PUNCTUATION
    tokens = tokenize_all(texts)
    for i, text in enumerate(texts):
        lines = [line for line in text.split("\n") if line.strip() != ""]
        if not lines:
            continue
        n = len(lines)
        out["line_punct_ratio"][i] = sum(1 for line in lines if line.endswith(stops)) / n
        out["short_line_ratio"][i] = sum(1 for line in lines if len(line) <= short) / n
        chars = len(text) - text.count("\n")
        out["char_dup_ratio"][i] = find_duplicates(lines)[1] / chars if chars else 0.0
        words = len(tokens[i])
        out["newline_ratio"][i] = text.count("\n") / words if words else np.inf
    return out


FAMILY = Family(
    name="fineweb", languages="space",
    source="Penedo et al. 2024 (FineWeb); datatrove FineWebQualityFilter defaults",
    scopes={"line_punct_ratio": "neutral", "short_line_ratio": "neutral",
            "char_dup_ratio": "neutral", "newline_ratio": "words"},
    bins={s: ScoreBins(0, 1, 20) for s in SCORES},
    rules=(
        Rule("min_line_punct_ratio", "line_punct_ratio", "min", 0.12,
             "lines ending in terminal punctuation"),
        Rule("max_short_line_ratio", "short_line_ratio", "max", 0.67, "lines <= 30 chars"),
        Rule("max_char_dup_ratio", "char_dup_ratio", "max", 0.01,
             "characters in repeated lines"),
        Rule("max_newline_ratio", "newline_ratio", "max", 0.3, "newlines per word"),
    ),
    params={"short_line_length": 30},
    compute=compute,
)
