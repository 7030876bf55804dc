"""Real documents for the heuristic-filter benchmark and tests (from ../shared/corpus)."""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

CORPUS = Path(os.environ.get("CURATOR_CORPUS",
                           Path(__file__).resolve().parents[2] / "shared" / "corpus"))


def _jsonl(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def english_documents(limit_books: int | None = None) -> list[dict]:
    """Speeches (124), movie reviews (2000), web-article main texts (181) and Gutenberg books cut
    into documents of 40 paragraphs (their licence headers and footers included)."""
    text = CORPUS / "text_corpus"
    docs = [{"id": d["id"], "text": d["text"]} for name in ("inaugural", "state_union")
            for d in _jsonl(text / "speeches" / f"{name}.jsonl.gz")]
    docs += [{"id": d["id"], "text": d["text"]}
             for d in _jsonl(text / "movie_reviews" / "movie_reviews.jsonl.gz")]
    truth = json.loads((CORPUS / "article_extraction_benchmark" / "ground-truth.json").read_text())
    docs += [{"id": f"article/{k}", "text": v["articleBody"]} for k, v in sorted(truth.items())]
    books = sorted((text / "gutenberg").glob("*.txt.gz"))[:limit_books]
    for book in books:
        with gzip.open(book, "rb") as f:
            raw = f.read().decode("utf-8-sig", errors="replace")
        paragraphs = re.split(r"(?:\r?\n|\r){2,}", raw.replace("\r\n", "\n"))
        for k in range(0, len(paragraphs), 40):
            docs.append({"id": f"gutenberg/{book.stem}#{k // 40}",
                         "text": "\n\n".join(paragraphs[k:k + 40])})
    return docs


def japanese_clean() -> list[dict]:
    """Clean Japanese prose: Wikipedia articles (JaQuAD paragraphs joined per title) and Aozora
    works."""
    ja = CORPUS / "japanese"
    articles: dict[str, list[str]] = {}
    for d in _jsonl(ja / "wiki_paragraphs" / "jaquad_train_contexts.jsonl.gz"):
        articles.setdefault(d["title"], []).append(d["text"])
    # one document per article: its paragraphs, one per line
    docs = [{"id": f"wiki/{title}", "text": "\n".join(paras), "lang": "ja"}
            for title, paras in articles.items()]
    aozora = sorted((ja / "aozora").glob("*.jsonl.gz"))
    for path in aozora:
        # Aozora files keep CRLF line ends: normalised to LF as a reader/cleaner would
        docs += [{"id": f"aozora/{d.get('id', i)}", "text": d["text"].replace("\r\n", "\n"),
                  "lang": "ja"}
                 for i, d in enumerate(_jsonl(path))]
    return docs


def mc4_labelled() -> list[dict]:
    """mC4-ja snippets with good/bad labels (one annotator)."""
    path = CORPUS / "japanese" / "mc4_quality_labels" / "annotations.txt.gz"
    docs = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            text, _, label = line.rstrip("\n").rpartition("\t")
            if label in ("good", "bad"):
                docs.append({"id": f"mc4/{i}", "text": text, "lang": "ja", "label": label})
    return docs
