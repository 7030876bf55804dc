"""fuzzy_dedup killed with SIGKILL (driver, scheduler and workers) inside each of its phases, then
run again with the same command, gives the uninterrupted run's bytes."""

from __future__ import annotations

import pytest

from tests.conftest import assert_accounting
from tests.published import published
from tests.runtime import killing

POINTS = {p.name.split("@")[0]: p for p in killing.fuzzy_points()}


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    base = tmp_path_factory.mktemp("kill-fuzzy")
    config = killing.fuzzy_case(base)
    reference = killing.reference_run(config, base / "run", base / "reference", base / "ref.log")
    stats = killing.stats(reference)
    assert stats["stages"][2]["removed"] > 0 and stats["stages"][0]["failed"] > 0
    assert stats["stages"][2]["dedup"]["component_rounds"] == 3
    return config, base / "run", reference


@pytest.mark.parametrize("point", ["segment-00", "signatures", "edges", "cc-r001", "cc-r002",
                                   "remove", "segment-02"])
def test_fuzzy_dedup_killed_in_a_phase_resumes_to_identical_bytes(point, case, tmp_path):
    config, run_dir, reference = case
    killing.kill_and_resume(config, run_dir, POINTS[point], tmp_path / "run.log", reference)
    assert killing.differences(run_dir, reference) == []
    assert_accounting(run_dir)


@pytest.fixture(scope="module")
def one_task_case(tmp_path_factory, case):
    """The default for this small graph (one ``components`` task): its output is the rounds'."""
    base = tmp_path_factory.mktemp("kill-fuzzy-one-task")
    config = killing.fuzzy_case(base, rounds=False)
    reference = killing.reference_run(config, base / "run", base / "reference", base / "ref.log")
    stats = killing.stats(reference)
    assert list(stats["stages"][2]["phases"]) == ["signatures", "edges", "components", "remove"]
    assert published(reference) == published(case[2]) != {}  # the published files alone
    return config, base / "run", reference


@pytest.mark.parametrize("point", ["edges", "remove"])
def test_one_task_components_killed_resume_to_identical_bytes(point, one_task_case, tmp_path):
    config, run_dir, reference = one_task_case
    killing.kill_and_resume(config, run_dir, POINTS[point], tmp_path / "run.log", reference)
    assert killing.differences(run_dir, reference) == []
    assert_accounting(run_dir)
