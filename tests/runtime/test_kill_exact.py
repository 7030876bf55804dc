"""exact_dedup killed with SIGKILL (driver, scheduler and workers) inside each of its phases, and
between a shard's files and its manifest, and between the stage's record and the trim of its
work folder, then run again with the same command, gives the
uninterrupted run's bytes."""

from __future__ import annotations

import pytest

from tests.conftest import assert_accounting
from tests.runtime import killing

SHARDS, BUCKETS = 24, 32
POINTS = {
    "segment-00": killing.in_shards(0, SHARDS, SHARDS // 4),
    "segment-00-commit": killing.in_shards(0, SHARDS, SHARDS // 4, committing=True),
    "hash": killing.in_phase(1, "hash", SHARDS, SHARDS // 4),
    "group": killing.in_phase(1, "group", BUCKETS, BUCKETS // 4),
    "remove": killing.in_phase(1, "remove", SHARDS, SHARDS // 4),
    "trim": killing.in_trim(1),
    "segment-02": killing.in_shards(2, SHARDS, SHARDS // 4),
}


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    base = tmp_path_factory.mktemp("kill-exact")
    inputs = killing.write_inputs(base / "in", SHARDS, copies=8)
    config = killing.dedup_config(base, inputs, f"{{type: exact_dedup, buckets: {BUCKETS}}}")
    reference = killing.reference_run(config, base / "run", base / "reference", base / "ref.log")
    stats = killing.stats(reference)
    assert stats["stages"][2]["removed"] > 0 and stats["stages"][0]["failed"] > 0
    return config, base / "run", reference


@pytest.mark.parametrize("point", list(POINTS))
def test_exact_dedup_killed_in_a_phase_resumes_to_identical_bytes(point, case, tmp_path):
    config, run_dir, reference = case
    killing.kill_and_resume(config, run_dir, POINTS[point], tmp_path / "run.log", reference)
    assert killing.differences(run_dir, reference) == []
    assert_accounting(run_dir)
