"""The GPU path of both dedup stages: a run on a GPU worker SIGKILLed inside a phase and run
again gives the uninterrupted GPU run's bytes, and those are the CPU run's (the same clusters,
the same survivors). Skipped without a CUDA device."""

from __future__ import annotations

import pytest

from curator.kernels.minhash_gpu import gpu_available
from tests.conftest import assert_accounting
from tests.published import published
from tests.runtime import killing

pytestmark = pytest.mark.skipif(not gpu_available(), reason="needs CuPy and a CUDA device")

POINTS = {p.name.split("@")[0]: p for p in killing.fuzzy_points()}
EXACT = "{type: exact_dedup, buckets: 8, device: %s}"


def _references(base, config_of) -> tuple:
    refs = {}
    for device in ("cpu", "gpu"):
        folder = base / device
        folder.mkdir()
        config = config_of(folder, device)
        refs[device] = (config, folder / "run",
                        killing.reference_run(config, folder / "run", folder / "reference",
                                              folder / "ref.log"))
    return refs


@pytest.fixture(scope="module")
def fuzzy(tmp_path_factory):
    return _references(tmp_path_factory.mktemp("kill-gpu-fuzzy"), killing.fuzzy_case)


@pytest.fixture(scope="module")
def exact(tmp_path_factory):
    def config_of(folder, device):
        inputs = killing.write_inputs(folder / "in", 8, copies=3)
        return killing.dedup_config(folder, inputs, EXACT % device)
    return _references(tmp_path_factory.mktemp("kill-gpu-exact"), config_of)


def test_the_gpu_runs_publish_the_cpu_runs_bytes(fuzzy, exact):
    for refs in (fuzzy, exact):
        gpu_stats = killing.stats(refs["gpu"][2])
        assert gpu_stats["stages"][2]["dedup"]["device"] == "gpu"
        assert gpu_stats["stages"][2]["removed"] > 0
        cpu, gpu = published(refs["cpu"][2]), published(refs["gpu"][2])
        assert cpu.keys() == gpu.keys()
        differ = [name for name in cpu if name != "stats.json" and cpu[name] != gpu[name]]
        assert differ == []


@pytest.mark.parametrize("point", ["signatures", "edges", "remove"])
def test_fuzzy_on_the_gpu_killed_in_a_phase_resumes_to_identical_bytes(point, fuzzy, tmp_path):
    config, run_dir, reference = fuzzy["gpu"]
    killing.kill_and_resume(config, run_dir, POINTS[point], tmp_path / "run.log", reference)
    assert killing.differences(run_dir, reference) == []
    assert_accounting(run_dir)


@pytest.mark.parametrize("phase", ["hash", "remove"])
def test_exact_on_the_gpu_killed_in_a_phase_resumes_to_identical_bytes(phase, exact, tmp_path):
    config, run_dir, reference = exact["gpu"]
    killing.kill_and_resume(config, run_dir, killing.in_phase(1, phase, 8, 3),
                            tmp_path / "run.log", reference)
    assert killing.differences(run_dir, reference) == []
    assert_accounting(run_dir)
