"""SIGKILL during an incremental rerun (two files added between existing ones, a threshold
changed), at ten named points drawn with a fixed seed; the same command then ends with the
bytes a from-scratch run of the final configuration publishes (tests/published.py)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from tests.published import published_differences
from tests.runtime import killing
from tests.runtime.test_incremental import FILES, build_corpus

SEED = 28
POINTS = 10
ADDED = ("f-06.warc.gz", "f-10.warc.gz")


def _config(path: Path, corpus: Path, warcs: Path, min_words: int) -> Path:
    path.write_text(f"""
name: incremental
executor: {{type: dask, workers: 2}}
stages:
  - {{type: read_warc, path: "{warcs}/*.warc.gz"}}
  - {{type: extract_html}}
  - {{type: langid, languages: [en]}}
  - {{type: heuristic_filter, presets: [gopher_quality],
     overrides: {{gopher_quality.min_words: {min_words}}}}}
  - {{type: exact_dedup}}
  - type: decontaminate
    min_words: 8
    tasks: [{{name: speech, path: "{corpus / 'task.jsonl'}", fields: [question]}}]
  - {{type: write_parquet}}
  - {{type: tokenize, tokenizer: "{corpus / 'tok' / 'tokenizer.json'}"}}
""")
    return path


def _candidates() -> list[str]:
    shards = [f"{kind}:segment-00@{k}" for kind in ("shard-commit", "shard-done")
              for k in range(1, FILES + 1)]
    phases = [f"{kind}:{phase}@1" for kind in ("phase-task", "phase-done")
              for phase in ("hash", "group", "index", "match", "cut", "remove")]
    return [*shards, *phases, "finalize:segment-00", "finalize:segment-03",
            "shard-commit:segment-03@1", "shard-done:segment-03@1", "stats"]


@pytest.fixture(scope="module")
def setting(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("kill_incremental")
    (root / "corpus").mkdir()
    corpus = build_corpus(root / "corpus")
    warcs = root / "warcs"
    shutil.copytree(corpus / "warc", warcs)
    for name in ADDED:
        (warcs / name).rename(root / name)
    first = _config(root / "first.yaml", corpus, warcs, 50)
    final = _config(root / "final.yaml", corpus, warcs, 400)
    base = root / "base"
    killing.run(first, base, root / "base.log")
    for name in ADDED:
        (root / name).rename(warcs / name)
    reference = root / "reference"
    killing.run(final, reference, root / "reference.log")
    return {"final": final, "base": base, "reference": reference}


@pytest.mark.parametrize("point", random.Random(SEED).sample(_candidates(), POINTS))
def test_a_killed_incremental_rerun_resumes_to_the_from_scratch_bytes(setting, point,
                                                                      tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(setting["base"], run_dir)
    log = tmp_path / "run.log"
    halt_dir = tmp_path / "halt"
    proc = killing.start(setting["final"], run_dir, log, halt=point, halt_dir=halt_dir)
    halted = killing.halt_and_kill(proc, halt_dir, point, log)
    name, _, nth = point.partition("@")
    assert (halted["point"], halted["arrival"]) == (name, int(nth or 1))
    assert not (run_dir / "stats.json").exists() or \
        (run_dir / "stats.json").stat().st_mtime_ns == \
        (setting["base"] / "stats.json").stat().st_mtime_ns
    killing.run(setting["final"], run_dir, log)
    assert published_differences(run_dir, setting["reference"]) == []
    assert killing.temporaries(run_dir) == []
