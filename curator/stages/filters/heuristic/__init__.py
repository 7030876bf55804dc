"""``heuristic_filter``: published rule sets (Gopher quality and repetition, C4, FineWeb, NeMo
Curator's English set, and for Japanese Swallow, HojiChar and FineWeb-2 ``jpn_Jpan``) as named
scores plus thresholds, chosen by preset, overridable one by one, routed by document language.

One module per rule family (``gopher_quality``, ``gopher_repetition``, ``c4``, ``fineweb``,
``nemo``, ``japanese``); ``presets`` maps names to families. Each family computes its scores
over the batch's texts in one pass (regexes and ``str`` methods in C, one Python loop per
document for what needs sets and counters); the rules then threshold whole score columns with Arrow.

The rules decide as datatrove's chain (GopherRepetition → GopherQuality → C4 → FineWeb) does:
datatrove's C4QualityFilter rewrites a document to the lines it keeps (stripped, citations
removed, only lines ending in terminal punctuation with 3+ words, no javascript or policy
lines), and the FineWeb filter after it judges that text. So when ``c4`` comes before
``fineweb`` in ``presets`` (the default order), the FineWeb scores of a space-delimited document
are computed over the text C4 leaves (``c4.kept_text``), and a document C4 leaves empty fails
``fineweb.min_line_punct_ratio`` (datatrove: "empty"); with ``fineweb`` alone or before ``c4``
they are computed over the document's own lines, as datatrove's FineWeb filter alone does. The
document's text itself is never rewritten (a filter keeps or removes documents).

Language routing (the ``lang`` column, or ``default_lang`` where it is absent or null): the
Japanese presets run on ``ja`` documents; every other document gets the space-delimited presets,
whose ``words`` rules run only on space-delimited languages (not on ja, zh, th, ...) and whose
``english`` rules (stop words, javascript/policy phrases) only on ``en``; a language that no
selected preset serves (``ja`` without a Japanese preset, ``zh``, ``th``) gets the
``neutral`` rules only: line, paragraph and character statistics (Gopher's duplicate
line/paragraph fractions, bullet and ellipsis lines; C4's lorem ipsum and curly bracket;
FineWeb's line punctuation, short lines and duplicated line characters).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, model_validator

from curator.batch import TEXT
from curator.counts import ScoreBins
from curator.stages.base import Filter
from curator.stages.filters.heuristic.c4 import kept_text
from curator.stages.filters.heuristic.presets import PRESETS, UNSPACED, describe
from curator.stages.filters.heuristic.rules import Family

DEFAULT_PRESETS = ["gopher_quality", "gopher_repetition", "c4", "fineweb", "swallow"]
_ALIASES = {"eng": "en", "jpn": "ja", "zho": "zh", "cmn": "zh", "tha": "th"}


def normalise_lang(code: str | None, default: str) -> str:
    if not code:
        return default
    base = code.replace("_", "-").split("-")[0].lower()
    return _ALIASES.get(base, base)


class HeuristicFilter(Filter):
    """Published heuristic rule sets: every rule a named score (column ``<preset>.<score>``) and
    a threshold (reason ``<preset>.<rule>``)."""

    type = "heuristic_filter"
    version = 2  # 2: the FineWeb rules read the text C4 leaves when c4 runs first (chain)
    score_bins: ClassVar[dict[str, ScoreBins]] = {
        f"{f.name}.{s}": b for f in PRESETS.values() for s, b in f.bins.items()}

    presets: list[str] = Field(
        default_factory=lambda: list(DEFAULT_PRESETS),
        description="Rule sets to apply, in order of precedence. Available, with their rules "
        "and published thresholds: " + describe() + ". [space] presets run on space-delimited "
        "languages (their neutral rules on any language without a rule set), [ja] on ja.")
    overrides: dict[str, float | None] = Field(
        default_factory=dict,
        description="'<preset>.<rule>' -> threshold (null turns the rule off), e.g. "
        "{gopher_quality.min_words: 30, c4.min_sentences: null}; also the knobs "
        "c4.max_word_length, c4.min_words_per_line, fineweb.short_line_length.")
    lang_field: str = Field("lang", description="Column with the document language (ISO 639).")
    default_lang: str = Field("en", description="Language of documents without one.")

    def score_params(self) -> dict[str, Any]:
        """``decisive`` without the rules' thresholds (the knobs the scores read stay)."""
        thresholds = {f"{name}.{rule.name}" for name in self.presets
                      for rule in PRESETS[name].rules}
        params = super().score_params()
        params["overrides"] = {k: v for k, v in self.overrides.items() if k not in thresholds}
        return params

    @model_validator(mode="after")
    def _known(self) -> HeuristicFilter:
        unknown = [p for p in self.presets if p not in PRESETS]
        if unknown:
            raise ValueError(f"unknown preset(s) {unknown}; available: {sorted(PRESETS)}")
        for key in self.overrides:
            preset, _, rule = key.partition(".")
            if preset not in self.presets:
                raise ValueError(f"override {key!r}: preset {preset!r} is not selected")
            if rule not in PRESETS[preset].defaults():
                raise ValueError(f"override {key!r}: {preset} has no rule or knob {rule!r}; "
                                 f"known: {sorted(PRESETS[preset].defaults())}")
        return self

    def params(self, family: Family) -> dict[str, float | None]:
        values = family.defaults()
        for key, value in self.overrides.items():
            preset, _, rule = key.partition(".")
            if preset == family.name:
                values[rule] = value
        return values

    def _langs(self, batch: pa.Table) -> np.ndarray:
        if self.lang_field not in batch.column_names:
            return np.full(batch.num_rows, normalise_lang(None, self.default_lang), dtype=object)
        return np.array([normalise_lang(v, self.default_lang)
                         for v in batch.column(self.lang_field).to_pylist()], dtype=object)

    def scores(self, batch: pa.Table) -> dict[str, pa.Array]:
        texts = [t or "" for t in batch.column(TEXT).to_pylist()]
        langs = self._langs(batch)
        families = [PRESETS[p] for p in self.presets]
        ja = langs == "ja"
        served_ja = ja if any(f.languages == "ja" for f in families) else np.zeros_like(ja)
        spaced = np.array([lang not in UNSPACED for lang in langs], dtype=bool)
        english = langs == "en"
        out: dict[str, pa.Array] = {
            "heuristic.blank": pa.array([not t.strip() for t in texts], pa.bool_())}
        subsets: dict[str, tuple[np.ndarray, list[str]]] = {}  # one list per routing: shared
        for k, family in enumerate(families):
            rows = served_ja if family.languages == "ja" else ~served_ja
            if family.languages not in subsets:
                index = np.flatnonzero(rows)
                subsets[family.languages] = index, [texts[i] for i in index]
            index, subset = subsets[family.languages]
            after_c4 = family.name == "fineweb" and "c4" in self.presets[:k]
            if after_c4:  # datatrove's chain: FineWeb reads the text C4 leaves
                subset = self._after_c4(subset, spaced[index])
            computed = family.compute(subset, self.params(family))
            if after_c4:  # nothing left after C4: datatrove's FineWeb removes it ("empty")
                emptied = np.array([not t.strip() for t in subset], dtype=bool) \
                    & ~np.array([not texts[i].strip() for i in index], dtype=bool)
                computed["line_punct_ratio"][emptied] = 0.0
            scope_rows = {"neutral": rows, "ja": rows, "words": rows & spaced,
                          "english": rows & spaced & english}
            for score, values in computed.items():
                column = np.full(len(texts), np.nan)
                column[index] = values
                column[~scope_rows[family.scopes[score]]] = np.nan
                out[f"{family.name}.{score}"] = pa.array(column, pa.float64(), from_pandas=True)
        return out

    def _after_c4(self, texts: list[str], spaced: np.ndarray) -> list[str]:
        """The text C4 leaves of each space-delimited document (its kept lines, stripped);
        other languages keep their text (C4's line rules do not run on them)."""
        params = self.params(PRESETS["c4"])
        return [kept_text(t, params) if s else t for t, s in zip(texts, spaced, strict=True)]

    def thresholds(self) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for name in self.presets:
            family = PRESETS[name]
            params = self.params(family)
            for rule in family.rules:
                if params[rule.name] is not None:
                    out.setdefault(f"{family.name}.{rule.score}", []).append(
                        float(params[rule.name]))
        return out

    def rules(self, scores: dict[str, pa.Array]) -> dict[str, pa.Array]:
        rules = {"empty": scores["heuristic.blank"]}
        for name in self.presets:
            family = PRESETS[name]
            params = self.params(family)
            for rule in family.rules:
                threshold = params[rule.name]
                if threshold is None:
                    continue
                score = scores[f"{family.name}.{rule.score}"]
                compare = {"min": pc.less, "max": pc.greater, "ge": pc.greater_equal}[rule.op]
                rules[f"{family.name}.{rule.name}"] = pc.fill_null(
                    compare(score, threshold), False)
        return rules
