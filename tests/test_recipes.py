"""The quality-selection recipes in pipelines/ as their headers run them: ja_edu.yaml end to end
on real Japanese text (JaQuAD's Wikipedia paragraphs, mC4-ja snippets) with the classifier its
header trains, the AUC on the held-out good/bad labels, kept and removed examples in the
report (the header's commands are the ones the test runs, parsed from the file); fineweb_edu,
dclm and nemotron_cc.yaml unchanged but for --set, on tiny stand-ins of their published models
(tests/stages/quality_models.py, a fastText model trained here) over real English paragraphs
and Japanese ones no classifier scores."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import ROOT, assert_accounting, sample_documents

RECIPES = ("ja_edu",)
STAND_IN = ("fineweb_edu", "dclm", "nemotron_cc")


def header_commands(config: Path) -> list[list[str]]:
    """The shell commands of a pipeline's header comment (``#   python ...`` / ``#   curate
    ...``, backslash continuations joined), split as a shell would."""
    lines, commands = config.read_text(encoding="utf-8").splitlines(), []
    k = 0
    while k < len(lines) and lines[k].startswith("#"):
        text = lines[k][1:].strip()
        if re.match(r"(python|curate) ", text):
            while text.endswith("\\"):
                k += 1
                text = text[:-1] + " " + lines[k][1:].strip()
            commands.append(shlex.split(text))
        k += 1
    return commands


def _run(args: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    if args[0] == "python":
        args = [sys.executable, *[str(ROOT / a) if a.endswith(".py") else a for a in args[1:]]]
    elif args[0] == "curate":
        args = [sys.executable, "-m", "curator.cli", *args[1:]]
    done = subprocess.run(args, cwd=cwd, text=True, capture_output=True, timeout=timeout)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done


@pytest.fixture(scope="module")
def ja_edu(tmp_path_factory) -> tuple[Path, str]:
    """A working folder where ja_edu.yaml's header commands ran (data built, model trained,
    evaluated), and what the evaluation printed."""
    work = tmp_path_factory.mktemp("ja-edu")
    printed = ""
    commands = header_commands(ROOT / "pipelines" / "ja_edu.yaml")
    assert [c[:3] for c in commands] == [["python", "pipelines/ja_edu_data.py", "--output"],
                                         ["curate", "classifier", "train"],
                                         ["curate", "classifier", "eval"],
                                         ["curate", "run", "pipelines/ja_edu.yaml"]]
    for command in commands[:-1]:
        printed += _run(command, work).stdout
    return work, printed


def test_ja_edu_header_trains_a_classifier_and_reports_its_auc(ja_edu):
    _, printed = ja_edu
    auc = float(re.search(r"^AUC (\d\.\d+) on 813 labelled documents", printed, re.M).group(1))
    assert auc > 0.55  # Wikipedia-likeness separates an annotator's good from bad web text a bit
    held_out = re.search(r"held out: \d+ positive, \d+ negative; AUC (\d\.\d+)", printed)
    assert float(held_out.group(1)) > 0.95  # Wikipedia against web text: easy


def test_ja_edu_runs_end_to_end_and_the_report_shows_kept_and_removed(ja_edu):
    work, _ = ja_edu
    _run(["curate", "run", str(ROOT / "pipelines" / "ja_edu.yaml")], work)
    run = work / "runs" / "ja-edu" / "run"
    assert_accounting(run)
    kept = pq.read_table(run / "write_parquet").to_pylist()
    removed = pq.read_table(run / "rejected" / "quality_buckets").to_pylist()
    assert {r["reason"] for r in removed} == {"quality_top_fraction"}
    share = sum(len(r["text"].encode()) for r in kept) / sum(
        len(r["text"].encode()) for r in kept + removed)
    assert 0.5 <= share < 0.6  # the top half by bytes (ties at the cut kept)
    assert min(r["edu_ja"] for r in kept) >= max(r["edu_ja"] for r in removed)
    page = (run / "report.html").read_text(encoding="utf-8")
    kept_block = page[page.index("<h3>kept</h3>"):page.index("<h3>removed by quality_buckets")]
    removed_block = page[page.index("<h3>removed by quality_buckets"):]
    first = sorted((run / "write_parquet").glob("*.parquet"))[0]
    assert f"id={pq.read_table(first).column('id')[0]}" in kept_block
    shown = re.findall(r"id=(mc4-\d+)", removed_block[:removed_block.index("</ul>")])
    assert len(shown) == 3 and set(shown) <= {r["id"] for r in removed}


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_validates_where_its_header_ran(name, ja_edu):
    work, _ = ja_edu
    _run(["curate", "validate", str(ROOT / "pipelines" / f"{name}.yaml")], work)


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory) -> dict[str, str]:
    """Input parts (real English and Japanese paragraphs with id, text, lang), tiny stand-ins of
    the published models and a tokenizer: the --set values the recipes run with here."""
    from tests.stages import quality_models as qm

    work = tmp_path_factory.mktemp("recipes")
    docs = []
    for d in sample_documents():
        lang = "ja" if d["id"][0].isdigit() else "en"
        blocks = [b.strip() for b in d["text"].split("\n\n" if lang == "en" else "\n")]
        docs += [{"id": f"{d['id']}#{k}", "text": b[:2000], "lang": lang}
                 for k, b in enumerate(blocks) if len(b) >= 300][:4]
    (work / "in").mkdir()
    pq.write_table(pa.Table.from_pylist(docs), work / "in" / "part-0.parquet")
    english = [d["text"] for d in docs if d["lang"] == "en"]
    fineweb = qm.fineweb_edu_model(work / "fineweb-edu", english)
    for name, texts in (("positive", english[::2]), ("negative", english[1::2])):
        with open(work / f"{name}.jsonl", "w", encoding="utf-8") as f:
            f.writelines(json.dumps({"text": t}) + "\n" for t in texts)
    _run(["curate", "classifier", "train", "--positive", str(work / "positive.jsonl"),
          "--negative", str(work / "negative.jsonl"), "--output", str(work / "dclm.bin"),
          "--dim", "8", "--bucket", "5000"], work)
    _run(["curate", "tokenizer", "train", str(ROOT / "data/sample/inaugural.jsonl.gz"),
          "--vocab-size", "1024", "--output", str(work / "tokenizer")], work)
    return {"read_parquet.path": str(work / "in" / "*.parquet"), "fineweb_edu.model": fineweb,
            "mixtral_edu.model": fineweb, "nemotron_edu.model": fineweb,
            "dclm.model": str(work / "dclm.bin"),
            "tokenize.tokenizer": str(work / "tokenizer" / "tokenizer.json"),
            "work": str(work), "english": str(len(english)), "documents": str(len(docs))}


def _recipe(name: str, stand_ins: dict[str, str], command: str = "run") -> Path:
    config = ROOT / "pipelines" / f"{name}.yaml"
    stages = {s.get("name", s["type"]) for s in yaml.safe_load(config.read_text())["stages"]}
    sets = [f"--set={key}={value}" for key, value in stand_ins.items()
            if key.split(".")[0] in stages]
    out = Path(stand_ins["work"]) / name
    extra = ["--output", str(out)] if command == "run" else []
    _run(["curate", command, str(config), *sets, *extra], ROOT)
    return out


@pytest.mark.parametrize("name", STAND_IN)
def test_recipe_validates_with_stand_ins(name, stand_ins):
    _recipe(name, stand_ins, "validate")


def test_fineweb_edu_keeps_int_score_3_and_up(stand_ins):
    run = _recipe("fineweb_edu", stand_ins)
    assert_accounting(run)
    kept = pq.read_table(run / "write_parquet").to_pylist()
    removed = pq.read_table(run / "rejected" / "fineweb_edu").to_pylist()
    assert removed and {r["reason"] for r in removed} == {"low_quality"}
    english = [r for r in kept if r["lang"] == "en"]
    assert english and all(r["edu_int"] >= 3 for r in english)
    assert all(r["edu"] is None for r in kept if r["lang"] == "ja")  # not scored, kept


def test_dclm_keeps_the_top_tenth_of_english(stand_ins):
    run = _recipe("dclm", stand_ins)
    assert_accounting(run)
    kept = pq.read_table(run / "write_parquet").to_pylist()
    removed = pq.read_table(run / "rejected" / "quality_buckets", columns=["id"]).to_pylist()
    english = [r for r in kept if r["lang"] == "en"]
    assert 1 <= len(english) < 0.25 * int(stand_ins["english"])
    assert len(english) + len(removed) == int(stand_ins["english"])  # Japanese is not judged
    stats = json.loads((run / "stats.json").read_text())
    facts = next(s for s in stats["stages"] if s["type"] == "quality_buckets")["quality_buckets"]
    assert min(r["dclm"] for r in english) >= facts["top"]["dclm"][""][0]
    assert facts["unscored"] == int(stand_ins["documents"]) - int(stand_ins["english"])


def test_nemotron_cc_blends_each_quality_level_with_its_repeats(stand_ins):
    run = _recipe("nemotron_cc", stand_ins)
    assert_accounting(run)
    rows = pq.read_table(run / "write_parquet").to_pylist()
    assert len(rows) == int(stand_ins["documents"])  # nothing removed, every level weighted
    for r in rows:
        buckets = [r[f"{c}_bucket"] for c in ("edu_mixtral", "edu_nemotron", "dclm")]
        known = [b for b in buckets if b is not None]
        assert r["quality_bucket"] == (max(known) if known else None)
    blend = json.loads((run / "tokens" / "blend.json").read_text())["splits"]["train"]
    groups = {f"{r['lang']}/{r['quality'] or 'none'}" for r in rows}
    assert set(blend["sources"]) == groups
    stage = json.loads((run / "stats.json").read_text())["stages"][-1]
    repeats = {"en/high": 3, "en/medium_high": 2, "en/medium": 1, "en/medium_low": 0.5,
               "en/low": 0.25}
    assert stage["epochs"] == pytest.approx({g: repeats.get(g, 1.0) for g in groups}, rel=1e-3)


def test_every_recipe_is_tested_here():
    from tests.test_pipelines import RECIPES as EXCLUDED

    assert set(EXCLUDED) == {*RECIPES, *STAND_IN}
