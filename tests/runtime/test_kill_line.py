"""line_dedup killed with SIGKILL (driver, scheduler and workers) inside each of its phases
(hash, count, rewrite, the shared removal), then run again with the same command, gives the
uninterrupted run's bytes."""

from __future__ import annotations

import pytest

from tests.conftest import assert_accounting
from tests.runtime import killing

SHARDS, BUCKETS = 8, 8
POINTS = {
    "hash": killing.in_phase(1, "hash", SHARDS, SHARDS // 4),
    "count": killing.in_phase(1, "count", BUCKETS, BUCKETS // 4),
    "rewrite": killing.in_phase(1, "rewrite", SHARDS, SHARDS // 4),
    "remove": killing.in_phase(1, "remove", SHARDS, SHARDS // 4),
}


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    base = tmp_path_factory.mktemp("kill-line")
    inputs = killing.write_inputs(base / "in", SHARDS, copies=2)
    config = killing.dedup_config(
        base, inputs, f"{{type: line_dedup, unit: paragraph, buckets: {BUCKETS}}}")
    reference = killing.reference_run(config, base / "run", base / "reference", base / "ref.log")
    facts = killing.stats(reference)["stages"][2]["line_dedup"]
    assert facts["units_removed"] > 0 and facts["documents_changed"] > 0
    return config, base / "run", reference


@pytest.mark.parametrize("point", list(POINTS))
def test_line_dedup_killed_in_a_phase_resumes_to_identical_bytes(point, case, tmp_path):
    config, run_dir, reference = case
    killing.kill_and_resume(config, run_dir, POINTS[point], tmp_path / "run.log", reference)
    assert killing.differences(run_dir, reference) == []
    assert_accounting(run_dir)
