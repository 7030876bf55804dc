# ruff: noqa: RUF001, RUF003  (Japanese punctuation is the point here)
"""Japanese decontamination of short texts (issue 29, defect 4).

Most JCommonsenseQA questions are shorter than 20 characters (median 13), so with one fixed
whole-text minimum of 20 a page that quotes a question without its choices was never found.
Each task now uses its texts whole down to its own minimum per script: the 5th percentile of
its texts' lengths, bounded by ``floor_chars`` (8) and ``min_chars`` (20). Here real
JCommonsenseQA, JSQuAD and JEMHopQA questions (alone) and whole items are planted into real
Japanese Wikipedia and Aozora text four ways (verbatim, re-spaced, full-width, line-broken):
every one at or above its task's minimum is found, the same documents without plants are not
flagged (false positives), and ``stats.json`` and the report say per task how many items and
texts were checked and how many were too short to check."""

from __future__ import annotations

import gzip
import json
import random
import re

import numpy as np
import pyarrow.parquet as pq
import pytest

from curator import Pipeline, ReadJsonl, WriteParquet
from curator.report.html import render_html
from curator.stages.decontaminate import Decontaminate
from curator.stages.decontaminate.index import NgramSizes
from tests.conftest import ROOT, assert_accounting, write_parts
from tests.stages.decontaminate_reference import is_cjk, mostly_cjk, plant, units, variant

DATA = ROOT / "data" / "decontaminate"
SAMPLE = ROOT / "data" / "sample"
JCQA = DATA / "jglue/jcommonsenseqa-v1.3/test-v1.3.json.gz"
JSQUAD = DATA / "jglue/jsquad-v1.3/test-v1.3.json.gz"
JEMHOPQA = DATA / "jemhopqa/dev_ver1.2.json.gz"
TASKS = [
    {"name": "jcommonsenseqa", "path": str(JCQA)},
    {"name": "jsquad", "path": str(JSQUAD)},
    {"name": "jemhopqa", "path": str(JEMHOPQA)},
    {"name": "jnli", "path": str(DATA / "jglue/jnli-v1.3/test-v1.3.json.gz")},
    {"name": "niilc", "path": str(DATA / "niilc/NIILC-ECQA2015_test.xml.gz")},
    {"name": "jmmlu", "path": f"{DATA}/jmmlu/*.csv.gz"},
]
#: verbatim, re-spaced (and re-punctuated), full-width ASCII with half-width katakana,
#: line-broken every 7 characters (tests/stages/decontaminate_reference.py)
KINDS = ("verbatim", "spacing", "width", "rewrapped")
FLOOR, CAP = 8, 20


def _read(path) -> str:
    return gzip.decompress(path.read_bytes()).decode("utf-8-sig")


def _jsonl(path) -> list[dict]:
    return [json.loads(line) for line in _read(path).split("\n") if line.strip()]


def length(text: str) -> int:
    """Characters as character-mode matching counts them (normalised letters and marks)."""
    return len(units(text, True))


def _items() -> dict[str, list[dict]]:
    """Per task, each item as read here with json (independently of the stage's readers): the
    texts the stage may use whole (questions, the joined item, JSQuAD's paragraph: one item per
    paragraph), its questions, and the whole item as a page would show it."""
    jcqa = []
    for r in _jsonl(JCQA):
        choices = [r[f"choice{i}"] for i in range(5)]
        jcqa.append({"texts": [r["question"], " ".join([r["question"], *choices])],
                     "questions": [r["question"]],
                     "whole": r["question"] + "\n" + "\n".join(choices)})
    jsquad = []
    for article in json.loads(_read(JSQUAD))["data"]:
        for paragraph in article["paragraphs"]:
            context = paragraph["context"].split("[SEP]", 1)[-1].strip()
            questions = [q["question"] for q in paragraph["qas"]]
            jsquad.append({"texts": [context, *questions], "questions": questions,
                           "whole": context + "\n" + questions[0]})
    jem = [{"texts": [r["question"], f"{r['question']} {r['answer']}"],
            "questions": [r["question"]], "whole": f"{r['question']}\n{r['answer']}"}
           for r in json.loads(_read(JEMHOPQA))]
    return {"jcommonsenseqa": jcqa, "jsquad": jsquad, "jemhopqa": jem}


def by_characters(text: str) -> bool:
    """Matched by characters: mostly CJK, or holding a kana or ideograph at all (then also by
    words)."""
    return mostly_cjk(text, 0.5) or any(is_cjk(c) for c in text)


def too_short(text: str, chars: int) -> bool:
    """Under ``chars`` characters where matched by characters and under 8 words where matched
    by words (text mostly in other scripts)."""
    short_chars = length(text) < chars
    if mostly_cjk(text, 0.5):
        return short_chars
    return len(units(text, False)) < FLOOR and (short_chars or not by_characters(text))


def expected_minimum(texts: list[str]) -> int:
    """The 5th percentile of the lengths of the texts matched by characters, between 8 and
    20."""
    lengths = [length(t) for t in texts if by_characters(t)]
    return max(FLOOR, min(CAP, int(np.percentile(lengths, 5, method="lower"))))


@pytest.fixture(scope="module")
def items():
    return _items()


@pytest.fixture(scope="module")
def minima(items):
    return {task: expected_minimum([t for i in rows for t in i["texts"]])
            for task, rows in items.items()}


def _hosts() -> list[dict]:
    """Real Japanese documents: Wikipedia paragraphs (outside the article JSQuAD shares with
    JaQuAD, tr-227) and Aozora Bunko works."""
    docs = [{"id": f"wiki/{d['id']}", "text": d["text"]}
            for d in _jsonl(DATA / "hosts/wiki_ja.jsonl.gz") if not d["id"].startswith("tr-227")]
    return docs + [{"id": f"aozora/{d['id']}", "text": d["text"]}
                   for d in _jsonl(SAMPLE / "aozora_sample.jsonl.gz")]


def _choose(rows: list[dict], least: int, most: int, count: int,
            rng: random.Random) -> list[str]:
    fitting = sorted({q for r in rows for q in r["questions"]
                      if least <= length(q) < most and mostly_cjk(q, 0.5)})
    return rng.sample(fitting, min(count, len(fitting)))


@pytest.fixture(scope="module")
def planted(items, minima, tmp_path_factory):
    """Questions alone (50 JCommonsenseQA questions of 18-19 characters, as in the issue, 40
    shorter ones down to the minimum; JSQuAD and JEMHopQA questions) and whole items, each in
    one of four variants, each in its own host; every host also unplanted. Run through
    read_jsonl → decontaminate (the six Japanese tasks, defaults) → write_parquet."""
    rng = random.Random(29)
    hosts = _hosts()
    clean = {f"clean/{d['id']}": d["text"] for d in hosts}
    rng.shuffle(hosts)
    chosen = [("jcommonsenseqa", "question", q) for q in
              _choose(items["jcommonsenseqa"], 18, 20, 50, rng)]
    chosen += [("jcommonsenseqa", "question", q) for q in
               _choose(items["jcommonsenseqa"], minima["jcommonsenseqa"], 18, 40, rng)]
    chosen += [("jsquad", "question", q) for q in
               _choose(items["jsquad"], minima["jsquad"], 50, 24, rng)]
    chosen += [("jemhopqa", "question", q) for q in
               _choose(items["jemhopqa"], minima["jemhopqa"], 50, 16, rng)]
    for task, count in (("jcommonsenseqa", 12), ("jsquad", 8), ("jemhopqa", 8)):
        chosen += [(task, "whole", r["whole"]) for r in rng.sample(items[task], count)]
    # texts mostly in Latin letters (4LDKのLは何？, YOSHIKIとPATA、…): matched by characters too
    chosen += [(task, kind, text) for task, rows in items.items() for r in rows
               for kind, text in [*(("question", q) for q in r["questions"]),
                                  ("whole", r["whole"])]
               if not mostly_cjk(text, 0.5) and by_characters(text)
               and length(text) >= minima[task]]
    plants = {}
    for k, (task, kind, text) in enumerate(chosen):
        host = hosts.pop()
        how = KINDS[k % len(KINDS)]
        planted_text = variant(text, how, True, rng)
        doc, at = plant(host["text"], planted_text, rng, True)
        plants[f"plant/{host['id']}"] = {"task": task, "kind": kind, "how": how, "at": at,
                                         "end": at + len(planted_text), "text": text,
                                         "doc": doc}
    docs = [{"id": k, "text": p["doc"]} for k, p in plants.items()]
    docs += [{"id": k, "text": t} for k, t in clean.items()]
    rng.shuffle(docs)
    folder = tmp_path_factory.mktemp("decon-ja-in")
    write_parts(folder, [docs[0::2], docs[1::2]])
    run = tmp_path_factory.mktemp("decon-ja-run") / "run"
    Pipeline([ReadJsonl(path=f"{folder}/*.jsonl"), Decontaminate(tasks=TASKS), WriteParquet()],
             rejected="documents").run(output=run, executor="local", progress=False)
    kept = {r["id"]: r for r in pq.read_table(run / "write_parquet").to_pylist()}
    gone = run / "rejected" / "decontaminate"
    if gone.exists():
        kept |= {r["id"]: r for r in pq.read_table(gone).to_pylist()}
    return plants, clean, kept, run


def test_short_questions_quoted_without_their_choices_are_found(planted, minima):
    """Defect 4: 16 of 50 JCommonsenseQA questions of 18-19 characters planted alone survived;
    now every question at or above its task's minimum is found, whatever the variant."""
    plants, _, rows, _ = planted
    assert minima["jcommonsenseqa"] == FLOOR  # most questions are short: the floor binds
    latin = {p["text"] for p in plants.values() if not mostly_cjk(p["text"], 0.5)}
    assert {"4LDKのLは何？", "YOSHIKIとPATA、誕生日が早いのはYOSHIKIですか？",
            "YOSHIKIとPATA、誕生日が早いのはYOSHIKIですか？\nNO"} <= latin
    assert len(plants) == 158 + len(latin)
    assert {(p["task"], p["kind"], p["how"]) for p in plants.values()} >= {
        (t, k, h) for t in ("jcommonsenseqa", "jsquad", "jemhopqa")
        for k in ("question", "whole") for h in KINDS}
    missed = []
    for key, p in plants.items():
        spans = rows[key]["contamination"] or []
        if not any(s["task"] == p["task"] and s["start"] < p["end"] and s["end"] > p["at"]
                   for s in spans):
            missed.append((p["task"], p["kind"], p["how"], p["text"]))
    assert missed == []


def test_documents_without_plants_are_not_flagged(planted):
    """False positives of the short whole texts on real clean Japanese text: none of these
    ~1000 documents (1.3 M characters) is flagged by any of the six Japanese tasks (the
    benchmark measures the rate on 16,879 documents: docs/decontamination.md)."""
    _, clean, rows, _ = planted
    assert len(clean) > 1000
    flagged = {k: rows[k]["contamination"] for k in clean if rows[k]["contamination"]}
    assert flagged == {}
    assert {k: rows[k]["text"] for k in clean} == clean


def test_each_task_reports_its_minimum_and_what_was_too_short(planted, items, minima):
    """stats.json (the stage's entry) and report.html say per task how many items and texts
    were checked and how many were too short to check."""
    _, _, _, run = planted
    stats = assert_accounting(run)
    report = stats["stages"][1]["decontamination"]["tasks"]
    for task in ("jcommonsenseqa", "jsquad", "jemhopqa"):
        entry = report[task]
        assert entry["min_whole"]["chars"] == minima[task], task
        assert entry["items"] == len(items[task])
        assert entry["items_checked"] + entry["items_too_short"] == entry["items"]
        assert entry["texts_checked"] + entry["texts_too_short"] == entry["texts"]
    # JCommonsenseQA: questions shorter than 8 characters are the texts too short to check
    # (every joined question and choices is long enough; 4LDKのLは何, mostly Latin letters,
    # is 1 word but 8 characters); every item is checked through its joined text
    questions = [q for i in items["jcommonsenseqa"] for q in i["questions"]]
    short = sum(1 for q in questions if too_short(q, FLOOR))
    assert 0 < short == report["jcommonsenseqa"]["texts_too_short"]
    assert report["jcommonsenseqa"]["items_too_short"] == 0
    assert report["jcommonsenseqa"]["texts"] == 2 * len(questions)
    # JEMHopQA: items whose question and question + answer are both under its minimum
    jem = minima["jemhopqa"]
    unchecked = sum(1 for i in items["jemhopqa"] if all(too_short(t, jem) for t in i["texts"]))
    assert report["jemhopqa"]["items_too_short"] == unchecked
    html = render_html(stats)
    coverage = html[html.index("Contamination per task"):]
    for task in ("jcommonsenseqa", "jsquad", "jemhopqa"):
        entry = report[task]
        row = re.search(rf"<tr><td class='l'>{task}</td>(.*?)</tr>", coverage).group(1)
        cells = re.findall(r"<td[^>]*>([^<]*)</td>", row)
        assert cells == [f"{entry[k]:,}" for k in (
            "items", "items_checked", "items_too_short", "texts", "texts_checked",
            "texts_too_short")] + [", ".join(f"{n} {u}" for u, n in entry["min_whole"].items())]


def test_the_minimum_is_the_fifth_percentile_bounded():
    sizes = NgramSizes(13, 8, 50, 20, 0.5, floor_word=8, floor_char=8, percentile=5)
    assert sizes.task_minimum(np.arange(1, 101), 1) == 8  # p5 = 5: the floor
    assert sizes.task_minimum(np.arange(10, 110), 1) == 14  # within the bounds
    assert sizes.task_minimum(np.arange(40, 140), 1) == 20  # never above min_chars
    assert sizes.task_minimum(np.arange(1, 101), 0) == 8  # words: floor and cap are both 8
    assert sizes.mins().tolist() == [8, 8]
    fixed = NgramSizes(13, 8, 50, 20, 0.5, floor_word=8, floor_char=8, percentile=None)
    assert fixed.task_minimum(np.arange(1, 101), 1) == 20  # whole_percentile null: min_chars
    small = NgramSizes(6, 3, 12, 5, 0.5, floor_word=8, floor_char=8, percentile=5)
    assert small.mins().tolist() == [3, 5]  # a floor above min_* is min_*
    with pytest.raises(ValueError, match="whole_percentile"):
        Decontaminate(tasks=TASKS, whole_percentile=101)
