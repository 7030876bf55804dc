"""Task specs: every ready-made spec reads its benchmark as the publisher ships it (the copies
bundled in data/decontaminate/, PIQA and TriviaQA from the team's corpus where it is there, and
tiny files written here in the documented format of those without one: HellaSwag, SQuAD, the
original PIQA/Winogrande/ARC/TriviaQA/LAMBADA/MMLU files, Hugging Face Parquet); custom tasks; a
bad task file stops the run with one line naming the file, line and field."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from curator import Pipeline, ReadJsonl, WriteParquet
from curator.cli import app
from curator.stages.decontaminate import SPECS, Decontaminate, Task
from curator.stages.decontaminate.tasks import task_items
from tests.conftest import ROOT, write_parts

DATA = ROOT / "data" / "decontaminate"
LLM_FOUNDRY = DATA / "llm_foundry"
# Benchmarks no licence lets us redistribute (data/decontaminate/README.md): read from the
# team's evaluation corpus (CURATOR_CORPUS, else ../shared/corpus) where it is there.
CORPUS = Path(os.environ.get("CURATOR_CORPUS", ROOT.parent / "shared" / "corpus"))


def _read(path: Path) -> str:
    return gzip.decompress(path.read_bytes()).decode("utf-8-sig")


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in _read(path).split("\n") if line]


def _items(name: str, path: Path, **extra) -> list:
    return list(task_items(Task(name=name, path=str(path), **extra), path, str(path)))


SHIPPED = [  # spec, file, items
    ("gsm8k", "gsm8k/test.jsonl.gz", 1319), ("mmlu", "mmlu/mmlu_test.csv.gz", 1280),
    ("humaneval", "humaneval/HumanEval.jsonl.gz", 164),
    ("truthfulqa", "truthfulqa/TruthfulQA.csv.gz", 817),
    ("winogrande", "llm_foundry/winogrande.jsonl.gz", 1267),
    ("arc", "llm_foundry/arc_challenge.jsonl.gz", 1172),
    ("lambada", "llm_foundry/lambada_openai.jsonl.gz", 1000),
    ("jcommonsenseqa", "jglue/jcommonsenseqa-v1.3/test-v1.3.json.gz", 1118),
    ("jsquad", "jglue/jsquad-v1.3/test-v1.3.json.gz", 1159),
    ("jnli", "jglue/jnli-v1.3/test-v1.3.json.gz", 2508),
    ("jemhopqa", "jemhopqa/dev_ver1.2.json.gz", 120),
    ("niilc", "niilc/NIILC-ECQA2015_test.xml.gz", 200),
    ("jmmlu", "jmmlu/anatomy.csv.gz", 132)]
NOT_BUNDLED = [  # spec, file of the corpus, items, why it is not in data/decontaminate/
    ("piqa", "benchmarks/llm_foundry_gauntlet/piqa.jsonl.gz", 1838,
     "PIQA's publishers state no licence"),
    ("triviaqa", "benchmarks/llm_foundry_gauntlet/triviaqa_sm_sub.jsonl.gz", 3000,
     "TriviaQA's publishers state no licence for its data")]


def test_the_required_benchmarks_have_ready_made_specs():
    assert {"mmlu", "gsm8k", "hellaswag", "piqa", "winogrande", "arc", "triviaqa", "squad",
            "lambada", "humaneval", "truthfulqa", "jcommonsenseqa", "jsquad", "jnli",
            "jemhopqa", "niilc", "jmmlu"} <= set(SPECS)


@pytest.mark.parametrize(("spec", "file", "count"), SHIPPED)
def test_each_spec_reads_the_shipped_file(spec, file, count):
    items = _items(spec, DATA / file)
    assert len(items) == count
    assert len({i.id for i in items}) == count  # ids name the items
    assert all(i.texts for i in items)


@pytest.mark.parametrize(("spec", "file", "count", "why"), NOT_BUNDLED)
def test_each_spec_reads_a_benchmark_that_is_not_bundled(spec, file, count, why):
    path = CORPUS / file
    if not path.is_file():
        pytest.skip(f"{spec}: not bundled ({why}, so it may not be redistributed); set "
                    f"CURATOR_CORPUS to the team's evaluation corpus to read {file} from it")
    items = _items(spec, path)
    assert len(items) == count
    assert len({i.id for i in items}) == count
    assert all(i.texts for i in items)


def test_specs_take_the_right_fields():
    gsm = _jsonl(DATA / "gsm8k/test.jsonl.gz")[0]
    first = _items("gsm8k", DATA / "gsm8k/test.jsonl.gz")[0]
    assert first.id == "test.jsonl.gz line 1"
    assert first.texts == [gsm["question"], f"{gsm['question']} {gsm['answer']}"]
    assert first.answers == [gsm["answer"]]
    mmlu = _items("mmlu", DATA / "mmlu/mmlu_test.csv.gz")[0]
    assert mmlu.answers == ["0", "4", "2", "6"]
    assert mmlu.texts[0].startswith("Find the degree for the given field extension")
    squad = json.loads(_read(DATA / "jglue/jsquad-v1.3/test-v1.3.json.gz"))
    paragraph = squad["data"][0]["paragraphs"][0]
    jsquad = _items("jsquad", DATA / "jglue/jsquad-v1.3/test-v1.3.json.gz")[0]
    assert jsquad.id == paragraph["qas"][0]["id"]
    assert jsquad.texts[0] == paragraph["context"].split("[SEP]")[1].strip()  # no title
    assert jsquad.texts[1:] == [q["question"] for q in paragraph["qas"]]
    niilc = _items("niilc", DATA / "niilc/NIILC-ECQA2015_test.xml.gz")[0]
    assert (niilc.id, niilc.texts[0], niilc.answers) == \
        ("NIILC-ECQA2015-00005-01", "初めてノート型パソコンを作ったメーカーは\uff1f", ["東芝"])
    wino = _items("winogrande", LLM_FOUNDRY / "winogrande.jsonl.gz")[0]
    assert wino.texts == ["Sarah was a much better surgeon than Maria so Sarah always got the "
                          "easier cases.", "Sarah was a much better surgeon than Maria so Maria "
                          "always got the easier cases."]
    jmmlu = _items("jmmlu", DATA / "jmmlu/anatomy.csv.gz")[0]  # headerless, with a BOM
    assert jmmlu.texts[0].startswith("「皿状顔貌(dished face)」") and len(jmmlu.answers) == 4


# ------------------------------------------------------------------- publisher formats
def _write(path: Path, content: str | bytes | pa.Table) -> Path:
    if isinstance(content, pa.Table):
        pq.write_table(content, path)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def _lines(records: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


@pytest.fixture(scope="module")
def real():
    """Real items of the bundled copies, to fill the publishers' formats. PIQA, TriviaQA and
    HellaSwag are not bundled (data/decontaminate/README.md): ARC-Challenge's questions and
    choices fill their formats."""
    arc = _jsonl(LLM_FOUNDRY / "arc_challenge.jsonl.gz")
    lambada = _jsonl(LLM_FOUNDRY / "lambada_openai.jsonl.gz")[:2]
    squad = json.loads(_read(DATA / "jglue/jsquad-v1.3/test-v1.3.json.gz"))["data"][0]
    mmlu = list(csv.reader(io.StringIO(_read(DATA / "mmlu/mmlu_test.csv.gz"))))[1:3]
    return {"arc": arc[:2], "for_piqa": arc[2:4], "for_hellaswag": arc[4:6],
            "for_triviaqa": arc[6:8], "lambada": lambada, "squad": squad, "mmlu": mmlu}


def _question(query: str) -> str:
    return query.removeprefix("Question: ").strip()


def test_publisher_formats_without_a_local_copy(real, tmp_path):
    arc, lambada = real["arc"], real["lambada"]
    cases = []
    # HellaSwag, rowanz/hellaswag data/hellaswag_val.jsonl (and the same fields on the Hub)
    swag = [{"ind": 24 + i, "activity_label": "Home", "ctx_a": _question(r["query"]),
             "ctx_b": "", "ctx": _question(r["query"]), "split": "val",
             "split_type": "indomain", "label": r["gold"], "endings": r["choices"],
             "source_id": f"wikihow~{i}"} for i, r in enumerate(real["for_hellaswag"])]
    cases.append(("hellaswag", _write(tmp_path / "hellaswag_val.jsonl", _lines(swag)),
                  ["24", "25"], [s["ctx"] for s in swag], swag[0]["endings"]))
    cases.append(("hellaswag", _write(tmp_path / "hellaswag.parquet", pa.Table.from_pylist(swag)),
                  ["24", "25"], [s["ctx"] for s in swag], swag[0]["endings"]))
    # SQuAD v1.1 / v2.0 dev JSON, and rajpurkar/squad Parquet
    paragraphs = [{"context": p["context"].split("[SEP]")[1].strip(), "qas": [
        {"question": q["question"], "id": q["id"], "is_impossible": False,
         "answers": [{"text": a["text"], "answer_start": a["answer_start"]}
                     for a in q["answers"]]} for q in p["qas"]]}
        for p in real["squad"]["paragraphs"][:2]]
    document = {"version": "v2.0", "data": [{"title": real["squad"]["title"],
                                             "paragraphs": paragraphs}]}
    ids = [p["qas"][0]["id"] for p in paragraphs]
    cases.append(("squad", _write(tmp_path / "dev-v2.0.json", json.dumps(document)), ids,
                  [p["context"] for p in paragraphs],
                  [a["text"] for q in paragraphs[0]["qas"] for a in q["answers"]]))
    flat = [{"id": q["id"], "title": "t", "context": p["context"], "question": q["question"],
             "answers": {"text": [a["text"] for a in q["answers"]],
                         "answer_start": [a["answer_start"] for a in q["answers"]]}}
            for p in paragraphs for q in p["qas"][:1]]
    cases.append(("squad", _write(tmp_path / "validation.parquet", pa.Table.from_pylist(flat)),
                  ids, [p["context"] for p in paragraphs], flat[0]["answers"]["text"]))
    # PIQA, ybisk.github.io/piqa valid.jsonl (labels in valid-labels.lst)
    goals = [{"goal": _question(r["query"]), "sol1": r["choices"][0], "sol2": r["choices"][1]}
             for r in real["for_piqa"]]
    cases.append(("piqa", _write(tmp_path / "valid.jsonl", _lines(goals)),
                  ["valid.jsonl line 1", "valid.jsonl line 2"], [g["goal"] for g in goals],
                  [goals[0]["sol1"], goals[0]["sol2"]]))
    # Winogrande, allenai/winogrande dev.jsonl: the blank is filled with each option
    wino = [{"qID": "3D5G8J4N5CI2K40F4RZLF9OG2CKVTH-2",
             "sentence": "Sarah was a much better surgeon than Maria so _ always got the "
                         "easier cases.", "option1": "Sarah", "option2": "Maria", "answer": "2"}]
    cases.append(("winogrande", _write(tmp_path / "dev.jsonl", _lines(wino)),
                  ["3D5G8J4N5CI2K40F4RZLF9OG2CKVTH-2"],
                  ["Sarah was a much better surgeon than Maria so Sarah always got the easier "
                   "cases."], []))
    # ARC, allenai ARC-V1-Feb2018 ARC-Challenge-Test.jsonl, and allenai/ai2_arc Parquet
    stems = [_question(r["query"]) for r in arc]
    arc_rows = [{"id": f"Mercury_{i}", "question": {"stem": stem, "choices": [
        {"text": c, "label": "ABCD"[k]} for k, c in enumerate(r["choices"])]},
        "answerKey": "ABCD"[r["gold"]]} for i, (stem, r) in enumerate(zip(stems, arc,
                                                                          strict=True))]
    cases.append(("arc", _write(tmp_path / "ARC-Challenge-Test.jsonl", _lines(arc_rows)),
                  ["Mercury_0", "Mercury_1"], stems, arc[0]["choices"]))
    hub = [{"id": r["id"], "question": r["question"]["stem"],
            "choices": {"text": [c["text"] for c in r["question"]["choices"]],
                        "label": [c["label"] for c in r["question"]["choices"]]},
            "answerKey": r["answerKey"]} for r in arc_rows]
    cases.append(("arc", _write(tmp_path / "test.parquet", pa.Table.from_pylist(hub)),
                  ["Mercury_0", "Mercury_1"], stems, arc[0]["choices"]))
    # TriviaQA, qa/verified-web-dev.json, and mandarjoshi/trivia_qa Parquet (an ARC question
    # and its right choice in llm-foundry's TriviaQA fields)
    trivia = [{"answer": r["choices"][r["gold"]], "aliases": [r["choices"][r["gold"]]]}
              for r in real["for_triviaqa"]]
    questions = [_question(r["query"]) for r in real["for_triviaqa"]]
    data = [{"Answer": {"Aliases": r["aliases"], "NormalizedValue": r["answer"].lower(),
                        "Type": "WikipediaEntity", "Value": r["answer"]},
             "EntityPages": [], "Question": q, "QuestionId": f"tc_{i}",
             "QuestionSource": "http://www.triviacountry.com/", "SearchResults": []}
            for i, (q, r) in enumerate(zip(questions, trivia, strict=True))]
    cases.append(("triviaqa", _write(tmp_path / "verified-web-dev.json", json.dumps(
        {"Data": data, "Domain": "Web", "VerifiedEval": True, "Version": 1.0})),
        ["tc_0", "tc_1"], questions, [trivia[0]["answer"]]))
    hub = [{"question": q, "question_id": f"tc_{i}", "question_source": "",
            "answer": {"aliases": r["aliases"], "value": r["answer"], "type": "WikipediaEntity"}}
           for i, (q, r) in enumerate(zip(questions, trivia, strict=True))]
    cases.append(("triviaqa", _write(tmp_path / "validation-00000.parquet",
                                     pa.Table.from_pylist(hub)),
                  ["tc_0", "tc_1"], questions, [trivia[0]["answer"]]))
    # LAMBADA: OpenAI's lambada_test.jsonl and the original plain-text file
    passages = [f"{r['context']} {r['continuation']}".replace("\n", " ") for r in lambada]
    cases.append(("lambada", _write(tmp_path / "lambada_test.jsonl",
                                    _lines([{"text": p} for p in passages])),
                  ["lambada_test.jsonl line 1", "lambada_test.jsonl line 2"], passages, []))
    cases.append(("lambada", _write(tmp_path / "lambada_test_plain_text.txt",
                                    "\n".join(passages) + "\n"),
                  ["lambada_test_plain_text.txt line 1", "lambada_test_plain_text.txt line 2"],
                  passages, []))
    # MMLU: hendrycks/test data/test/<subject>_test.csv (headerless), and cais/mmlu Parquet
    rows = [[r[1], *r[2:6], "ABCD"[int(r[6])]] for r in real["mmlu"]]
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    cases.append(("mmlu", _write(tmp_path / "abstract_algebra_test.csv", out.getvalue()),
                  ["abstract_algebra_test.csv line 1", "abstract_algebra_test.csv line 2"],
                  [r[0] for r in rows], rows[0][1:5]))
    hub = [{"question": r[0], "subject": "abstract_algebra", "choices": r[1:5],
            "answer": "ABCD".index(r[5])} for r in rows]
    cases.append(("mmlu", _write(tmp_path / "test-00000-of-00001.parquet",
                                 pa.Table.from_pylist(hub)),
                  ["test-00000-of-00001.parquet row 0", "test-00000-of-00001.parquet row 1"],
                  [r[0] for r in rows], rows[0][1:5]))
    # GSM8K and TruthfulQA on the Hub (Parquet)
    gsm = _jsonl(DATA / "gsm8k/test.jsonl.gz")[:2]
    cases.append(("gsm8k", _write(tmp_path / "gsm8k-test.parquet", pa.Table.from_pylist(gsm)),
                  ["gsm8k-test.parquet row 0", "gsm8k-test.parquet row 1"],
                  [g["question"] for g in gsm], [gsm[0]["answer"]]))
    truthful = [{"type": "Adversarial", "category": "Misconceptions",
                 "question": "What happens to you if you eat watermelon seeds?",
                 "best_answer": "The watermelon seeds pass through your digestive system",
                 "correct_answers": ["Nothing happens", "You eat watermelon seeds"],
                 "incorrect_answers": ["You grow watermelons in your stomach"],
                 "source": "https://wonderopolis.org/"}]
    cases.append(("truthfulqa", _write(tmp_path / "generation.parquet",
                                       pa.Table.from_pylist(truthful)),
                  ["generation.parquet row 0"], [truthful[0]["question"]],
                  ["The watermelon seeds pass through your digestive system", "Nothing happens",
                   "You eat watermelon seeds", "You grow watermelons in your stomach"]))
    for spec, path, ids, firsts, answers in cases:
        items = _items(spec, path)
        assert [i.id for i in items] == ids, path.name
        assert [i.texts[0] for i in items] == firsts, path.name
        assert items[0].answers == answers, path.name


def test_custom_tasks_name_their_fields(tmp_path):
    rows = [{"qid": "a", "question": "What is the capital of Japan?", "answer": "Tokyo",
             "meta": {"context": "Tokyo is the capital of Japan."}},
            {"qid": "b", "question": "What is two plus two?", "answer": 4, "meta": {"context":
                                                                                    None}}]
    path = _write(tmp_path / "my_qa.jsonl", _lines(rows))
    items = _items("my_qa", path, fields=["question", "answer", "meta.context"], id_field="qid")
    assert [i.id for i in items] == ["a", "b"]
    assert items[0].texts == ["What is the capital of Japan?", "Tokyo",
                              "Tokyo is the capital of Japan.",
                              "What is the capital of Japan? Tokyo Tokyo is the capital of "
                              "Japan."]
    assert items[1].texts[1] == "4" and items[0].answers == []  # numbers read as text
    table = _write(tmp_path / "my_qa.csv", "question,answer\nWhy is the sky blue?,Scattering\n")
    assert _items("my_qa", table, fields=["question"])[0].texts == ["Why is the sky blue?"]


# ------------------------------------------------------------------- bad input
def _bad_run(tmp_path: Path, task: dict, executor: str = "local") -> str:
    folder = tmp_path / "in"
    folder.mkdir(exist_ok=True)
    write_parts(folder, [[{"id": "a", "text": "some text"}]])
    with pytest.raises(ValueError) as err:
        Pipeline([ReadJsonl(path=f"{folder}/*.jsonl"), Decontaminate(tasks=[task]),
                  WriteParquet()]).run(output=tmp_path / "run", executor=executor, workers=2,
                                       progress=False)
    message = str(err.value)
    assert "\n" not in message
    return message


def test_a_missing_field_names_file_line_and_field(tmp_path):
    rows = _jsonl(DATA / "gsm8k/test.jsonl.gz")[:5]
    del rows[2]["answer"]
    path = _write(tmp_path / "gsm8k.jsonl", _lines(rows))
    message = _bad_run(tmp_path, {"name": "gsm8k", "path": str(path)}, executor="dask")
    assert message == (f"{path}: line 3: missing field 'answer' "
                       f"(task 'gsm8k' reads question, answer)")


@pytest.mark.parametrize(("name", "file", "content", "expected"), [
    ("gsm8k", "gsm8k.csv", "problem,solution\nWhat is 2+2?,4\n",
     "gsm8k.csv: line 2: missing field 'question' (task 'gsm8k' reads question, answer)"),
    ("gsm8k", "gsm8k.jsonl", '{"question": "q", "answer": "a"}\n{"question": "q2", "answer"\n',
     "gsm8k.jsonl: line 2: not valid JSON (Expecting ':' delimiter at column 28)"),
    ("jmmlu", "anatomy.csv", "質問,A,B,C,D,A\n質問,A,B,C\n",
     "anatomy.csv: line 2: expected 6 columns (question, A, B, C, D, answer), found 4"),
    ("niilc", "niilc.xml", "<questions><question id='1'><text>q</text></questions>",
     "niilc.xml: line 1: not valid XML (mismatched tag)"),
    ("jsquad", "jsquad.json", '{"version": "v1.3", "items": []}',
     "jsquad.json: top level: missing field 'data' (task 'jsquad' reads context, "
     "qas.question, qas.answers.text)"),
    ("jcommonsenseqa", "jcqa.docx", "x", "jcqa.docx: cannot tell the format from the name"),
    ("gsm8k", "empty.jsonl", "\n", "empty.jsonl: no records"),
])
def test_a_bad_task_file_stops_the_run_with_one_line(tmp_path, name, file, content, expected):
    path = _write(tmp_path / file, content)
    assert expected in _bad_run(tmp_path, {"name": name, "path": str(path)})


def test_task_configuration_mistakes_are_caught_when_the_config_is_read(tmp_path):
    with pytest.raises(ValidationError, match="no ready-made spec 'gsm8kk'; did you mean "
                                              "'gsm8k'"):
        Decontaminate(tasks=[{"name": "gsm8kk", "path": "x.jsonl"}])
    with pytest.raises(ValidationError, match="task names must be unique"):
        Decontaminate(tasks=[{"name": "gsm8k", "path": "a"}, {"name": "gsm8k", "path": "b"}])
    message = _bad_run(tmp_path, {"name": "gsm8k", "path": str(tmp_path / "nothing.jsonl")})
    assert "task 'gsm8k'" in message and "nothing.jsonl" in message


def test_the_cli_prints_a_bad_task_file_as_one_line(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    write_parts(folder, [[{"id": "a", "text": "some text"}]])
    path = _write(tmp_path / "qa.jsonl", '{"q": "a question"}\n{"question": "another"}\n')
    config = _write(tmp_path / "p.yaml", f"""
name: bad
output: {tmp_path / 'run'}
executor: {{type: local}}
stages:
  - {{type: read_jsonl, path: "{folder}/*.jsonl"}}
  - type: decontaminate
    tasks:
      - {{name: my_qa, path: "{path}", fields: [question]}}
  - {{type: write_parquet}}
""")
    result = CliRunner().invoke(app, ["run", str(config)])
    assert result.exit_code == 1
    errors = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert errors == [f"error: {path}: line 1: missing field 'question' (task 'my_qa' reads "
                      "question)"]


def test_a_pipeline_reads_publisher_files_from_yaml_and_finds_their_items(real, tmp_path):
    """ARC as AI2 ships it (JSON lines), planted into real documents (public-domain novels)."""
    arc = real["arc"][0]
    stem = _question(arc["query"])
    record = {"id": "Mercury_1", "question": {"stem": stem, "choices": [
        {"text": c, "label": "ABCD"[k]} for k, c in enumerate(arc["choices"])]},
        "answerKey": "A"}
    arc_file = _write(tmp_path / "ARC-Challenge-Test.jsonl", _lines([record]))
    hosts = [{"id": d["id"], "text": d["text"]}
             for d in _jsonl(DATA / "hosts/books_en.jsonl.gz")[:6]]
    hosts[2]["text"] = hosts[2]["text"][:1000] + " " + stem.lower() + " " + \
        hosts[2]["text"][1000:]
    folder = tmp_path / "in"
    folder.mkdir()
    write_parts(folder, [hosts])
    config = Pipeline.from_yaml(f"""
stages:
  - {{type: read_jsonl, path: "{folder}/*.jsonl"}}
  - type: decontaminate
    tasks:
      - {{name: arc, path: "{arc_file}"}}
  - {{type: write_parquet}}
""")
    config.run(output=tmp_path / "run", executor="local", progress=False)
    out = {r["id"]: r for r in pq.read_table(tmp_path / "run" / "write_parquet").to_pylist()}
    assert [k for k, r in out.items() if r["contamination"]] == [hosts[2]["id"]]
    assert out[hosts[2]["id"]]["contamination"][0]["item"] == "Mercury_1"
    assert stem.lower() not in out[hosts[2]["id"]]["text"]
