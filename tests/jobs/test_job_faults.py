"""Faults in a cluster started by a ``curate submit`` job script (run here as in
test_submit): a worker process killed with SIGKILL mid-run, and the scheduler killed."""

from __future__ import annotations

import os
import re
import shutil
import signal
import time
from pathlib import Path

import psutil

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


def paused_config(tmp: Path) -> tuple[Path, Path]:
    markers = tmp / "markers"
    middle = f"  - {{type: test_pause, seconds: 1.0, markers: {markers}}}\n"
    return write_config(tmp, middle, head=f"imports: [{STAGES}]"), markers


def wait_for(ready, what: str, log: Path, seconds: float = 60):
    deadline = time.monotonic() + seconds
    while not (found := ready()):
        assert time.monotonic() < deadline, f"never saw {what}:\n{log.read_text()[-3000:]}"
        time.sleep(0.05)
    return found


def test_a_worker_killed_mid_run_changes_nothing(tmp_path):
    config, markers = paused_config(tmp_path)
    want = reference(tmp_path, config)
    shutil.rmtree(markers)
    log = tmp_path / "job.log"
    job = start_job(submit(config, "tsubame4"), job_env(tmp_path, "tsubame4", "81"), log)
    pid = int(wait_for(lambda: sorted(markers.glob("*")), "a working worker", log)[0].name)
    nanny = psutil.Process(pid).parent()  # a worker process of a `dask worker` of the job
    assert "distributed.cli.dask_worker" in nanny.cmdline()
    os.kill(pid, signal.SIGKILL)
    text = finish_job(job, log)
    assert "exit 0" in text, text[-3000:]
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert len(list(markers.glob("*"))) >= 2  # the shard was redone by another process
    assert results(tmp_path / "run") == want


def test_a_killed_scheduler_fails_the_job_in_one_line_and_the_next_job_resumes(tmp_path):
    config, _ = paused_config(tmp_path)
    want = reference(tmp_path, config)
    run = tmp_path / "run"
    script = submit(config, "slurm")
    log = tmp_path / "job1.log"
    job = start_job(script, job_env(tmp_path, "slurm", "91"), log)
    wait_for(lambda: list((run / "_manifests" / "segment-00").glob("part-*.json")),
             "a committed shard", log)
    scheduler = [p for p in psutil.process_iter(["cmdline"])
                 if "distributed.cli.dask_scheduler" in (p.info["cmdline"] or [])
                 and any("scheduler-91.json" in a for a in p.info["cmdline"])]
    assert len(scheduler) == 1
    scheduler[0].kill()
    text = finish_job(job, log)
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
    job = start_job(script, job_env(tmp_path, "slurm", "95"), log)
    wait_for(lambda: list((run / "_manifests" / "segment-00").glob("part-*.json")),
             "a committed shard", log)
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
    assert results(run) == want
