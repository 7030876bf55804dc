# ruff: noqa: RUF001  (Unicode punctuation sets are the point here)
"""C4 rules (Raffel et al. 2020), as datatrove 0.10.1's C4QualityFilter decides them.

datatrove walks the lines (``splitlines``): a line is *dropped* when a word is longer than
1000 characters, when (after removing ``[1]``/``[edit]``/``[citation needed]``) it does not end
in ``. ? ! " '`` or ends in ``...``, when it has fewer than 3 words; only then is the document
*removed* if the line holds "lorem ipsum" or "{"; then lines holding "javascript" or a policy
phrase are dropped; the document is removed with fewer than 5 sentences in the lines it kept.

Here: the decisions are the same (the scores are counted over the lines datatrove would reach),
but **the text is not rewritten**: a filter keeps or removes documents; dropping lines is a
cleaning step. ``c4.javascript_lines`` and ``c4.policy_lines`` count the lines datatrove would
drop (scores, no rule by default: set ``c4.max_javascript_lines`` / ``c4.max_policy_lines``).
Sentences inside a line are counted like spaCy's sentencizer (a new sentence after ``. ! ?``
when a non-punctuation token follows).
"""

from __future__ import annotations

import re

import numpy as np

from curator.counts import ScoreBins
from curator.stages.filters.heuristic.rules import Family, Rule
from curator.stages.filters.heuristic.text import PUNCTUATION_SET, TOKEN

CITATION = re.compile(r"\[\d*]|\[edit]|\[citation needed]")
END_PUNCTUATION = (".", "?", "!", '"', "'")
POLICY = ("terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies",
          "use cookies")
SENTENCE_END = frozenset(".!?。！？")
SCORES = ("lorem_ipsum", "curly_bracket", "sentences", "javascript_lines", "policy_lines")


def count_sentences(line: str) -> int:
    tokens = TOKEN.findall(line)
    count = 1 if tokens else 0
    seen_end = False
    for token in tokens:
        if seen_end and not PUNCTUATION_SET.issuperset(token):
            count += 1
            seen_end = False
        elif token in SENTENCE_END:
            seen_end = True
    return count


def _lines(text: str, max_word: int, min_words: int):
    """Each line C4 reaches (stripped, citations removed) with what C4 does with it: ``kept``,
    or ``javascript`` / ``policy`` (dropped); lines dropped for their shape are skipped."""
    for line in text.splitlines():
        line = line.strip()
        words = line.split()
        if any(len(w) > max_word for w in words):
            continue
        line = CITATION.sub("", line)
        if not line.endswith(END_PUNCTUATION) or line.endswith("..."):
            continue
        if len(words) < min_words:
            continue
        lower = line.lower()
        if "javascript" in lower:
            yield line, lower, "javascript"
        elif any(p in lower for p in POLICY):
            yield line, lower, "policy"
        else:
            yield line, lower, "kept"


def _knobs(params: dict) -> tuple[int, int]:
    return int(params.get("max_word_length") or 1000), int(params.get("min_words_per_line") or 3)


def kept_text(text: str, params: dict) -> str:
    """The text C4 leaves: the lines it keeps, joined with newlines (datatrove's
    C4QualityFilter rewrites the document to this, and the FineWeb rules after it read it)."""
    return "\n".join(line for line, _, what in _lines(text, *_knobs(params))
                     if what == "kept").strip()


def compute(texts: list[str], params: dict) -> dict[str, np.ndarray]:
    out = {name: np.zeros(len(texts)) for name in SCORES}
    max_word, min_words = _knobs(params)
    lorem, curly, sentences = out["lorem_ipsum"], out["curly_bracket"], out["sentences"]
    javascript, policy = out["javascript_lines"], out["policy_lines"]
    for i, text in enumerate(texts):
        for line, lower, what in _lines(text, max_word, min_words):
            if "lorem ipsum" in lower:
                lorem[i] = 1
            if what == "javascript":
                javascript[i] += 1
                continue
            if "{" in line:
                curly[i] = 1
            if what == "policy":
                policy[i] += 1
                continue
            sentences[i] += count_sentences(line)
    return out


FAMILY = Family(
    name="c4", languages="space",
    source="Raffel et al. 2020 (C4); datatrove C4QualityFilter defaults (document decisions)",
    scopes={"lorem_ipsum": "neutral", "curly_bracket": "neutral", "sentences": "words",
            "javascript_lines": "english", "policy_lines": "english"},
    bins={"lorem_ipsum": ScoreBins(0, 1, 2), "curly_bracket": ScoreBins(0, 1, 2),
          "sentences": ScoreBins(1, 1e5, 25, log=True),
          "javascript_lines": ScoreBins(0, 20, 20), "policy_lines": ScoreBins(0, 20, 20)},
    rules=(
        Rule("max_lorem_ipsum", "lorem_ipsum", "max", 0, "'lorem ipsum' in a kept line"),
        Rule("max_curly_bracket", "curly_bracket", "max", 0, "'{' in a kept line"),
        Rule("min_sentences", "sentences", "min", 5, "sentences in the lines C4 keeps"),
        Rule("max_javascript_lines", "javascript_lines", "max", None),
        Rule("max_policy_lines", "policy_lines", "max", None),
    ),
    params={"max_word_length": 1000, "min_words_per_line": 3},
    compute=compute,
)
