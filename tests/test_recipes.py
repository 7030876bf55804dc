"""The quality-selection recipes in pipelines/ as their headers run them: ja_edu.yaml end to end
on real Japanese text (JaQuAD's Wikipedia paragraphs, mC4-ja snippets) with the classifier its
header trains, the AUC on the held-out good/bad labels, kept and removed examples in the
report. The header's commands are the ones the test runs (parsed from the file)."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conftest import ROOT, assert_accounting

RECIPES = ("ja_edu",)


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
    assert f"kept ({len(kept):,})" in page
    assert f"removed by quality_buckets ({len(removed):,}, 0 without text kept)" in page
    first_kept = min(r["id"] for r in kept)
    assert f"id={first_kept}" in page


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_validates_where_its_header_ran(name, ja_edu):
    work, _ = ja_edu
    _run(["curate", "validate", str(ROOT / "pipelines" / f"{name}.yaml")], work)
