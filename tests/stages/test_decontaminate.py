"""Decontamination through the real pipeline: real benchmark items planted into real documents
(English into English, Japanese into Japanese; verbatim, re-cased, re-spaced, re-wrapped,
width-changed, mid-paragraph) are all found and cut out; the same documents without plants
lose nothing; the natural JSQuAD/JaQuAD and MMLU/inaugural-address overlaps are flagged; the
output equals a plain reference implementation; a run cut in any phase resumes to the same
output."""

from __future__ import annotations

import csv
import gzip
import io
import json
import random
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from curator import Pipeline, ReadJsonl, WriteParquet
from curator.stages.decontaminate import Decontaminate
from tests.conftest import ROOT, assert_accounting, write_parts
from tests.stages.decontaminate_reference import (
    VARIANTS,
    Params,
    Task,
    plant,
    reference,
    units,
    variant,
)

DATA = ROOT / "data" / "decontaminate"
SAMPLE = ROOT / "data" / "sample"
LLM_FOUNDRY = DATA / "llm_foundry"
TASKS = [
    {"name": "gsm8k", "path": str(DATA / "gsm8k/test.jsonl.gz")},
    {"name": "mmlu", "path": str(DATA / "mmlu/mmlu_test.csv.gz")},
    {"name": "humaneval", "path": str(DATA / "humaneval/HumanEval.jsonl.gz")},
    {"name": "truthfulqa", "path": str(DATA / "truthfulqa/TruthfulQA.csv.gz")},
    {"name": "winogrande", "path": str(LLM_FOUNDRY / "winogrande.jsonl.gz")},
    {"name": "arc", "path": str(LLM_FOUNDRY / "arc_challenge.jsonl.gz")},
    {"name": "lambada", "path": str(LLM_FOUNDRY / "lambada_openai.jsonl.gz")},
    {"name": "jcommonsenseqa", "path": str(DATA / "jglue/jcommonsenseqa-v1.3/test-v1.3.json.gz")},
    {"name": "jsquad", "path": str(DATA / "jglue/jsquad-v1.3/test-v1.3.json.gz")},
    {"name": "jnli", "path": str(DATA / "jglue/jnli-v1.3/test-v1.3.json.gz")},
    {"name": "jemhopqa", "path": str(DATA / "jemhopqa/dev_ver1.2.json.gz")},
    {"name": "niilc", "path": str(DATA / "niilc/NIILC-ECQA2015_test.xml.gz")},
    {"name": "jmmlu", "path": f"{DATA}/jmmlu/*.csv.gz"},
]


def _read(path: Path) -> str:
    return gzip.decompress(path.read_bytes()).decode("utf-8-sig")


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in _read(path).split("\n") if line]


def _csv(path: Path, header: bool = True) -> list[dict | list]:
    text = _read(path)
    reader = csv.DictReader(io.StringIO(text)) if header else csv.reader(io.StringIO(text))
    return list(reader)


def _rendered(name: str) -> list[str]:
    """Each item of a benchmark as it would be pasted into a web page (read here with json and
    csv, independently of the stage's task readers)."""
    if name == "gsm8k":
        return [f"{r['question']}\n{r['answer']}" for r in _jsonl(DATA / "gsm8k/test.jsonl.gz")]
    if name == "mmlu":
        return [r["question"] + "".join(f"\n{k}. {r[f'choice{i}']}" for i, k in enumerate("ABCD"))
                for r in _csv(DATA / "mmlu/mmlu_test.csv.gz")]
    if name == "humaneval":
        return [r["prompt"] + r["canonical_solution"]
                for r in _jsonl(DATA / "humaneval/HumanEval.jsonl.gz")]
    if name == "truthfulqa":
        return [f"{r['Question']}\n{r['Best Answer']}"
                for r in _csv(DATA / "truthfulqa/TruthfulQA.csv.gz")]
    if name == "arc":
        return [f"{r['query'].removeprefix('Question: ').strip()}\n{r['choices'][r['gold']]}"
                for r in _jsonl(LLM_FOUNDRY / "arc_challenge.jsonl.gz")]
    if name == "winogrande":
        return [f"{r['context_options'][r['gold']]} {r['continuation']}"
                for r in _jsonl(LLM_FOUNDRY / "winogrande.jsonl.gz")]
    if name == "lambada":
        return [f"{r['context']} {r['continuation']}"
                for r in _jsonl(LLM_FOUNDRY / "lambada_openai.jsonl.gz")]
    if name == "jcommonsenseqa":
        return ["\n".join([r["question"], *(r[f"choice{i}"] for i in range(5))])
                for r in _jsonl(DATA / "jglue/jcommonsenseqa-v1.3/test-v1.3.json.gz")]
    if name == "jsquad":
        squad = json.loads(_read(DATA / "jglue/jsquad-v1.3/test-v1.3.json.gz"))
        return [p["context"].split("[SEP]")[-1].strip() + "\n" + p["qas"][0]["question"]
                for a in squad["data"] for p in a["paragraphs"]]
    if name == "jnli":
        return [r["sentence1"] + r["sentence2"]
                for r in _jsonl(DATA / "jglue/jnli-v1.3/test-v1.3.json.gz")]
    if name == "jemhopqa":
        return [f"{r['question']} {r['answer']}"
                for r in json.loads(_read(DATA / "jemhopqa/dev_ver1.2.json.gz"))]
    if name == "niilc":
        import xml.etree.ElementTree as ET

        root = ET.fromstring(_read(DATA / "niilc/NIILC-ECQA2015_test.xml.gz"))
        return [q.findtext("text") + "　" + q.find("answers").findtext("answer")
                for q in root.iter("question")]
    rows = [r for path in sorted((DATA / "jmmlu").glob("*.csv.gz"))
            for r in _csv(path, header=False)]
    return ["\n".join(r[:5]) for r in rows]


JAPANESE = {"jcommonsenseqa", "jsquad", "jnli", "jemhopqa", "niilc", "jmmlu"}


def _hosts() -> tuple[list[dict], list[dict]]:
    """Real English (passages of public-domain novels) and Japanese (Aozora works, Wikipedia
    paragraphs outside the article that JSQuAD shares) documents."""
    english = [{"id": d["id"], "text": d["text"]} for d in _jsonl(DATA / "hosts/books_en.jsonl.gz")]
    japanese = [{"id": f"aozora/{d['id']}", "text": d["text"]}
                for d in _jsonl(SAMPLE / "aozora_sample.jsonl.gz")]
    japanese += [{"id": f"wiki/{d['id']}", "text": d["text"]}
                 for d in _jsonl(DATA / "hosts/wiki_ja.jsonl.gz")]
    return english, japanese


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """Two items of each of the 13 benchmarks planted into distinct host documents, five ways;
    the same hosts unplanted; the inaugural addresses and JSQuAD's Wikipedia article as they
    are. Run through read_jsonl → decontaminate → write_parquet on a 2-worker Dask cluster."""
    rng = random.Random(11)
    english, japanese = _hosts()
    rng.shuffle(english)
    rng.shuffle(japanese)
    japanese = [d for d in japanese if not d["id"].startswith("wiki/tr-227-")]
    plants = {}
    for t, task in enumerate(TASKS):
        ja = task["name"] in JAPANESE
        least = 30 if ja else 120
        items = [text for text in _rendered(task["name"]) if len(text) >= least]
        hosts = japanese if ja else english
        for k, text in enumerate(rng.sample(items, 2)):
            host = hosts.pop()
            kind = VARIANTS[(2 * t + k) % len(VARIANTS)]
            planted_text = variant(text, kind, ja, rng)
            doc, at = plant(host["text"], planted_text, rng, ja)
            plants[f"plant/{host['id']}"] = {"task": task["name"], "kind": kind, "host": host,
                                             "at": at, "text": planted_text, "doc": doc}
    clean = [{"id": f"clean/{d['id']}", "text": d["text"]} for d in english + japanese]
    clean += [{"id": f"clean/{p['host']['id']}", "text": p["host"]["text"]}
              for p in plants.values()]
    natural = [{"id": d["id"], "text": d["text"]} for d in _jsonl(SAMPLE / "inaugural.jsonl.gz")]
    natural += [{"id": f"wiki/{d['id']}", "text": d["text"]}
                for d in _jsonl(DATA / "hosts/wiki_ja.jsonl.gz") if d["id"].startswith("tr-227")]
    docs = [{"id": key, "text": p["doc"]} for key, p in plants.items()] + clean + natural
    rng.shuffle(docs)
    folder = tmp_path_factory.mktemp("decon-in")
    write_parts(folder, [docs[i::3] for i in range(3)])
    return folder, plants, {d["id"]: d["text"] for d in docs}


@pytest.fixture(scope="module")
def planted_run(planted, tmp_path_factory, dask_scheduler):
    folder, _, _ = planted
    run = tmp_path_factory.mktemp("decon-run") / "run"
    Pipeline([ReadJsonl(path=f"{folder}/*.jsonl"), Decontaminate(tasks=TASKS), WriteParquet()],
             rejected="documents").run(output=run, scheduler=dask_scheduler, progress=False)
    return run


def _outcome(run: Path) -> tuple[dict, dict]:
    """Kept documents (id → row) and removed ones (id → row) of the decontaminate stage."""
    kept = {r["id"]: r for r in pq.read_table(run / "write_parquet").to_pylist()}
    rejected = run / "rejected" / "decontaminate"
    gone = {r["id"]: r for r in pq.read_table(rejected).to_pylist()} if rejected.exists() else {}
    return kept, gone


def _normalised_grams(text: str, japanese: bool) -> set[tuple[str, ...]]:
    """The n-grams the planted text must no longer show (all of it when it is shorter)."""
    seq = tuple(u for u, _, _ in units(text, japanese))
    n = 50 if japanese else 13
    return {seq[i:i + n] for i in range(max(1, len(seq) - n + 1))}


def test_every_planted_item_is_found_and_cut_out(planted, planted_run):
    _, plants, _ = planted
    kept, gone = _outcome(planted_run)
    assert {p["kind"] for p in plants.values()} == set(VARIANTS)
    assert len(plants) == 2 * len(TASKS) == 26
    for key, p in plants.items():
        ja = p["task"] in JAPANESE
        row = kept.get(key) or gone[key]
        assert p["task"] in {s["task"] for s in row["contamination"]}, (key, p["kind"])
        if key in gone:
            assert gone[key]["reason"] == "contaminated"
            continue
        out = row["text"]
        out_units = tuple(u for u, _, _ in units(out, ja))
        for gram in _normalised_grams(p["text"], ja):
            assert not any(out_units[i:i + len(gram)] == gram
                           for i in range(len(out_units) - len(gram) + 1)), (key, p["kind"])
        host, at = p["host"]["text"], p["at"]
        if at - 200 >= 200:  # the host before the plant, up to the margin, is kept
            assert out.startswith(host[:at - 200]), (key, p["kind"])
        if len(host) - at - 200 >= 200:  # and after it
            assert out.endswith(host[at + 200:]), (key, p["kind"])


def test_documents_without_plants_lose_nothing(planted, planted_run):
    _, _, inputs = planted
    kept, gone = _outcome(planted_run)
    clean = {k: v for k, v in inputs.items() if k.startswith("clean/")}
    assert len(clean) > 700
    assert not (set(clean) & set(gone))
    assert {k: kept[k]["text"] for k in clean} == clean
    assert all(kept[k]["contamination"] is None for k in clean)


def test_natural_overlaps_are_flagged(planted, planted_run):
    """JSQuAD test contexts copied from JaQuAD train paragraphs (listed by the corpus), and
    inaugural addresses that MMLU's history questions quote."""
    _, _, inputs = planted
    kept, gone = _outcome(planted_run)
    rows = {**kept, **gone}
    flagged = {k: r for k, r in rows.items() if r["contamination"]}
    listed = {}
    for line in (DATA / "overlap_jsquad_test_vs_jaquad_train.tsv").read_text().splitlines()[1:]:
        context, _, paragraph, _ = line.split("\t")
        listed.setdefault(f"wiki/{paragraph}", set()).add(context)
    assert set(listed) <= set(flagged)
    for key in listed:
        spans = flagged[key]["contamination"]
        assert {s["task"] for s in spans} == {"jsquad"}
        found = {s["item"].split("q")[0] for s in spans}  # question id → context id
        assert found & listed[key], key
    wiki = {k for k in flagged if k.startswith("wiki/")}
    assert {k.rsplit("-", 1)[0] for k in wiki} == {"wiki/tr-227"}  # JSQuAD's article only
    mmlu = " ".join(_rendered("mmlu"))
    mmlu_units = " ".join(u for u, _, _ in units(mmlu, False))
    speeches = {k for k in flagged if k.startswith("inaugural/")}
    assert {"inaugural/1981-Reagan.txt", "inaugural/2013-Obama.txt"} <= speeches
    for key in speeches:
        for span in flagged[key]["contamination"]:
            assert span["task"] == "mmlu"
            quoted = inputs[key][span["start"]:span["end"]]
            assert " ".join(u for u, _, _ in units(quoted, False)) in mmlu_units, quoted
    assert set(flagged) == set(listed) | wiki | speeches | {k for k in flagged
                                                              if k.startswith("plant/")}


def test_stats_report_per_task_with_bounded_examples(planted_run):
    stats = assert_accounting(planted_run)
    entry = stats["stages"][1]
    report = entry["decontamination"]
    assert set(report["tasks"]) == {t["name"] for t in TASKS}
    assert report["index"]["entries"] > 100_000
    for name, task in report["tasks"].items():
        assert task["documents"] >= 2, name  # its two plants
        assert 1 <= len(task["examples"]) <= 3
        for example in task["examples"]:
            assert set(example) == {"id", "item", "text"} and example["text"]
    assert entry["removed"] == report["documents_removed"]
    assert report["documents_cut"] + report["documents_removed"] == sum(
        1 for _ in _flagged_ids(planted_run))


def _flagged_ids(run: Path):
    kept, gone = _outcome(run)
    return [k for k, r in {**kept, **gone}.items() if r["contamination"]]


# ----------------------------------------------------------------------------- reference
SMALL = Params(n_word=6, min_word=3, n_char=12, min_char=5, max_docs=2, margin=30,
               min_fragment=40, max_splits=2)


def _head(path: Path, lines: int) -> list[str]:
    return _read(path).split("\n")[:lines]


@pytest.fixture(scope="module")
def small_case(tmp_path_factory):
    """Short real documents with planted items (one planted in more than ``max_docs``
    documents, one document planted more than ``max_splits`` times, one plant at a document's
    start, one in a document too short to keep a fragment), some with a ``lang``; three
    tasks: GSM8K and JCommonsenseQA as shipped (their first lines) and a custom one. Returns
    the input folder, the task configs and the reference."""
    rng = random.Random(5)
    folder = tmp_path_factory.mktemp("decon-small")
    gsm = _head(DATA / "gsm8k/test.jsonl.gz", 30)
    jcqa = _head(DATA / "jglue/jcommonsenseqa-v1.3/test-v1.3.json.gz", 40)
    jnli = [json.loads(line) for line in _head(DATA / "jglue/jnli-v1.3/test-v1.3.json.gz", 30)]
    (folder / "gsm8k.jsonl").write_text("\n".join(gsm) + "\n", encoding="utf-8")
    (folder / "jcqa.json").write_text("\n".join(jcqa) + "\n", encoding="utf-8")
    captions = [{"pair": r["sentence_pair_id"], "s1": r["sentence1"], "s2": r["sentence2"]}
                for r in jnli]
    (folder / "captions.jsonl").write_text(
        "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in captions), encoding="utf-8")
    gsm_rows = [json.loads(line) for line in gsm]
    jcqa_rows = [json.loads(line) for line in jcqa]
    tasks = [
        Task("gsm8k", [(f"gsm8k.jsonl line {i + 1}", [r["question"],
                                                      f"{r['question']} {r['answer']}"],
                        [r["answer"]]) for i, r in enumerate(gsm_rows)]),
        Task("jcommonsenseqa", [(str(r["q_id"]), [r["question"], " ".join(
            [r["question"], *(r[f"choice{i}"] for i in range(5))])],
            [r[f"choice{i}"] for i in range(5)]) for r in jcqa_rows]),
        Task("captions", [(c["pair"], [c["s1"], c["s2"], f"{c['s1']} {c['s2']}"], [])
                          for c in captions])]
    english, japanese = _hosts()
    english = [{"id": d["id"], "text": d["text"][:700]} for d in english[:24]]
    japanese = [{"id": d["id"], "text": d["text"][:400]} for d in japanese[::40][:16]]
    japanese[2]["text"] = japanese[2]["text"][:60]  # too short to keep a fragment
    english[0]["text"] = gsm_rows[3]["question"] + " " + english[0]["text"]  # at the start
    for doc in english[1:5]:  # in more than max_docs documents: ignored
        doc["text"], _ = plant(doc["text"], gsm_rows[5]["question"], rng, False)
    english[5]["text"] = " ".join(  # split more than max_splits times
        f"{english[5]['text'][k * 150:(k + 1) * 150]} {gsm_rows[10 + k]['question']}"
        for k in range(4))
    for k, doc in enumerate(english[6:12]):
        text = variant(gsm_rows[12 + k]["question"], VARIANTS[k % 5], False, rng)
        doc["text"], _ = plant(doc["text"], text, rng, False)
    for k, doc in enumerate(japanese[:8]):
        row = jcqa_rows[k]
        item = "\n".join([row["question"], *(row[f"choice{i}"] for i in range(5))])
        if k % 2:
            item = captions[k]["s1"] + captions[k]["s2"]
        doc["text"], _ = plant(doc["text"], variant(item, VARIANTS[k % 5], True, rng), rng, True)
    for doc, lang in zip(english[::3] + japanese[::3], ["en", "ja-JP", None, "EN_us"] * 9,
                         strict=False):
        doc["lang"] = lang
    japanese[1]["lang"] = "en"  # declared English: matched by words, its plant is not found
    docs = english + japanese
    write_parts(folder, [docs[0::2], docs[1::2]])
    configs = [{"name": "gsm8k", "path": str(folder / "gsm8k.jsonl")},
               {"name": "jcommonsenseqa", "path": str(folder / "jcqa.json")},
               {"name": "captions", "path": str(folder / "captions.jsonl"),
                "fields": ["s1", "s2"], "id_field": "pair"}]
    return folder, configs, reference(docs, tasks, SMALL)


def test_output_equals_the_reference_implementation(small_case, tmp_path):
    folder, configs, expected = small_case
    p = SMALL
    run = tmp_path / "run"
    Pipeline([ReadJsonl(path=f"{folder}/part-*.jsonl"),
              Decontaminate(tasks=configs, ngram_words=p.n_word, min_words=p.min_word,
                            ngram_chars=p.n_char, min_chars=p.min_char, max_docs=p.max_docs,
                            margin=p.margin, min_fragment=p.min_fragment,
                            max_splits=p.max_splits),
              WriteParquet()]).run(output=run, executor="local", progress=False)
    kept, gone = _outcome(run)
    assert {k: r["text"] for k, r in kept.items()} == expected["kept"]
    assert {k: r["removed_because"] for k, r in gone.items()} == expected["removed"]
    spans = {k: [(s["task"], s["item"], s["start"], s["end"]) for s in r["contamination"]]
             for k, r in {**kept, **gone}.items() if r["contamination"]}
    assert spans == expected["spans"]
    # every branch was taken: cut, dropped both ways, ignored as too frequent, word/char modes
    assert set(expected["removed"].values()) == {"split_too_often", "fragments_too_short"}
    assert len(expected["kept"]) > len(set(expected["kept"]) - set(expected["spans"])) > 0
    assert {s[0] for v in expected["spans"].values() for s in v} == {"gsm8k", "jcommonsenseqa",
                                                                     "captions"}
    stats = assert_accounting(run)["stages"][1]["decontamination"]
    assert stats["ngrams_ignored_frequent"] > 0
    assert 0 < stats["char_mode_documents"] < len(kept) + len(gone)


# ----------------------------------------------------------------------------- restart
PHASES = ["index", "match", "frequency", "cut", "remove"]


def _small_pipeline(folder: Path, configs: list[dict]) -> Pipeline:
    """Its whole work folder kept after the stage: the restart tests cut it as a kill would."""
    p = SMALL
    return Pipeline([ReadJsonl(path=f"{folder}/part-*.jsonl"),
                     Decontaminate(tasks=configs, ngram_words=p.n_word, min_words=p.min_word,
                                   ngram_chars=p.n_char, min_chars=p.min_char,
                                   max_docs=p.max_docs, margin=p.margin,
                                   min_fragment=p.min_fragment, max_splits=p.max_splits),
                     WriteParquet()], keep_work=True)


@pytest.fixture(scope="module")
def small_run(small_case, tmp_path_factory, dask_scheduler):
    folder, configs, _ = small_case
    run = tmp_path_factory.mktemp("decon-small-run") / "run"
    _small_pipeline(folder, configs).run(output=run, scheduler=dask_scheduler, progress=False)
    return run


@pytest.mark.parametrize("cut", PHASES)
def test_a_run_killed_in_any_phase_resumes_to_the_same_output(cut, small_case, small_run,
                                                              tmp_path, dask_scheduler):
    """As after a kill in phase ``cut``: half its tasks done, later phases not committed,
    outputs after the barrier missing. Phases before ``cut`` are not redone."""
    folder, configs, _ = small_case
    run = tmp_path / "run"
    shutil.copytree(small_run, run)
    work = run / "_work" / "segment-01"
    for marker in sorted((work / cut / "_done").glob("*.json"))[::2]:
        marker.unlink()
    for later in PHASES[PHASES.index(cut) + 1:]:
        shutil.rmtree(work / later / "_done")
    shutil.rmtree(run / "write_parquet")
    shutil.rmtree(run / "_manifests" / "segment-02")
    (run / "stats.json").unlink()
    index_written = (work / "index" / "long_keys.npy").stat().st_mtime_ns
    _small_pipeline(folder, configs).run(output=run, scheduler=dask_scheduler, progress=False)
    outputs = {p.name: p.read_bytes() for p in sorted((run / "write_parquet").iterdir())}
    assert outputs == {p.name: p.read_bytes()
                       for p in sorted((small_run / "write_parquet").iterdir())}
    assert _outcome(run) == _outcome(small_run)
    assert ((work / "index" / "long_keys.npy").stat().st_mtime_ns == index_written) \
        == (cut != "index")
    stats = assert_accounting(run)["stages"][1]["decontamination"]
    reference = json.loads((small_run / "stats.json").read_text())["stages"][1]
    assert {k: v for k, v in stats.items() if k != "index"} == \
        {k: v for k, v in reference["decontamination"].items() if k != "index"}
