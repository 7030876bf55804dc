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


def describe() -> str:
    """One sentence for a result file."""
    return (f"lengths log-normal (median {MEDIAN_CHARS:,} characters, sigma {SIGMA}, cut to "
            f"[{MIN_CHARS:,}, {MAX_CHARS:,}]: Common Crawl pages' extracted text), random "
            "English sentences of the corpus (classifier_docs.py)")
