"""Decontamination speed and recall: curator's ``decontaminate`` vs datatrove's n-gram filter.

  PYTHONPATH=. python benchmarks/bench_decontaminate.py [--plant-rate 0.02] [--rounds 2]

Documents: real English text of ../shared/corpus (``dedup_data.english_docs``: movie reviews,
speeches, Project Gutenberg book sections), with benchmark items planted mid-paragraph into a
share of them (verbatim, re-cased, re-spaced, re-wrapped, full-width; the test suite's variants).
Tasks: 13 English benchmarks (GSM8K, MMLU, HumanEval, TruthfulQA, PIQA, Winogrande, ARC easy +
challenge, TriviaQA, LAMBADA, BoolQ, SIQA, OpenBookQA, CommonsenseQA) as the corpus ships them.

Both sides index the same texts with 13-grams: curator through ``Pipeline([ReadJsonl,
Decontaminate, WriteJsonl]).run(executor="local")``; datatrove 0.10.1 through its
``NGramsDecontFilter`` in a ``LocalPipelineExecutor`` (one worker: per core). Its indexer only
reads lighteval tasks, so the index files are written here with its own ``compute_hashes``
steps (``simplify_text``, its spaCy English word tokenizer, ``ngrams``, its xxhash64) over our
task texts. Recall: planted documents flagged (datatrove drops them; curator cuts or drops).
Appends to ``benchmarks/results_decontaminate.md`` (``--out``) through ``harness.record``.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import gzip
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import harness
import numpy as np
import psutil
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))

from dedup_data import DEFAULT_CORPUS, english_docs, japanese_docs

from tests.stages.decontaminate_reference import VARIANTS, plant, variant

GAUNTLET = DEFAULT_CORPUS / "benchmarks/llm_foundry_gauntlet"
TASKS = [
    {"name": "gsm8k", "path": str(DEFAULT_CORPUS / "benchmarks/gsm8k/test.jsonl.gz")},
    {"name": "mmlu", "path": str(DEFAULT_CORPUS / "benchmarks/mmlu/mmlu_test.csv.gz")},
    {"name": "humaneval", "path": str(DEFAULT_CORPUS / "benchmarks/humaneval/HumanEval.jsonl.gz")},
    {"name": "truthfulqa", "path": str(DEFAULT_CORPUS / "benchmarks/truthfulqa/TruthfulQA.csv.gz")},
    {"name": "piqa", "path": str(GAUNTLET / "piqa.jsonl.gz")},
    {"name": "winogrande", "path": str(GAUNTLET / "winogrande.jsonl.gz")},
    {"name": "arc", "path": [str(GAUNTLET / "arc_easy.jsonl.gz"),
                             str(GAUNTLET / "arc_challenge.jsonl.gz")]},
    {"name": "triviaqa", "path": str(GAUNTLET / "triviaqa_sm_sub.jsonl.gz")},
    {"name": "lambada", "path": str(GAUNTLET / "lambada_openai.jsonl.gz")},
    *({"name": name, "path": str(GAUNTLET / f"{name}.jsonl.gz"), "fields": ["query", "choices"]}
      for name in ("boolq", "siqa", "openbook_qa", "commonsense_qa")),
]
JAPANESE = DEFAULT_CORPUS / "japanese/benchmarks"
JA_TASKS = [
    {"name": "jcommonsenseqa", "path": str(JAPANESE / "jglue/jcommonsenseqa-v1.3/*.json.gz")},
    {"name": "jsquad", "path": str(JAPANESE / "jglue/jsquad-v1.3/*.json.gz")},
    {"name": "jnli", "path": str(JAPANESE / "jglue/jnli-v1.3/*.json.gz")},
    {"name": "jemhopqa", "path": str(JAPANESE / "jemhopqa/dev_ver1.2.json.gz")},
    {"name": "niilc", "path": str(JAPANESE / "niilc-qa/*.xml.gz")},
    {"name": "jmmlu", "path": str(JAPANESE / "jmmlu/*/*.csv.gz")},
]
RESULTS = Path(__file__).parent / "results_decontaminate.md"
ROOT = Path(__file__).parents[1]


def task_texts() -> dict[str, list[tuple[str, list[str]]]]:
    """Each task's items (id, texts and answers), read by curator's task readers."""
    from curator.stages.decontaminate import Task
    from curator.stages.decontaminate.tasks import task_items

    out = {}
    for config in TASKS:
        task = Task(**config)
        out[task.name] = [(item.id, item.texts + item.answers) for path in task.paths()
                          for item in task_items(task, Path(path), path)]
    return out


def corpus(texts: dict, rate: float, seed: int) -> tuple[list[dict], dict[str, str]]:
    """Real documents; ``rate`` of them get one planted item (joined text of 20+ words) in
    one of the variants (returned by document id)."""
    rng = random.Random(seed)
    docs = [{"id": f"doc-{i:06d}", "text": t} for i, t in enumerate(english_docs())]
    candidates = [(name, texts_[-1]) for name, items in texts.items() for _, texts_ in items
                  if len(texts_[-1].split()) >= 20]
    planted = {}
    for k, doc in enumerate(rng.sample(docs, int(rate * len(docs)))):
        _, text = rng.choice(candidates)
        kind = VARIANTS[k % len(VARIANTS)]
        doc["text"], _ = plant(doc["text"], variant(text, kind, False, rng), rng, False)
        planted[doc["id"]] = kind
    return docs, planted


def write_shards(docs: list[dict], folder: Path, shards: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for s in range(shards):
        with open(folder / f"shard-{s:03d}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in docs[s::shards])


def cpu_seconds() -> float:
    me = psutil.Process()
    times = me.cpu_times()
    children = sum(c.cpu_times().user + c.cpu_times().system for c in me.children(True))
    return times.user + times.system + times.children_user + times.children_system + children


# ----------------------------------------------------------------------------- curator
def run_curator(src: Path, out: Path, tasks: list[dict]) -> dict:
    from curator import Pipeline, ReadJsonl, WriteJsonl
    from curator.stages.decontaminate import Decontaminate

    shutil.rmtree(out, ignore_errors=True)
    t0, c0 = time.perf_counter(), cpu_seconds()
    result = Pipeline([ReadJsonl(path=f"{src}/*.jsonl"), Decontaminate(tasks=tasks),
                       WriteJsonl()]).run(output=out, executor="local", progress=False)
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    stage = result.stats["stages"][1]
    facts = stage["decontamination"]
    flagged = set()
    for path in (out / "write_jsonl").glob("*.jsonl*"):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            flagged |= {d["id"] for d in map(json.loads, f) if d.get("contamination")}
    rejected = out / "rejected" / "decontaminate"
    if rejected.exists():
        flagged |= set(pq.read_table(rejected, columns=["id"]).column("id").to_pylist())
    return {"wall": wall, "cpu": cpu, "index_seconds": facts["index"]["seconds"],
            "index_bytes": facts["index"]["bytes"], "entries": facts["index"]["entries"],
            "docs": stage["in"], "flagged": flagged}


def _settled_rss() -> int:
    """Resident bytes once freed temporaries are handed back to the system."""
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return psutil.Process().memory_info().rss


def curator_index_rss(folder: str) -> int:
    """Resident bytes added by loading the index (arrays, bitmaps and radix directories)."""
    from curator.stages.decontaminate.index import load_index

    before = _settled_rss()
    loaded = load_index(folder)
    for array in (loaded.index.long_keys, loaded.index.short_suffix, loaded.index.short_full,
                  loaded.index.short_len, loaded.index.entry_item):
        array.sum()  # touch every page
    return _settled_rss() - before


def index_rss(tool: str, folder: Path) -> int:
    """Index memory measured in a fresh process (its imports done first)."""
    out = subprocess.run([sys.executable, __file__, "--rss", tool, str(folder)], check=True,
                         capture_output=True, text=True, env={**os.environ,
                                                              "PYTHONPATH": str(ROOT)})
    return int(out.stdout.split()[-1])


# ----------------------------------------------------------------------------- datatrove
def _patch_datatrove_xxhash() -> None:
    """datatrove 0.10 passes ``str`` to ``xxh64_intdigest``, which xxhash 3.6 refuses: encode
    first (what older xxhash did itself)."""
    import xxhash
    from datatrove.utils.hashes import xxhash as dt_xxhash

    def xxhash64(data: str | bytes) -> int:
        return xxhash.xxh64_intdigest(data.encode() if isinstance(data, str) else data)

    dt_xxhash.xxhash64 = xxhash64


def datatrove_config():
    from datatrove.pipeline.decont.n_grams import NGramsDecontConfig

    return NGramsDecontConfig(n_grams=13, find_query_ngrams=True)


def build_datatrove_index(texts: dict, folder: Path) -> float:
    """``NGramsDecontIndexer.compute_hashes(label)`` for every text, saved as its index files."""
    from datatrove.utils.hashing import create_hash_func
    from datatrove.utils.text import ngrams, simplify_text
    from datatrove.utils.word_tokenizers import load_word_tokenizer

    _patch_datatrove_xxhash()
    config = datatrove_config()
    tokenizer = load_word_tokenizer("en")
    hash_func = create_hash_func(config.hash_config)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    t0 = time.perf_counter()
    for name, items in texts.items():
        hashes = set()
        for _, item_texts in items:
            for text in item_texts:
                tokens = tokenizer.word_tokenize(simplify_text(text, config.norm_config))
                hashes.update(hash_func(" ".join(g)) for g in ngrams(tokens, config.n_grams))
        np.array(sorted(hashes), dtype=np.uint64).tofile(folder / f"{name}.index.hashes")
    return time.perf_counter() - t0


def run_datatrove(src: Path, index: Path, out: Path) -> dict:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.decont.n_grams import NGramsDecontFilter
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers.jsonl import JsonlWriter

    _patch_datatrove_xxhash()
    shutil.rmtree(out, ignore_errors=True)
    shards = len(list(src.glob("*.jsonl")))
    t0, c0 = time.perf_counter(), cpu_seconds()
    LocalPipelineExecutor(pipeline=[
        JsonlReader(str(src)),
        NGramsDecontFilter(str(index), config=datatrove_config(),
                           exclusion_writer=JsonlWriter(str(out / "removed"))),
        JsonlWriter(str(out / "output"))],
        tasks=shards, workers=1, logging_dir=str(out / "logs")).run()
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    flagged = set()
    for path in (out / "removed").glob("*.jsonl.gz"):
        with gzip.open(path, "rt") as f:
            flagged |= {json.loads(line)["id"] for line in f}
    return {"wall": wall, "cpu": cpu, "flagged": flagged}


def datatrove_index_rss(folder: str) -> int:
    """Resident bytes added by ``load_index_hashes`` (a dict of hash → task)."""
    from datatrove.pipeline.decont.n_grams import NGramsDecontFilter

    step = NGramsDecontFilter(folder, config=datatrove_config())
    before = _settled_rss()
    step.load_index_hashes()
    return _settled_rss() - before


def datatrove_keys(folder: Path) -> int:
    return len(np.unique(np.concatenate([np.fromfile(p, np.uint64)
                                         for p in folder.glob("*.index.hashes")])))


# ----------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--plant-rate", type=float, default=0.02)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--work", type=Path, default=Path("bench-data/decontaminate"))
    parser.add_argument("--out", type=Path, default=RESULTS,
                        help="results file: this run's section is appended")
    parser.add_argument("--rss", nargs=2, metavar=("TOOL", "INDEX"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss:
        measure = curator_index_rss if args.rss[0] == "curator" else datatrove_index_rss
        print(measure(args.rss[1]))
        return
    work = args.work
    texts = task_texts()
    docs, planted = corpus(texts, args.plant_rate, seed=1)
    src = work / "src"
    shutil.rmtree(src, ignore_errors=True)
    write_shards(docs, src, args.shards)
    text_mb = sum(len(d["text"].encode()) for d in docs) / 1e6
    print(f"{len(docs)} documents, {text_mb:.1f} MB of text, {len(planted)} planted; "
          f"{sum(map(len, texts.values()))} items of {len(texts)} benchmarks", flush=True)
    dt_index_seconds = build_datatrove_index(texts, work / "dt-index")
    rows = []
    for r in range(args.rounds):
        ours = run_curator(src, work / "curator", TASKS)
        theirs = run_datatrove(src, work / "dt-index", work / "datatrove")
        rows.append((ours, theirs))
        print(f"round {r}: curator {ours['wall']:.1f} s (index {ours['index_seconds']:.1f} s), "
              f"datatrove {theirs['wall']:.1f} s", flush=True)
    ours_rss = index_rss("curator", work / "curator" / "_work" / "segment-01" / "index")
    dt_rss = index_rss("datatrove", work / "dt-index")
    dt_keys = datatrove_keys(work / "dt-index")
    ja_src = work / "src-ja"
    shutil.rmtree(ja_src, ignore_errors=True)
    ja_docs = [{"id": f"ja-{i:05d}", "text": t} for i, t in enumerate(japanese_docs())]
    write_shards(ja_docs, ja_src, args.shards)
    japanese = run_curator(ja_src, work / "curator-ja", TASKS + JA_TASKS)
    japanese["mb"] = sum(len(d["text"].encode()) for d in ja_docs) / 1e6
    write_results(args, docs, planted, texts, text_mb, dt_index_seconds, rows, ours_rss, dt_rss,
                  dt_keys, japanese, ja_docs)


def _recall(flagged: set[str], planted: dict[str, str]) -> tuple[int, float]:
    hits = len(flagged & set(planted))
    return hits, hits / max(1, len(planted))


def write_results(args, docs, planted, texts, text_mb, dt_index_seconds, rows, ours_rss,
                  dt_rss, dt_keys, japanese, ja_docs) -> None:
    best_ours = min((o for o, _ in rows), key=lambda o: o["cpu"])
    best_dt = min((t for _, t in rows), key=lambda t: t["cpu"])
    n = len(docs)
    ours_pass = best_ours["cpu"] - best_ours["index_seconds"]
    lines = [
        "# Decontamination: curator `decontaminate` vs datatrove `NGramsDecontFilter`",
        "",
        f"Command: `PYTHONPATH=. .venv/bin/python benchmarks/bench_decontaminate.py "
        f"--plant-rate {args.plant_rate} --rounds {args.rounds}` "
        f"({time.strftime('%Y-%m-%d %H:%M')}).",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared), Python "
        f"{platform.python_version()}; datatrove 0.10.1 with spaCy "
        f"{__import__('spacy').__version__} (its English word tokenizer).",
        f"Documents: {n} real English documents ({text_mb:.1f} MB of text: movie reviews, "
        f"speeches, Project Gutenberg book sections), {len(planted)} of them with a planted "
        f"benchmark item (20+ words, mid-paragraph, verbatim / upper-cased / re-spaced and "
        f"re-punctuated / re-wrapped in 4-word lines / full-width, in turn), in "
        f"{args.shards} JSONL shards.",
        f"Tasks: {len(texts)} English benchmarks, {sum(map(len, texts.values()))} items: "
        f"{', '.join(texts)}. Both index every text of every item (prompt, answers, the "
        f"joined item) as word 13-grams; curator also uses prompts of 8-12 words whole.",
        "Both run on one core: curator `Pipeline([ReadJsonl, Decontaminate, WriteJsonl])"
        ".run(executor='local')`, datatrove `LocalPipelineExecutor(workers=1)` with "
        "`JsonlReader → NGramsDecontFilter → JsonlWriter`. Best of "
        f"{args.rounds} rounds by CPU time.",
        "",
        "| | curator | datatrove |",
        "|---|---|---|",
        f"| index build, s | {best_ours['index_seconds']:.1f} (in the run) | "
        f"{dt_index_seconds:.1f} (separate step) |",
        f"| run wall, s | {best_ours['wall']:.1f} | {best_dt['wall']:.1f} |",
        f"| run CPU, s | {best_ours['cpu']:.1f} | {best_dt['cpu']:.1f} |",
        f"| documents/s per core, whole run (curator incl. its index build) | "
        f"{n / best_ours['cpu']:,.0f} | {n / best_dt['cpu']:,.0f} |",
        f"| documents/s per core, matching pass (index build excluded) | "
        f"{n / ours_pass:,.0f} | {n / best_dt['cpu']:,.0f} |",
        f"| index entries | {best_ours['entries']:,} | {dt_keys:,} |",
        f"| index memory (resident, loaded in a fresh process) | {ours_rss / 2**20:.1f} MiB "
        f"({best_ours['index_bytes'] / 2**20:.1f} MiB of `.npy` key arrays, plus bitmaps and "
        f"radix directories) | "
        f"{dt_rss / 2**20:.1f} MiB (a dict hash → task) |",
        f"| planted documents flagged (recall) | {_fmt(best_ours['flagged'], planted)} | "
        f"{_fmt(best_dt['flagged'], planted)} |",
        f"| other documents flagged (natural matches; both flag the same: "
        f"{len((best_ours['flagged'] & best_dt['flagged']) - set(planted))}) | "
        f"{len(best_ours['flagged'] - set(planted))} | "
        f"{len(best_dt['flagged'] - set(planted))} |",
        "",
        f"- Speed-up per core: **{best_dt['cpu'] / best_ours['cpu']:.1f}x** whole run "
        f"(curator's index build included), **{best_dt['cpu'] / ours_pass:.1f}x** matching "
        f"pass; index memory {dt_rss / max(ours_rss, 1):.1f}x smaller.",
        "- CPU s of every round: curator " +
        ", ".join(f"{o['cpu']:.1f}" for o, _ in rows) + "; datatrove " +
        ", ".join(f"{t['cpu']:.1f}" for _, t in rows) + ".",
        "- Recall by variant (curator / datatrove): " + _by_variant(rows, planted) + ".",
        f"- First (cold) round alone: curator {rows[0][0]['cpu']:.1f} CPU s (numba's cache "
        f"loaded, Unicode tables built), datatrove {rows[0][1]['cpu']:.1f}: "
        f"{rows[0][1]['cpu'] / rows[0][0]['cpu']:.1f}x.",
        f"- Japanese, curator alone (datatrove's Japanese tokenizer needs SudachiPy): "
        f"{japanese['docs']} Wikipedia articles ({japanese['mb']:.1f} MB), index of the 13 + 6 "
        f"Japanese benchmarks ({japanese['entries']:,} entries, built in "
        f"{japanese['index_seconds']:.1f} s), character 50-grams: "
        f"{japanese['docs'] / japanese['cpu']:,.0f} documents/s per core whole run, "
        f"{japanese['mb'] / (japanese['cpu'] - japanese['index_seconds']):.1f} MB/s per core "
        f"matching pass; {len(japanese['flagged'])} documents flagged, by the first words of "
        f"their matches: {'; '.join(_first_match(args.work / 'curator-ja', ja_docs))}.",
    ]
    harness.record(args.out, "\n".join(lines))
    print("\n".join(lines))


def _first_match(run: Path, docs: list[dict]) -> list[str]:
    """``task: matched text`` of the first span of each flagged document."""
    text = {d["id"]: d["text"] for d in docs}
    out = []
    for path in sorted((run / "write_jsonl").glob("*.jsonl*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            for doc in map(json.loads, f):
                if doc.get("contamination"):
                    span = doc["contamination"][0]
                    out.append(f"{span['task']} {span['item']}: "
                               f"{text[doc['id']][span['start']:span['end']][:40]}…")
    return out


def _fmt(flagged: set[str], planted: dict[str, str]) -> str:
    hits, recall = _recall(flagged, planted)
    return f"{hits}/{len(planted)} ({recall:.1%})"


def _by_variant(rows, planted) -> str:
    ours, theirs = rows[0]
    out = []
    for kind in VARIANTS:
        subset = {d for d, k in planted.items() if k == kind}
        out.append(f"{kind} {len(subset & ours['flagged'])}/{len(subset)} / "
                   f"{len(subset & theirs['flagged'])}/{len(subset)}")
    return "; ".join(out)


if __name__ == "__main__":
    main()
