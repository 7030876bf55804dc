"""How the files here were cut from the evaluation corpus (../shared/corpus); see README.md.

Run from the repository root: ``python tests/data/decontaminate/extract.py /path/to/corpus``.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).parent
COPIES = {  # byte copies, as the publishers ship them
    "benchmarks/gsm8k/test.jsonl.gz": "gsm8k/test.jsonl.gz",
    "benchmarks/humaneval/HumanEval.jsonl.gz": "humaneval/HumanEval.jsonl.gz",
    "benchmarks/truthfulqa/TruthfulQA.csv.gz": "truthfulqa/TruthfulQA.csv.gz",
    "benchmarks/llm_foundry_gauntlet/piqa.jsonl.gz": "llm_foundry/piqa.jsonl.gz",
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
JMMLU = ("anatomy", "japanese_history", "world_history", "high_school_geography")
MMLU_SUBJECTS = {"high_school_us_history", "high_school_government_and_politics",
                 "miscellaneous", "abstract_algebra"}
HEAD_LINES = {"benchmarks/llm_foundry_gauntlet/triviaqa_sm_sub.jsonl.gz":
              "llm_foundry/triviaqa_sm_sub.jsonl.gz",
              "benchmarks/llm_foundry_gauntlet/lambada_openai.jsonl.gz":
              "llm_foundry/lambada_openai.jsonl.gz"}


def _read_gz(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes())


def _write_gz(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write(data)


def _jsonl(records: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()


def main(corpus: Path) -> None:
    for source, target in COPIES.items():
        (HERE / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(corpus / source, HERE / target)
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
    truth = json.loads((corpus / "article_extraction_benchmark/ground-truth.json").read_text())
    _write_gz(HERE / "hosts/articles_en.jsonl.gz", _jsonl(
        [{"id": f"zyte/{key}", "text": truth[key]["articleBody"]} for key in sorted(truth)]))
    paragraphs = [json.loads(line) for line in _read_gz(
        corpus / "japanese/wiki_paragraphs/jaquad_train_contexts.jsonl.gz").splitlines()]
    keep = [p for i, p in enumerate(paragraphs) if p["id"].startswith("tr-227-") or i % 10 == 0]
    _write_gz(HERE / "hosts/wiki_ja.jsonl.gz", _jsonl(
        [{"id": p["id"], "title": p["title"], "text": p["text"]} for p in keep]))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
