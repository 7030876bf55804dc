# ruff: noqa: RUF001  (Japanese examples are the point here)
"""Japanese decontamination of short texts: the whole-text minimum per task, its false positives
on clean Japanese text, and recall on real JCommonsenseQA, JSQuAD and JEMHopQA items planted
into real Japanese text.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_decontaminate_ja.py \\
        [--floors 4 5 6 7 8 9 10 12] [--out benchmarks/results_decontaminate_ja.md]

Clean text (``../shared/corpus/japanese``): every JaQuAD train paragraph outside the article
JSQuAD shares with it (``tr-227``, a known natural overlap), the 375 Aozora works, the 5,127
KWDLC web leads and the 1,676 mC4-ja snippets: 16,879 documents, each with ``lang: ja`` as the
pipelines' language ID gives it (so a page heavy in digits or Latin letters is still matched by
characters). Tasks: the six Japanese
benchmarks of the corpus, every split it holds (JCommonsenseQA, JSQuAD, JNLI valid + test,
JEMHopQA dev, NIILC dev + test, JMMLU all subjects).

1. False positives: the clean documents through ``read_jsonl → decontaminate →
   write_parquet`` for each ``floor_chars`` (the lowest whole-text minimum a task may have),
   and with the old fixed minimum (20 characters for every task); every flagged document is
   listed with what matched.
2. Recall: questions alone (without their choices or context) and whole items, verbatim,
   re-spaced, full-width (ASCII full-width, katakana half-width) or line-broken, each planted
   mid-paragraph into its own clean document; the planted documents are run with every clean
   document unplanted (the false positives at the defaults). Questions shorter than their
   task's minimum are planted too and reported apart: they are the ones counted as too short
   to check. The same plants through the old fixed minimum give the "before" column.

Without the corpus the script says it is skipped and exits 0.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))

import harness
import pyarrow.parquet as pq
from dedup_data import DEFAULT_CORPUS

from curator import Pipeline, ReadJsonl, WriteParquet
from curator.stages.decontaminate import Decontaminate
from tests.stages.decontaminate_reference import mostly_cjk, plant, units, variant

JA = DEFAULT_CORPUS / "japanese"
BENCH = JA / "benchmarks"
TASKS = [
    {"name": "jcommonsenseqa", "path": str(BENCH / "jglue/jcommonsenseqa-v1.3/*.json.gz")},
    {"name": "jsquad", "path": str(BENCH / "jglue/jsquad-v1.3/*.json.gz")},
    {"name": "jnli", "path": str(BENCH / "jglue/jnli-v1.3/*.json.gz")},
    {"name": "jemhopqa", "path": str(BENCH / "jemhopqa/dev_ver1.2.json.gz")},
    {"name": "niilc", "path": str(BENCH / "niilc-qa/*.xml.gz")},
    {"name": "jmmlu", "path": str(BENCH / "jmmlu/*/*.csv.gz")},
]
KINDS = ("verbatim", "spacing", "width", "rewrapped")
KIND_NAMES = {"verbatim": "verbatim", "spacing": "re-spaced", "width": "full-width",
              "rewrapped": "line-broken"}
OLD = {"min_chars": 20, "whole_percentile": None}  # one fixed minimum for every task
RESULTS = Path(__file__).parent / "results_decontaminate_ja.md"


def _jsonl(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def clean_documents() -> list[dict]:
    docs = [{"id": f"wiki/{d['id']}", "text": d["text"]}
            for d in _jsonl(JA / "wiki_paragraphs/jaquad_train_contexts.jsonl.gz")
            if not d["id"].startswith("tr-227-")]
    docs += [{"id": f"aozora/{d['id']}", "text": d["text"]}
             for d in _jsonl(JA / "aozora/aozora_works.jsonl.gz")]
    docs += [{"id": f"kwdlc/{d['doc_id']}", "text": d["text"]}
             for d in _jsonl(JA / "kwdlc/kwdlc_leads.jsonl.gz")]
    with gzip.open(JA / "mc4_quality_labels/annotations.txt.gz", "rt", encoding="utf-8") as f:
        docs += [{"id": f"mc4/{i}", "text": line.rstrip("\n").rpartition("\t")[0]}
                 for i, line in enumerate(f)]
    return [{**d, "lang": "ja"} for d in docs]  # as language ID labels them in a pipeline


def length(text: str) -> int:
    return len(units(text, True))


def plant_candidates() -> dict[str, dict[str, list[str]]]:
    """Per task: questions alone and whole items as a page would show them (test splits;
    JEMHopQA dev), read with json here."""
    jcqa = _jsonl(BENCH / "jglue/jcommonsenseqa-v1.3/test-v1.3.json.gz")
    with gzip.open(BENCH / "jglue/jsquad-v1.3/test-v1.3.json.gz", "rt") as f:
        squad = json.load(f)
    paragraphs = [(p["context"].split("[SEP]", 1)[-1].strip(), [q["question"] for q in p["qas"]])
                  for a in squad["data"] for p in a["paragraphs"]]
    with gzip.open(BENCH / "jemhopqa/dev_ver1.2.json.gz", "rt") as f:
        jem = json.load(f)
    return {
        "jcommonsenseqa": {
            "question": [r["question"] for r in jcqa],
            "whole": [r["question"] + "\n" + "\n".join(r[f"choice{i}"] for i in range(5))
                      for r in jcqa]},
        "jsquad": {"question": [q for _, qs in paragraphs for q in qs],
                   "whole": [c + "\n" + qs[0] for c, qs in paragraphs]},
        "jemhopqa": {"question": [r["question"] for r in jem],
                     "whole": [f"{r['question']}\n{r['answer']}" for r in jem]},
    }


def write_input(docs: list[dict], folder: Path, parts: int = 4) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(parts):
        with open(folder / f"part-{i}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in docs[i::parts])


def run(src: Path, out: Path, **params) -> tuple[dict, dict, float]:
    """Rows by id (kept and removed) and the stage's stats entry."""
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    Pipeline([ReadJsonl(path=f"{src}/*.jsonl"), Decontaminate(tasks=TASKS, **params),
              WriteParquet()], rejected="documents").run(output=str(out), executor="local",
                                                          progress=False)
    seconds = time.perf_counter() - started
    rows = {r["id"]: r for r in pq.read_table(out / "write_parquet").to_pylist()}
    rejected = out / "rejected" / "decontaminate"
    if rejected.exists():
        rows |= {r["id"]: r for r in pq.read_table(rejected).to_pylist()}
    stats = json.loads((out / "stats.json").read_text())["stages"][1]["decontamination"]
    return rows, stats, seconds


def flagged(rows: dict, texts: dict[str, str]) -> list[tuple[str, str, str]]:
    out = []
    for key, row in sorted(rows.items()):
        if key in texts and row["contamination"]:
            span = row["contamination"][0]
            out.append((key, span["task"], texts[key][span["start"]:span["end"]]))
    return out


def sweep(docs: list[dict], floors: list[int], tmp: Path) -> tuple[list[str], dict]:
    src = tmp / "clean"
    write_input(docs, src)
    texts = {d["id"]: d["text"] for d in docs}
    chars = sum(len(t) for t in texts.values())
    lines = ["| whole-text minimum | per-task minima (characters) | clean documents flagged | "
             "rate | by task | what matched |", "|---|---|---|---|---|---|"]
    figures = {}
    settings = [("fixed 20 (before)", OLD)] + [(f"floor {f}", {"floor_chars": f})
                                               for f in floors]
    for label, params in settings:
        rows, stats, _ = run(src, tmp / "sweep", **params)
        found = flagged(rows, texts)
        minima = ", ".join(f"{t} {s['min_whole'].get('chars', '-')}"
                           for t, s in stats["tasks"].items())
        by_task = Counter(task for _, task, _ in found)
        what = "; ".join(f"`{key}` {task}: 「{text[:40]}」" for key, task, text in found[:6])
        lines.append(f"| {label} | {minima} | {len(found)} of {len(docs):,} | "
                     f"{len(found) / len(docs):.4%} | "
                     f"{', '.join(f'{t} {n}' for t, n in by_task.items()) or '-'} | "
                     f"{what or '-'} |")
        figures[label] = {"flagged": len(found), "by_task": dict(by_task),
                          "minima": {t: s["min_whole"] for t, s in stats["tasks"].items()}}
    return lines, {"documents": len(docs), "characters": chars, "runs": figures}


def plants(docs: list[dict], minima: dict[str, int], seed: int) -> tuple[list[dict], dict]:
    """Each chosen text in its own clean document; returns the planted documents and what
    each holds."""
    rng = random.Random(seed)
    hosts = [d for d in docs if len(d["text"]) >= 200]
    rng.shuffle(hosts)
    candidates = plant_candidates()
    chosen = []
    plan = {"jcommonsenseqa": (300, 60), "jsquad": (200, 60), "jemhopqa": (120, 60)}
    for task, (n_questions, n_whole) in plan.items():
        questions = sorted({q for q in candidates[task]["question"] if mostly_cjk(q, 0.5)})
        checkable = [q for q in questions if length(q) >= minima[task]]
        short = [q for q in questions if length(q) < minima[task]]
        chosen += [(task, "question", q) for q in rng.sample(checkable,
                                                              min(n_questions, len(checkable)))]
        chosen += [(task, "too short", q) for q in rng.sample(short, min(40, len(short)))]
        chosen += [(task, "whole", w) for w in rng.sample(candidates[task]["whole"], n_whole)]
    planted, what = [], {}
    for k, (task, kind, text) in enumerate(chosen):
        host = hosts.pop()
        how = KINDS[k % len(KINDS)]
        shown = variant(text, how, True, rng)
        doc, at = plant(host["text"], shown, rng, True)
        key = f"plant/{host['id']}"
        planted.append({"id": key, "text": doc, "lang": "ja"})
        what[key] = {"task": task, "kind": kind, "how": how, "at": at, "end": at + len(shown),
                     "length": length(text), "text": text}
    return planted, what


def recall(rows: dict, what: dict) -> dict[tuple[str, str, str], list[int]]:
    out: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
    for key, p in what.items():
        spans = rows[key]["contamination"] or []
        hit = any(s["task"] == p["task"] and s["start"] < p["end"] and s["end"] > p["at"]
                  for s in spans)
        cell = out[(p["task"], p["kind"], p["how"])]
        cell[0] += hit
        cell[1] += 1
    return out


def recall_section(docs: list[dict], tmp: Path, seed: int) -> tuple[list[str], dict]:
    src = tmp / "planted"
    _, stats, _ = run(_written(docs, tmp / "clean0"), tmp / "minima")
    minima = {t: s["min_whole"]["chars"] for t, s in stats["tasks"].items()
              if "chars" in s["min_whole"]}
    planted, what = plants(docs, minima, seed)
    write_input(planted + docs, src)
    texts = {d["id"]: d["text"] for d in docs}
    rows, stats, seconds = run(src, tmp / "now")
    old_rows, _, _ = run(src, tmp / "old", **OLD)
    now, before = recall(rows, what), recall(old_rows, what)
    fp = flagged(rows, texts)
    lines = ["| task | planted | variant | found (now) | found (fixed 20, before) |",
             "|---|---|---|---|---|"]
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for key in sorted(now):
        task, kind, how = key
        a, n = now[key]
        b, _ = before[key]
        label = {"question": "question alone", "whole": "whole item",
                 "too short": f"question alone, under the minimum ({minima[task]})"}[kind]
        lines.append(f"| {task} | {label} | {KIND_NAMES[how]} | {a}/{n} | {b}/{n} |")
        totals[kind][0] += a
        totals[kind][1] += b
        totals[kind][2] += n
    coverage = ["| task | items | checked | too short | texts | checked | too short | "
                "whole-text minimum |", "|---|---|---|---|---|---|---|---|"]
    for task, s in stats["tasks"].items():
        coverage.append(f"| {task} | {s['items']:,} | {s['items_checked']:,} | "
                        f"{s['items_too_short']:,} | {s['texts']:,} | {s['texts_checked']:,} | "
                        f"{s['texts_too_short']:,} | "
                        + ", ".join(f"{n} {u}" for u, n in s["min_whole"].items()) + " |")
    lengths = Counter(p["length"] for p in what.values() if p["kind"] == "question")
    summary = [
        f"{len(planted)} planted documents and the {len(docs):,} clean ones unplanted, "
        f"{seconds:.1f} s for the run (index of the six tasks built in it). Questions alone: "
        f"{totals['question'][0]}/{totals['question'][2]} found now, "
        f"{totals['question'][1]}/{totals['question'][2]} before; whole items: "
        f"{totals['whole'][0]}/{totals['whole'][2]} now, {totals['whole'][1]}/"
        f"{totals['whole'][2]} before; questions under their task's minimum (counted as too "
        f"short to check): {totals['too short'][0]}/{totals['too short'][2]} found. Planted "
        f"question lengths (characters as matched): {min(lengths)}-{max(lengths)}. Clean "
        f"documents flagged in the same run: {len(fp)}"
        + (" (" + "; ".join(f"`{k}` {t}: 「{x[:40]}」" for k, t, x in fp) + ")" if fp else "")
        + "."]
    figures = {"now": {"/".join(k): v for k, v in now.items()},
               "before": {"/".join(k): v for k, v in before.items()},
               "false_positives": len(fp), "minima": minima,
               "coverage": {t: {k: v for k, v in s.items() if k != "examples"}
                            for t, s in stats["tasks"].items()}}
    note = "Per task (stats.json, the stage's entry; the report shows the same table):"
    return [*summary, "", *lines, "", note, "", *coverage], figures


def _written(docs: list[dict], folder: Path) -> Path:
    write_input(docs, folder)
    return folder


NOTES = [
    "## Reading it", "",
    "* The document flagged at every setting, `wiki/tr-642-00` (JaQuAD, article アトランタ), "
    "is flagged by a 50-gram, not by a short whole text: it shares a sentence template of "
    "Wikipedia's city articles (「アメリカのシンクタンクが公表したビジネス・人材・文化・政治など"
    "を対象とした総合的な世界都市ランキングにおいて、世界第…」) with a JSQuAD test passage "
    "(リオデジャネイロ, item `a38603p1q0`). The same 50 characters are in both texts, so it is "
    "what n-gram decontamination is meant to cut; it does not depend on the whole-text "
    "minimum (it is there with the old fixed 20 too).",
    "* False positives of the short whole texts: floors 4-7 flag 3 clean documents through "
    "JCommonsenseQA questions of 7 characters (`マクドナルドは？`, `つまらないのは？`); from a "
    "floor of 8 none is flagged. The default floor is therefore 8: 0 false positives in "
    "16,879 clean documents (below 0.02 % at 95 % confidence, the bound the default is held "
    "to). On a larger corpus chance matches grow with its size, but `max_docs` (10) ignores a "
    "text found in more than 10 documents, so each short text flags at most 10.",
    "* Questions under their task's minimum are not checked by design (they are the shortest "
    "5 % of the task's texts, or under the floor); stats.json and the report count them as "
    "too short to check.",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--floors", type=int, nargs="+", default=[4, 5, 6, 7, 8, 9, 10, 12])
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--out", default=str(RESULTS))
    args = ap.parse_args()
    if not (JA / "wiki_paragraphs").exists() or not BENCH.exists():
        print(f"skipped: the Japanese corpus is not at {JA} (set CURATOR_CORPUS)")
        return
    docs = clean_documents()
    with tempfile.TemporaryDirectory() as tmp:
        fp_lines, fp_figures = sweep(docs, args.floors, Path(tmp))
        rc_lines, rc_figures = recall_section(docs, Path(tmp), args.seed)
    body = [
        "# Japanese decontamination: whole-text minimum per task", "",
        f"Clean Japanese text: {len(docs):,} documents, {fp_figures['characters'] / 1e6:.1f} M "
        "characters (JaQuAD Wikipedia paragraphs outside the article JSQuAD shares, Aozora "
        "works, KWDLC web leads, mC4-ja snippets). Tasks: JCommonsenseQA, JSQuAD, JNLI (valid + "
        "test), JEMHopQA (dev), NIILC (dev + test), JMMLU (all subjects). Defaults: character "
        "50-grams; texts shorter are used whole down to each task's minimum, the 5th "
        "percentile of its texts' lengths bounded by `floor_chars` and `min_chars` (20).", "",
        "## False positives on clean text by floor", "", *fp_lines, "",
        "## Recall: real items planted into real Japanese text", "", *rc_lines, "", *NOTES]
    text = "\n".join(body)
    print(text)
    harness.record(args.out, text, figures={"false_positives": fp_figures,
                                            "recall": rc_figures})


if __name__ == "__main__":
    main()
