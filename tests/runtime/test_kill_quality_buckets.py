"""quality_buckets killed with SIGKILL (driver, scheduler and workers) inside each of its phases
(scores, cutpoints, the shared removal), then run again with the same command, gives the
uninterrupted run's bytes."""

from __future__ import annotations

import json
import random

import pytest

from tests.conftest import assert_accounting
from tests.runtime import killing

SHARDS = 8
POINTS = {
    "scores": killing.in_phase(1, "scores", SHARDS, SHARDS // 4),
    "cutpoints": killing.in_phase(1, "cutpoints", 1, 1),
    "remove": killing.in_phase(1, "remove", SHARDS, SHARDS // 4),
}


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    base = tmp_path_factory.mktemp("kill-buckets")
    rng = random.Random(7)
    (base / "in").mkdir()
    for n in range(SHARDS):
        with open(base / "in" / f"s-{n}.jsonl", "w", encoding="utf-8") as f:
            for k in range(300):
                f.write(json.dumps({"id": f"{n}-{k}", "text": "word " * rng.randint(1, 200),
                                    "lang": rng.choice(["en", "ja"]),
                                    "edu": round(rng.random() * 5, 2),
                                    "dclm": rng.random()}) + "\n")
    config = base / "pipeline.yaml"
    config.write_text(f"""
name: kill
batch_bytes: 65536
executor: {{type: dask, workers: 2, processes: true}}
stages:
  - {{type: read_jsonl, path: "{base / 'in'}/*.jsonl"}}
  - {{type: quality_buckets, columns: [edu, dclm], by: lang, top_fraction: 0.5}}
  - {{type: write_parquet, row_group_rows: 50}}
""")
    reference = killing.reference_run(config, base / "run", base / "reference", base / "ref.log")
    facts = killing.stats(reference)["stages"][1]["quality_buckets"]
    assert set(facts["cutpoints"]["edu"]) == {"en", "ja"}
    return config, base / "run", reference


@pytest.mark.parametrize("point", list(POINTS))
def test_quality_buckets_killed_in_a_phase_resumes_to_identical_bytes(point, case, tmp_path):
    config, run_dir, reference = case
    killing.kill_and_resume(config, run_dir, POINTS[point], tmp_path / "run.log", reference)
    assert killing.differences(run_dir, reference) == []
    assert_accounting(run_dir)
