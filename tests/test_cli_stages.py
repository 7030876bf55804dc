"""`curate stages` lists every stage type with a summary; `curate stages TYPE` shows its
parameters; an unknown type is bad usage with a suggestion; `curate --version`."""

from __future__ import annotations

import subprocess
import sys

import curator
from curator.stages import BUILTIN
from tests.conftest import ROOT


def curate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "curator.cli", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=60)


def test_stages_lists_every_type_with_its_summary():
    result = curate("stages")
    assert result.returncode == 0, result.stderr
    rows = {line.split()[0]: line for line in result.stdout.splitlines()}
    assert set(rows) == set(BUILTIN)  # the test process registers stages of its own
    assert "Keep documents with `min_chars <= len(text) <= max_chars`" in rows["length_filter"]
    assert all(len(line.split(maxsplit=1)) == 2 for line in rows.values())


def test_stages_type_shows_parameters_with_types_defaults_and_help():
    result = curate("stages", "fuzzy_dedup")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("fuzzy_dedup: Remove near-duplicates")
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines()[2:] if line}
    assert rows["threshold"][1:3] == ["float", "0.8"]
    assert rows["device"][1:3] == ["cpu|gpu|auto", "'auto'"]
    assert rows["ngram"][1:5] == ["int", "|", "None", "None"]
    assert "Component rounds before giving up." in " ".join(rows["max_rounds"])
    required = curate("stages", "read_jsonl").stdout
    assert any(line.split()[:5] == ["path", "str", "|", "list[str]", "required"]
               for line in required.splitlines())


def test_unknown_stage_type_is_bad_usage_with_a_suggestion():
    result = curate("stages", "fuzy_dedup")
    assert result.returncode == 2
    assert result.stderr.splitlines() == ["error: unknown stage type 'fuzy_dedup'; "
                                          "did you mean 'fuzzy_dedup'?"]


def test_version():
    result = curate("--version")
    assert result.returncode == 0 and result.stdout == f"curate {curator.__version__}\n"
