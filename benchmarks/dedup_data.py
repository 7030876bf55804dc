"""Real documents from ../shared/corpus for the dedup benchmarks, bulk copies and near-duplicates.

Documents: movie reviews and speeches (whole), Project Gutenberg books cut at blank lines into
documents of about 4,000 characters (without the licence header/footer), Japanese Wikipedia
paragraphs joined into one document per article.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
from pathlib import Path

import numpy as np
import pyarrow as pa

DEFAULT_CORPUS = Path(os.environ.get("CURATOR_CORPUS", Path(__file__).parents[2] / "shared/corpus"))
_PG_START = re.compile(r"\*\*\* ?START OF (THE|THIS) PROJECT GUTENBERG[^\n]*\n")
_PG_END = re.compile(r"\*\*\* ?END OF (THE|THIS) PROJECT GUTENBERG")


def _jsonl(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _book_docs(text: str, size: int = 4000) -> list[str]:
    start, end = _PG_START.search(text), _PG_END.search(text)
    text = text[start.end() if start else 0 : end.start() if end else len(text)]
    text = text.replace("\r\n", "\n").replace("\r", "\n").lstrip("\ufeff")
    docs, cur = [], ""
    for para in re.split(r"\n\s*\n", text):
        cur = f"{cur}\n\n{para}" if cur else para
        if len(cur) >= size:
            docs.append(cur.strip())
            cur = ""
    if len(cur.strip()) > 200:
        docs.append(cur.strip())
    return docs


def english_docs(root: Path = DEFAULT_CORPUS) -> list[str]:
    """Reviews, speeches and book sections of ``text_corpus`` (about 13 MB of text)."""
    tc = root / "text_corpus"
    docs = [d["text"] for d in _jsonl(tc / "movie_reviews/movie_reviews.jsonl.gz")]
    for name in ("inaugural", "state_union"):
        docs += [d["text"] for d in _jsonl(tc / f"speeches/{name}.jsonl.gz")]
    for book in sorted((tc / "gutenberg").glob("*.txt.gz")):
        with gzip.open(book, "rb") as f:
            docs += _book_docs(f.read().decode("utf-8", errors="replace"))
    return docs


def japanese_docs(root: Path = DEFAULT_CORPUS) -> list[str]:
    """JaQuAD Wikipedia paragraphs joined per article."""
    articles: dict[str, list[str]] = {}
    for d in _jsonl(root / "japanese/wiki_paragraphs/jaquad_train_contexts.jsonl.gz"):
        articles.setdefault(d["title"], []).append(d["text"])
    return ["\n".join(p) for p in articles.values()]


def bulk_array(docs: list[str], target_bytes: int) -> pa.LargeStringArray:
    """A large_string array of about ``target_bytes`` by repeating ``docs`` (buffer tiling)."""
    base = pa.array(docs, pa.large_string())
    offsets = np.frombuffer(base.buffers()[1], np.int64)[: len(base) + 1]
    data = np.frombuffer(base.buffers()[2], np.uint8)[: offsets[-1]]
    reps = max(1, -(-target_bytes // len(data)))
    big = np.empty(len(data) * reps, np.uint8)
    for r in range(reps):
        big[r * len(data) : (r + 1) * len(data)] = data
    offs = (offsets[:-1][None, :] + (np.arange(reps, dtype=np.int64) * len(data))[:, None]).ravel()
    offs = np.append(offs, len(big))
    return pa.LargeStringArray.from_buffers(len(offs) - 1, pa.py_buffer(offs), pa.py_buffer(big))


def near_duplicate(text: str, rate: float, rng: random.Random, japanese: bool = False) -> str:
    """Copy of ``text`` with about ``rate`` of its units edited (deleted, replaced, inserted).

    Units are whitespace words, or characters for Japanese. Edits draw replacement units from
    the document itself, like a template or a re-crawl with changed fragments.
    """
    units = list(text) if japanese else text.split(" ")
    out: list[str] = []
    for u in units:
        r = rng.random()
        if r < rate / 3:
            continue
        out.append(rng.choice(units) if r < 2 * rate / 3 else u)
        if rng.random() < rate / 3:
            out.append(rng.choice(units))
    return ("" if japanese else " ").join(out)
