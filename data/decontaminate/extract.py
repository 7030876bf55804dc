"""How the files here were cut from the team's evaluation corpus (../shared/corpus); see README.md.

Only sets whose licence allows redistribution are copied, each with its licence file. Run from
the repository root: ``python data/decontaminate/extract.py /path/to/corpus``.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).parent
COPIES = {  # byte copies, as the publishers ship them
    "benchmarks/gsm8k/test.jsonl.gz": "gsm8k/test.jsonl.gz",
    "benchmarks/humaneval/HumanEval.jsonl.gz": "humaneval/HumanEval.jsonl.gz",
    "benchmarks/truthfulqa/TruthfulQA.csv.gz": "truthfulqa/TruthfulQA.csv.gz",
    "benchmarks/llm_foundry_gauntlet/winogrande.jsonl.gz": "llm_foundry/winogrande.jsonl.gz",
    "benchmarks/llm_foundry_gauntlet/arc_challenge.jsonl.gz": "llm_foundry/arc_challenge.jsonl.gz",
    "japanese/benchmarks/jglue/jcommonsenseqa-v1.3/test-v1.3.json.gz":
        "jglue/jcommonsenseqa-v1.3/test-v1.3.json.gz",
    "japanese/benchmarks/jglue/jsquad-v1.3/test-v1.3.json.gz":
        "jglue/jsquad-v1.3/test-v1.3.json.gz",
    "japanese/benchmarks/jglue/jnli-v1.3/test-v1.3.json.gz": "jglue/jnli-v1.3/test-v1.3.json.gz",
    "japanese/benchmarks/jemhopqa/dev_ver1.2.json.gz": "jemhopqa/dev_ver1.2.json.gz",
    "japanese/benchmarks/niilc-qa/NIILC-ECQA2015_test.xml.gz": "niilc/NIILC-ECQA2015_test.xml.gz",
    "japanese/wiki_paragraphs/overlap_jsquad_test_vs_jaquad_train.tsv":
        "overlap_jsquad_test_vs_jaquad_train.tsv",
}
LICENCES = {  # the licence text each set is redistributed under, beside it
    "benchmarks/gsm8k/LICENSE": "gsm8k/LICENSE",
    "benchmarks/humaneval/LICENSE": "humaneval/LICENSE",
    "benchmarks/llm_foundry_gauntlet/LICENSE": "llm_foundry/LICENSE",  # Apache-2.0
    "japanese/benchmarks/jglue/LICENSE": "jglue/LICENSE",
    "japanese/benchmarks/jemhopqa/LICENSE": "jemhopqa/LICENSE",
    "japanese/benchmarks/niilc-qa/LICENSE.txt": "niilc/LICENSE.txt",
    "japanese/benchmarks/jmmlu/JMMLU/LICENSE": "jmmlu/LICENSE",
    "japanese/wiki_paragraphs/LICENSE-JaQuAD": "hosts/LICENSE-JaQuAD",
}
# TruthfulQA is Apache-2.0 (the corpus copied no licence file with it): the same licence text.
APACHE_COPIES = ["truthfulqa/LICENSE"]
MMLU_LICENSE = """MIT License

Copyright (c) 2020 Dan Hendrycks

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
"""  # hendrycks/test @ 0aff6000, LICENSE
# Not japanese_history or world_history: STEP Corporation holds their copyright and forbids
# commercial use other than language-model research and evaluation (JMMLU README).
JMMLU = ("anatomy", "prehistory", "high_school_european_history", "high_school_geography")
MMLU_SUBJECTS = {"high_school_us_history", "high_school_government_and_politics",
                 "miscellaneous", "abstract_algebra"}
HEAD_LINES = {"benchmarks/llm_foundry_gauntlet/lambada_openai.jsonl.gz":
              "llm_foundry/lambada_openai.jsonl.gz"}
# Public-domain novels of the corpus's Project Gutenberg set (text_corpus/gutenberg/MANIFEST.csv),
# the English hosts: (file, title, author). Jane Eyre is left out (MMLU quotes it).
BOOKS = [("105.txt", "Persuasion", "Jane Austen"),
         ("1342-0.txt", "Pride and Prejudice", "Jane Austen"),
         ("244-0.txt", "A Study in Scarlet", "Arthur Conan Doyle"),
         ("pg2097.txt", "The Sign of the Four", "Arthur Conan Doyle"),
         ("pg174.txt", "The Picture of Dorian Gray", "Oscar Wilde"),
         ("pg345.txt", "Dracula", "Bram Stoker"),
         ("pg42.txt", "The Strange Case of Dr Jekyll and Mr Hyde", "Robert Louis Stevenson"),
         ("pg730.txt", "Oliver Twist", "Charles Dickens"),
         ("pg768.txt", "Wuthering Heights", "Emily Bronte")]
PASSAGES_PER_BOOK = 20
PASSAGE_CHARS = 2000  # a passage: whole paragraphs, at least this many characters


def _read_gz(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes())


def _write_gz(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write(data)


def _jsonl(records: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()


def book_passages(raw: bytes) -> list[str]:
    """The book's body (between Project Gutenberg's START and END lines, so without its licence
    header and footer), paragraphs unwrapped and joined with newlines, in passages of whole
    paragraphs of at least PASSAGE_CHARS characters."""
    text = raw.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
    start = re.search(r"^\*\*\* ?START OF.*$", text, re.M)
    end = re.search(r"^\*\*\* ?END OF.*$", text, re.M)
    body = text[start.end():end.start()]
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", body)]
    passages, current = [], []
    for paragraph in filter(None, paragraphs):
        current.append(paragraph)
        if sum(len(p) + 1 for p in current) > PASSAGE_CHARS:
            passages.append("\n".join(current))
            current = []
    return passages


def english_hosts(corpus: Path) -> list[dict]:
    """PASSAGES_PER_BOOK passages of each book, evenly spaced, skipping the first two (title
    pages and contents)."""
    hosts = []
    for name, title, author in BOOKS:
        passages = book_passages(_read_gz(corpus / "text_corpus/gutenberg" / f"{name}.gz"))[2:]
        step = len(passages) // PASSAGES_PER_BOOK
        for k in range(PASSAGES_PER_BOOK):
            hosts.append({"id": f"gutenberg/{Path(name).stem}/{k * step}", "title": title,
                          "author": author, "text": passages[k * step]})
    return hosts


def main(corpus: Path) -> None:
    for source, target in {**COPIES, **LICENCES}.items():
        (HERE / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(corpus / source, HERE / target)
    for target in APACHE_COPIES:
        (HERE / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(corpus / "benchmarks/llm_foundry_gauntlet/LICENSE", HERE / target)
    (HERE / "mmlu").mkdir(exist_ok=True)
    (HERE / "mmlu/LICENSE").write_text(MMLU_LICENSE, encoding="utf-8")
    for name in JMMLU:
        (HERE / "jmmlu").mkdir(exist_ok=True)
        shutil.copyfile(corpus / f"japanese/benchmarks/jmmlu/JMMLU/{name}.csv.gz",
                        HERE / f"jmmlu/{name}.csv.gz")
    for source, target in HEAD_LINES.items():  # the first 1000 lines
        lines = _read_gz(corpus / source).split(b"\n")[:1000]
        _write_gz(HERE / target, b"\n".join(lines) + b"\n")
    text = _read_gz(corpus / "benchmarks/mmlu/mmlu_test.csv.gz").decode()
    rows = list(csv.reader(io.StringIO(text, newline="")))
    out = io.StringIO(newline="")
    csv.writer(out, lineterminator="\r\n").writerows(
        [rows[0]] + [r for r in rows[1:] if r[0] in MMLU_SUBJECTS])
    _write_gz(HERE / "mmlu/mmlu_test.csv.gz", out.getvalue().encode())
    _write_gz(HERE / "hosts/books_en.jsonl.gz", _jsonl(english_hosts(corpus)))
    paragraphs = [json.loads(line) for line in _read_gz(
        corpus / "japanese/wiki_paragraphs/jaquad_train_contexts.jsonl.gz").splitlines()]
    keep = [p for i, p in enumerate(paragraphs) if p["id"].startswith("tr-227-") or i % 10 == 0]
    _write_gz(HERE / "hosts/wiki_ja.jsonl.gz", _jsonl(
        [{"id": p["id"], "title": p["title"], "text": p["text"]} for p in keep]))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
