"""Training and evaluation data of pipelines/ja_edu.yaml, from the files it ships with
(data/recipes/ja_edu/, README.md there) or your own of the same form.

    python pipelines/ja_edu_data.py --output runs/ja-edu/data

Swallow corpus v2's Wikipedia-based "edu" classifier takes Japanese Wikipedia as the good class
and random Japanese web text as the other. Here: positive.jsonl.gz = the Wikipedia paragraphs;
negative.jsonl.gz = half of the mC4-ja snippets, their labels dropped (random web text);
labelled.jsonl.gz = the other half with their good/bad labels, for `curate classifier eval` and
as the documents the pipeline selects from. A snippet goes to one half by the hash of its text,
so a text that occurs twice never sits on both sides.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

import xxhash

DATA = Path(__file__).resolve().parents[1] / "data" / "recipes" / "ja_edu"


def _read(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _write(path: Path, records: list[dict]) -> None:
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        for record in records:
            f.write((json.dumps(record, ensure_ascii=False) + "\n").encode())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wikipedia", type=Path, default=DATA / "wikipedia.jsonl.gz")
    ap.add_argument("--web", type=Path, default=DATA / "mc4_ja.jsonl.gz",
                    help="JSONL of web snippets with a 'label' of good or bad")
    ap.add_argument("--output", type=Path, required=True)
    args = ap.parse_args()
    args.output.mkdir(parents=True, exist_ok=True)
    web = _read(args.web)
    held_out = [xxhash.xxh3_64_intdigest(d["text"].encode()) % 2 == 1 for d in web]
    _write(args.output / "positive.jsonl.gz",
           [{"id": d["id"], "text": d["text"]} for d in _read(args.wikipedia)])
    _write(args.output / "negative.jsonl.gz",
           [{"id": d["id"], "text": d["text"]} for d, h in zip(web, held_out, strict=True)
            if not h])
    _write(args.output / "labelled.jsonl.gz",
           [d for d, h in zip(web, held_out, strict=True) if h])
    print(f"wrote {args.output}/positive.jsonl.gz, negative.jsonl.gz "
          f"({held_out.count(False)} web snippets) and labelled.jsonl.gz "
          f"({held_out.count(True)} held out)")


if __name__ == "__main__":
    main()
