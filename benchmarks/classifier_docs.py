"""Web-like documents of real text for the classifier benchmarks (CPU: classifier_bert.py; GPU:
bench_classifier_gpu.py), any number of them, each one distinct.

Length: drawn from a log-normal fitted to the text ``extract_html`` takes from the Common Crawl
pages of ../shared/corpus/warc (98 pages: median 1,665 characters, 10th percentile 401, 90th
6,349; the fit's median 1,665 and sigma 1.04 give 10th/90th percentiles of 438 and 6,330), cut
to [200, 100,000] characters. Text: English sentences of the corpus (the sentence pool of
bench_dedup_product.py: books, speeches, reviews, web pages) drawn at random until the length is
reached. The pool is read from ``--corpus`` (a folder holding ``pool.json.gz``, or the corpus
itself), so the GPU machine, which has no ../shared, gets it carried."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np

#: The log-normal of the Common Crawl pages' text length (characters), see the module text.
MEDIAN_CHARS, SIGMA = 1665, 1.04
MIN_CHARS, MAX_CHARS = 200, 100_000


def english_sentences(corpus: Path) -> list[str]:
    """The corpus's English sentences (bench_dedup_product's pool)."""
    from bench_dedup_product import build_pool

    return build_pool(corpus)["en"]


def web_like_documents(sentences: list[str], n: int, seed: int) -> list[dict]:
    """``n`` documents ``{"id", "text"}``: lengths from the log-normal, random sentences."""
    rng = np.random.default_rng(seed)
    lengths = np.clip(rng.lognormal(math.log(MEDIAN_CHARS), SIGMA, n), MIN_CHARS, MAX_CHARS)
    pick = random.Random(seed)
    docs = []
    for i, length in enumerate(lengths.astype(int)):
        parts, size = [], 0
        while size < length:
            sentence = pick.choice(sentences)
            parts.append(sentence)
            size += len(sentence) + 1
        docs.append({"id": f"doc-{i:06d}", "text": " ".join(parts)[:length]})
    return docs


def describe_lengths() -> str:
    """The length distribution, for a result file."""
    return (f"lengths log-normal (median {MEDIAN_CHARS:,} characters, sigma {SIGMA}, cut to "
            f"[{MIN_CHARS:,}, {MAX_CHARS:,}]: Common Crawl pages' extracted text)")


def describe() -> str:
    """One sentence for a result file."""
    return f"{describe_lengths()}, random English sentences of the corpus (classifier_docs.py)"


def real_documents(corpus: Path, n: int, seed: int) -> list[dict]:
    """``n`` distinct real English documents ``{"id", "text", "origin"}`` whose lengths follow
    the log-normal above: for each length drawn, the unused document nearest to it in length.
    The pool: the text ``extract_html`` takes from the corpus's HTML pages (the Zyte and
    trafilatura evaluation sets, the HTML responses of its WARC files), Wikipedia paragraphs
    (BoolQ's passages) and book passages (LAMBADA's), each text once."""
    import bisect

    rng = np.random.default_rng(seed)
    targets = np.clip(rng.lognormal(math.log(MEDIAN_CHARS), SIGMA, n), MIN_CHARS, MAX_CHARS)
    pool = sorted({text: origin for origin, text in _real_pool(corpus)}.items(),
                  key=lambda item: (len(item[0]), item[0]))
    if len(pool) < n:
        raise SystemExit(f"{corpus}: {len(pool)} real documents, fewer than {n}")
    lengths = [len(text) for text, _ in pool]
    free = list(range(len(pool)))  # positions in ``pool`` not taken, by length
    docs = []
    for i, target in enumerate(targets):
        at = bisect.bisect_left(_Lengths(lengths, free), target)
        nearest = min((k for k in (at - 1, at) if 0 <= k < len(free)),
                      key=lambda k: abs(lengths[free[k]] - target))
        text, origin = pool[free.pop(nearest)]
        docs.append({"id": f"real-{i:05d}", "text": text, "origin": origin})
    return docs


class _Lengths:
    """``lengths[free[k]]`` as a sequence, for ``bisect`` without a copy."""

    def __init__(self, lengths: list[int], free: list[int]) -> None:
        self.lengths, self.free = lengths, free

    def __len__(self) -> int:
        return len(self.free)

    def __getitem__(self, k: int) -> int:
        return self.lengths[self.free[k]]


def _real_pool(corpus: Path) -> list[tuple[str, str]]:
    """(origin, text) of every real English text of the corpus the benchmark draws from."""
    import gzip
    import json

    from bench_extract import extract_with_stage, load_sets, read_pages

    pages = [page for pages, _ in load_sets(corpus).values() for page in pages]
    pages += read_pages(f"{corpus}/warc/*/*.warc.gz")
    out = [("web page", t) for t in extract_with_stage(pages, {}) if len(t) >= MIN_CHARS]
    gauntlet = corpus / "benchmarks" / "llm_foundry_gauntlet"
    with gzip.open(gauntlet / "boolq.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            query = json.loads(line)["query"]
            passage = query.removeprefix("Passage: ").split("\nQuestion:")[0].strip()
            if len(passage) >= MIN_CHARS:
                out.append(("Wikipedia paragraph", passage))
    with gzip.open(gauntlet / "lambada_openai.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            item = json.loads(line)
            text = f"{item['context']} {item['continuation']}".strip()
            if len(text) >= MIN_CHARS:
                out.append(("book passage", text))
    return out
