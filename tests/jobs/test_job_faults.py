"""Faults in a cluster started by a ``curate submit`` job script (run here as in
test_submit): a worker process killed with SIGKILL mid-run, the scheduler killed, the walltime
signal. Each stops the run at a point of the curator.halt hook first (the job would otherwise
race to its end): the worker is killed while it is halted inside a shard's commit (the others
then released), the scheduler while a worker is halted after a shard's manifest, the walltime
signal comes while the driver is halted before it finalizes the first segment (no worker
busy)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import time
from pathlib import Path

import psutil

from curator import halt
from tests.jobs.test_submit import (
    STAGES,
    finish_job,
    job_env,
    job_processes,
    reference,
    results,
    start_job,
    submit,
    write_config,
)
from tests.runtime import killing


def paused_config(tmp: Path) -> tuple[Path, Path]:
    markers = tmp / "markers"
    middle = f"  - {{type: test_pause, seconds: 1.0, markers: {markers}}}\n"
    return write_config(tmp, middle, head=f"imports: [{STAGES}]"), markers


def halting(env: dict[str, str], point: str, halt_dir: Path) -> dict[str, str]:
    """A job's environment with the hook set: every process of the job halts at ``point``."""
    return {**env, halt.HALT: point, halt.HALT_DIR: str(halt_dir)}


def test_a_worker_killed_mid_run_changes_nothing(tmp_path):
    config, markers = paused_config(tmp_path)
    want = reference(tmp_path, config)
    shutil.rmtree(markers)
    log = tmp_path / "job.log"
    halt = tmp_path / "halt"
    env = halting(job_env(tmp_path, "tsubame4", "81"), "shard-commit:segment-00@1", halt)
    job = start_job(submit(config, "tsubame4"), env, log)
    # a worker has renamed its shard's files into place and not written the manifest
    halted = killing.wait_halted(job, halt, "a shard being committed", log, 120)
    pid = halted["pid"]
    nanny = psutil.Process(pid).parent()  # a worker process of a `dask worker` of the job
    assert "distributed.cli.dask_worker" in nanny.cmdline()
    os.kill(pid, signal.SIGKILL)
    (halt / "halted.json").unlink()  # the others go on
    text = finish_job(job, log)
    assert "exit 0" in text, text[-3000:]
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert str(pid) in {p.name for p in markers.glob("*")}  # the killed worker had the shard
    assert (tmp_path / "run" / "_manifests" / "segment-00" / f"{halted['key']}.json").exists()
    assert results(tmp_path / "run") == want


def test_a_killed_scheduler_fails_the_job_in_one_line_and_the_next_job_resumes(tmp_path):
    config, _ = paused_config(tmp_path)
    want = reference(tmp_path, config)
    run = tmp_path / "run"
    script = submit(config, "slurm")
    log = tmp_path / "job1.log"
    env = halting(job_env(tmp_path, "slurm", "91"), "shard-done:segment-00@1", tmp_path / "halt")
    job = start_job(script, env, log)
    halted = killing.wait_halted(job, tmp_path / "halt", "a committed shard", log, 120)
    assert (run / "_manifests" / "segment-00" / f"{halted['key']}.json").exists()
    scheduler = [p for p in psutil.process_iter(["cmdline"])
                 if "distributed.cli.dask_scheduler" in (p.info["cmdline"] or [])
                 and any("scheduler-91.json" in a for a in p.info["cmdline"])]
    assert len(scheduler) == 1
    scheduler[0].kill()
    text = finish_job(job, log)
    killing.kill_group(job)  # the halted workers, which would wait for their death timeout
    assert "exit 0" not in text and "cluster stopped; exit 1" in text, text[-3000:]
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "lost the Dask scheduler" in errors[0], text[-3000:]
    assert "Traceback" not in text
    log2 = tmp_path / "job2.log"
    text2 = finish_job(start_job(script, job_env(tmp_path, "slurm", "92"), log2), log2)
    assert "exit 0" in text2, text2[-3000:]
    resumed = re.search(r"segment 1/3: 4 shards, (\d+) already done", text2)
    assert resumed and int(resumed.group(1)) >= 1, text2[-3000:]  # the first job's commits
    assert results(run) == want


def test_the_walltime_signal_stops_the_run_and_the_cluster_and_the_next_job_resumes(tmp_path):
    """Slurm sends USR1 to the batch shell two minutes before the walltime
    (``--signal=B:USR1@120``): the run stops as on Ctrl-C, every process of the job ends."""
    config, _ = paused_config(tmp_path)
    want = reference(tmp_path, config)
    run = tmp_path / "run"
    script = submit(config, "slurm")
    log = tmp_path / "job1.log"
    env = halting(job_env(tmp_path, "slurm", "95"), "finalize:segment-00", tmp_path / "halt")
    job = start_job(script, env, log)
    killing.wait_halted(job, tmp_path / "halt", "the first segment's end", log, 120)
    os.kill(job.pid, signal.SIGUSR1)
    text = finish_job(job, log)
    assert job.returncode == 138, text[-3000:]
    assert "USR1 received" in text and "interrupted; rerun the same command" in text
    assert "Traceback" not in text
    deadline = time.monotonic() + 10
    while job_processes(run) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not job_processes(run)
    log2 = tmp_path / "job2.log"
    text2 = finish_job(start_job(script, job_env(tmp_path, "slurm", "96"), log2), log2)
    assert "exit 0" in text2, text2[-3000:]
    assert "segment 1/3: 4 shards, 4 already done" in text2, text2[-3000:]
    assert results(run) == want
