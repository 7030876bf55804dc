"""Rebuild tokenize_en.jsonl.gz, tokenize_ja.jsonl.gz and langid/sentences.jsonl here from the
team's evaluation corpus (a local collection of public data; its upstream sources are named in
README.md here). Only text whose licence allows redistribution is used: public domain, CC BY 4.0
and CC BY-SA 3.0. The same corpus gives the same bytes.

Run from the repository root: ``python tests/data/make_data.py /path/to/corpus``.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import sys
from pathlib import Path

HERE = Path(__file__).parent
# The Aozora Bunko works of tokenize_ja.jsonl.gz (public domain; ids of the corpus's
# japanese/aozora/aozora_works.jsonl.gz).
AOZORA = ["000025/207_ruby", "000074/418_ruby_922", "000083/60741_ruby_76742",
          "000129/693_ruby_333", "000154/53862_ruby_47124", "000182/3503_ruby_12195",
          "000311/7922_ruby_33860", "001095/45838_ruby_34607", "001566/58037_txt_69942"]
# Language-ID sentences: the label, and the file of the corpus's UDHR collection
# (lingua_langid/udhr2/udhr2.jsonl.gz, from nltk_data's udhr2), for the 24 languages besides en
# and ja.
UDHR = {"de": "deu", "fr": "fra", "es": "spa", "it": "ita", "pt": "por_PT", "nl": "nld",
        "ru": "rus", "uk": "ukr", "pl": "pol", "cs": "ces", "sv": "swe", "fi": "fin",
        "hu": "hun", "tr": "tur", "ar": "arb", "fa": "pes_1", "he": "heb", "hi": "hin",
        "ko": "kor", "zh": "cmn_hans", "vi": "vie", "th": "tha", "el": "ell_monotonic",
        "id": "ind"}
PER_LANGUAGE = 40
LEAD_CHARS = 150  # the longest Wikipedia lead in tokenize_ja.jsonl.gz, in characters
EN_JA = 100
# English sentences: public-domain books and speeches of the corpus (text_corpus/).
BOOKS = ["105.txt", "1342-0.txt", "244-0.txt", "pg174.txt", "pg345.txt", "pg730.txt"]


def _jsonl_gz(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _write_gz(path: Path, records: list[dict]) -> None:
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write(data)


def ja_sentences(text: str) -> list[str]:
    """Sentences of Japanese prose: cut after each 。."""
    return [s.strip() for s in re.split(r"(?<=。)", text.replace("\n", "")) if s.strip()]


def en_sentences(text: str) -> list[str]:
    """Sentences of English prose: lines unwrapped, cut after . ! ? before a capital."""
    flat = " ".join(text.split())
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", flat) if s.strip()]


def tokenize_en(corpus: Path) -> list[dict]:
    """Every 16th movie review (Pang & Lee, CC BY 4.0) and every 6th inaugural address (public
    domain)."""
    reviews = _jsonl_gz(corpus / "text_corpus/movie_reviews/movie_reviews.jsonl.gz")
    speeches = _jsonl_gz(corpus / "text_corpus/speeches/inaugural.jsonl.gz")
    return ([{"id": f"movie_reviews/{d['id']}", "source": "movie_reviews", "text": d["text"]}
             for d in reviews[::16]]
            + [{"id": d["id"], "source": "inaugural", "text": d["text"]} for d in speeches[::6]])


def wikipedia_leads(corpus: Path, most: int = LEAD_CHARS) -> list[dict]:
    """The lead of each Japanese Wikipedia article of JaQuAD's train contexts (CC BY-SA 3.0),
    one sentence a line: short multi-sentence text. The first three sentences of the article's
    first paragraph, or its first two where three have more than ``most`` characters; an
    article whose first paragraph has one sentence, or whose first two have more than ``most``
    characters, gives none."""
    first: dict[str, dict] = {}
    for row in _jsonl_gz(corpus / "japanese/wiki_paragraphs/jaquad_train_contexts.jsonl.gz"):
        first.setdefault(row["title"], row)
    leads = []
    for title, row in first.items():
        lead = ja_sentences(row["text"])[:3]
        if len(lead) == 3 and sum(map(len, lead)) > most:
            lead = lead[:2]
        if len(lead) >= 2 and sum(map(len, lead)) <= most:
            leads.append({"id": f"jawiki/{row['id'].rsplit('-', 1)[0]}", "source": "jawiki",
                          "title": title, "text": "\n".join(lead)})
    return leads


def tokenize_ja(corpus: Path) -> list[dict]:
    works = {d["id"]: d for d in _jsonl_gz(corpus / "japanese/aozora/aozora_works.jsonl.gz")}
    return wikipedia_leads(corpus) + [
        {"id": f"aozora/{key}", "source": "aozora", "text": works[key]["text"]}
        for key in AOZORA]


def langid_sentences(corpus: Path) -> list[dict]:
    """en: 100 sentences of public-domain novels and State of the Union addresses; ja: 100
    sentences of Japanese Wikipedia (JaQuAD); the others: 40 lines each of the Universal
    Declaration of Human Rights (public domain). A fixed seed per language."""
    rows = []
    english = []
    for name in BOOKS:
        raw = gzip.decompress((corpus / "text_corpus/gutenberg" / f"{name}.gz").read_bytes())
        text = raw.decode("utf-8-sig")
        body = text[text.index("*** START OF"):text.index("*** END OF")].split("\n", 1)[1]
        english += [(f"gutenberg/{Path(name).stem}", s) for s in en_sentences(body)]
    for speech in _jsonl_gz(corpus / "text_corpus/speeches/state_union.jsonl.gz"):
        english += [(speech["id"], s) for s in en_sentences(speech["text"])]
    english = [(src, s) for src, s in english
               if 40 <= len(s) <= 250 and s.count('"') % 2 == 0 and "_" not in s]
    japanese = [(f"jawiki/{p['id']}", s)
                for p in _jsonl_gz(corpus / "japanese/wiki_paragraphs/jaquad_train_contexts"
                                            ".jsonl.gz")
                for s in ja_sentences(p["text"]) if 20 <= len(s) <= 150]
    for lang, pool in (("en", english), ("ja", japanese)):
        picked = random.Random(f"langid-{lang}").sample(pool, EN_JA)
        rows += [{"id": f"{lang}-{i}", "lang": lang, "source": src, "text": text}
                 for i, (src, text) in enumerate(picked)]
    udhr = {d["code"]: d["text"] for d in _jsonl_gz(corpus / "lingua_langid/udhr2/udhr2.jsonl.gz")}
    for lang, code in UDHR.items():
        least = 15 if lang in ("zh", "ko", "th") else 40
        lines = sorted({line.strip() for line in udhr[code].splitlines()
                        if least <= len(line.strip()) <= 400})
        picked = random.Random(f"langid-{lang}").sample(lines, PER_LANGUAGE)
        rows += [{"id": f"{lang}-{i}", "lang": lang, "source": f"udhr/{code}", "text": text}
                 for i, text in enumerate(picked)]
    return rows


def main(corpus: Path) -> None:
    _write_gz(HERE / "tokenize_en.jsonl.gz", tokenize_en(corpus))
    _write_gz(HERE / "tokenize_ja.jsonl.gz", tokenize_ja(corpus))
    (HERE / "langid" / "sentences.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in langid_sentences(corpus)),
        encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
