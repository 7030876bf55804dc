"""``curate submit``: the generated Grid Engine and Slurm scripts, run here with bash.

Only the launch that would reach another host is replaced: ``mpirun``/``srun``/``scontrol``
shims on PATH (tests/jobs/shims) run the script's per-host command locally once per host line.
Everything else is real: the script starts a real Dask scheduler and real workers on
127.0.0.1 (``--interface lo``), runs ``curate run --scheduler-file`` and tears the cluster down.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import ROOT, write_shards
from tests.runtime.killing import outputs

SHIMS = Path(__file__).with_name("shims")
STAGES = Path(__file__).with_name("job_stages.py")


def tool(name: str) -> str | None:
    """A linter on PATH or beside this Python (the dev extra installs it into the venv)."""
    return shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))


def curate(*args: str, env: dict[str, str] | None = None,
           cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "curator.cli", *args], cwd=cwd, text=True,
                          capture_output=True, timeout=120, env=env)


def write_config(tmp: Path, middle: str = "", name: str = "p.yaml", head: str = "") -> Path:
    inputs = tmp / "in"
    if not inputs.exists():
        write_shards(inputs, 4, copies=2)  # every document twice: exact_dedup removes half
    config = tmp / name
    config.write_text(f"""
name: scale
output: {tmp / "run"}
{head}
stages:
  - {{type: read_jsonl, path: "{inputs}/*.jsonl"}}
{middle}  - {{type: exact_dedup}}
  - {{type: write_parquet}}
""")
    return config


def submit(config: Path, system: str, *extra: str) -> Path:
    """``curate submit --dry-run`` in this process (nothing runs: the script is only written)."""
    from typer.testing import CliRunner

    from curator.cli import app

    result = CliRunner().invoke(app, [
        "submit", str(config), "--system", system, "--nodes", "2", "--walltime", "0:10:00",
        "--cpu-workers", "1", "--interface", "lo", "--dry-run", *extra])
    assert result.exit_code == 0, result.output
    script = Path(result.stdout.strip().splitlines()[-1])
    assert script.parent == config.parent / "run" / "jobs" and script.is_file()
    return script


def job_env(tmp: Path, system: str, job_id: str) -> dict[str, str]:
    env = {**os.environ, "PATH": f"{SHIMS}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    scratch = tmp / f"node-local-{job_id}"
    scratch.mkdir()
    if system == "tsubame4":
        hostfile = tmp / f"pe_hostfile-{job_id}"
        hostfile.write_text("localhost 2 all.q@localhost <NULL>\n"
                            "localhost 2 all.q@localhost <NULL>\n")
        env.update(PE_HOSTFILE=str(hostfile), JOB_ID=job_id, NHOSTS="2", T4TMPDIR=str(scratch))
    else:
        env.update(SLURM_JOB_NODELIST="localhost,localhost", SLURM_JOB_ID=job_id,
                   SLURM_JOB_NUM_NODES="2", SLURM_NNODES="2", TMPDIR=str(scratch))
    return env


def start_job(script: Path, env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "ab") as f:
        return subprocess.Popen(["bash", str(script)], cwd=script.parent, env=env, stdout=f,
                                stderr=subprocess.STDOUT, start_new_session=True)


def finish_job(proc: subprocess.Popen, log: Path, timeout: float = 90) -> str:
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise AssertionError(f"job did not end:\n{log.read_text()[-3000:]}") from None
    return log.read_text(errors="replace")


def job_processes(run_dir: Path) -> list[psutil.Process]:
    """Processes whose command line names this run's job files (scheduler, workers, launchers)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        with_run = any(str(run_dir) in arg for arg in proc.info["cmdline"] or [])
        if with_run and proc.pid != os.getpid():
            found.append(proc)
    return found


def results(run_dir: Path) -> dict[str, bytes]:
    """The run's output bytes, without the job's own files."""
    return {k: v for k, v in outputs(run_dir).items() if not k.startswith("jobs/")}


def reference(tmp: Path, config: Path) -> dict[str, bytes]:
    result = curate("run", str(config), "--executor", "local", "--output", str(tmp / "local"))
    assert result.returncode == 0, result.stderr
    return outputs(tmp / "local")


@pytest.mark.parametrize("system", ["tsubame4", "slurm"])
def test_job_script_runs_the_pipeline_on_a_cluster_it_starts_and_stops(tmp_path, system):
    """TSUBAME4: a CPU-only pipeline (no GPU worker starts). Slurm: a stage that asks for a GPU,
    with one GPU granted per host (CUDA_VISIBLE_DEVICES=0) and two GPU workers per GPU
    (``workers_per_gpu``): two GPU workers and a CPU worker per host, and the GPU stage runs
    only on the GPU workers."""
    markers = tmp_path / "markers"
    gpu = system == "slurm"
    middle = f"  - {{type: test_gpu_probe, markers: {markers}}}\n" if gpu else ""
    head = f"imports: [{STAGES}]" + ("\nexecutor: {workers_per_gpu: 2}" if gpu else "")
    config = write_config(tmp_path, middle, head=head)
    want = reference(tmp_path, config)
    shutil.rmtree(markers, ignore_errors=True)
    script = submit(config, system)
    assert f"GPU_WORKERS={'yes' if gpu else 'no'}" in script.read_text()
    log = tmp_path / "job.log"
    env = job_env(tmp_path, system, "77")
    if gpu:
        env["CUDA_VISIBLE_DEVICES"] = "0"
    text = finish_job(start_job(script, env, log), log)
    assert "exit 0" in text, text[-3000:]
    assert ("cluster ready: 6 workers (4 GPU) on 2 hosts" if gpu else
            "cluster ready: 2 workers (0 GPU) on 2 hosts") in text, text[-3000:]
    assert results(tmp_path / "run") == want
    assert sum(1 for name in want if name.startswith("write_parquet/")) == 4
    if gpu:  # every batch of the GPU stage ran in a process that sees device 0 only
        ran = [p.name.split("-", 1)[1] for p in markers.iterdir()]
        assert ran and set(ran) == {"0"}, ran
    jobs = tmp_path / "run" / "jobs"
    assert not list(jobs.glob("scheduler-*.json")) and not list(jobs.glob("ready-*"))
    assert "Register worker" in (jobs / "scheduler-77.log").read_text()
    assert len(list(jobs.glob("workers-77-*.log"))) == 1  # both "hosts" are this one
    deadline = time.monotonic() + 10
    while job_processes(tmp_path / "run") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not job_processes(tmp_path / "run")
    assert list((tmp_path / "node-local-77").glob("curator-77/*")), "no spill on node-local disk"


@pytest.mark.skipif(tool("shellcheck") is None, reason="shellcheck not installed")
@pytest.mark.parametrize("system", ["tsubame4", "slurm"])
def test_job_scripts_pass_shellcheck(tmp_path, system):
    for middle in ("", "  - {type: fuzzy_dedup, device: gpu}\n"):
        config = write_config(tmp_path, middle, f"p{len(middle)}.yaml")
        script = submit(config, system, "--container", str(tmp_path / "curator.sif"),
                        "--modules", "cuda/12.8.0")
        checked = subprocess.run([tool("shellcheck"), str(script)], capture_output=True,
                                 text=True)
        assert checked.returncode == 0, checked.stdout
    for shim in SHIMS.iterdir():
        assert subprocess.run([tool("shellcheck"), str(shim)]).returncode == 0


def test_gpu_resources_only_for_pipelines_with_gpu_stages(tmp_path):
    cpu_only = write_config(tmp_path, "  - {type: fuzzy_dedup, device: cpu}\n", "cpu.yaml")
    gpu = write_config(tmp_path, "  - {type: fuzzy_dedup, device: gpu}\n", "gpu.yaml")
    assert "#$ -l cpu_160=2" in submit(cpu_only, "tsubame4").read_text()
    assert "#$ -l node_f=2" in submit(gpu, "tsubame4").read_text()
    assert "GPU_WORKERS=no" in submit(cpu_only, "tsubame4").read_text()
    assert "GPU_WORKERS=yes" in submit(gpu, "tsubame4").read_text()
    assert "--gpus" not in submit(cpu_only, "slurm").read_text()
    assert "#SBATCH --gpus-per-node=4" in submit(gpu, "slurm", "--gpus-per-node", "4").read_text()
    assert "#$ -l node_q=2" in submit(gpu, "tsubame4", "--resource", "node_q").read_text()
    for config, resource, word in ((cpu_only, "node_q", "no GPU stage"),
                                   (gpu, "cpu_160", "has no GPU")):
        result = curate("submit", str(config), "--system", "tsubame4", "--nodes", "1",
                        "--walltime", "1:00:00", "--resource", resource, "--dry-run")
        assert result.returncode == 2 and word in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1


def test_submit_puts_the_group_on_the_qsub_command_line(tmp_path):
    config = write_config(tmp_path)
    record = tmp_path / "qsub.args"
    env = {**os.environ, "PATH": f"{SHIMS}:{os.environ['PATH']}", "QSUB_RECORD": str(record)}
    result = curate("submit", str(config), "--system", "tsubame4", "--nodes", "2", "--walltime",
                    "1:00:00", "--group", "tga-demo", env=env)
    assert result.returncode == 0, result.stderr
    script = Path(result.stdout.splitlines()[0])
    assert "Your job 4242" in result.stdout
    assert record.read_text().split() == ["-g", "tga-demo", str(script)]
    assert "tga-demo" not in script.read_text()


def test_missing_submit_command_is_one_line(tmp_path):
    config = write_config(tmp_path)
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}
    for system, command in (("tsubame4", "qsub"), ("slurm", "sbatch")):
        result = curate("submit", str(config), "--system", system, "--nodes", "1",
                        "--walltime", "1:00:00", env=env)
        assert result.returncode == 1
        assert result.stderr.startswith(f"error: {command} not found on PATH")
        assert len(result.stderr.strip().splitlines()) == 1


def test_a_run_directory_holding_only_jobs_is_a_fresh_run_and_force_keeps_them(tmp_path):
    from curator.store.run_dir import RunDir, RunDirError

    root = tmp_path / "run"
    (root / "jobs").mkdir(parents=True)
    (root / "jobs" / "curate-slurm-x.sh").write_text("#!/bin/bash\n")
    run_dir = RunDir(root)
    run_dir.prepare("a", {}, {}, force=False)  # the job's own folder is no foreign result
    (root / "write_parquet").mkdir()
    run_dir.prepare("b", {}, {"x": 1}, force=False)  # another configuration: reused by key
    assert json.loads((root / "run.json").read_text())["fingerprint"] == "b"
    run_dir.prepare("b", {}, {"x": 1}, force=True)
    assert (root / "jobs" / "curate-slurm-x.sh").exists()
    assert (root / "write_parquet").is_dir()  # no run recorded anything in it: not ours to remove
    (root / "other").write_text("not ours")
    (root / "run.json").unlink()
    with pytest.raises(RunDirError, match="not a curator run"):
        RunDir(root).prepare("c", {}, {}, force=False)


@pytest.mark.parametrize(("option", "value", "words"), [
    ("--walltime", "90", "--walltime must be H:MM:SS"),
    ("--system", "pbs", "--system must be tsubame4 or slurm"),
])
def test_bad_submit_options_are_one_line(tmp_path, option, value, words):
    config = write_config(tmp_path)
    args = {"--system": "slurm", "--walltime": "1:00:00", option: value}
    result = curate("submit", str(config), "--nodes", "1", "--dry-run",
                    *[x for pair in args.items() for x in pair])
    assert result.returncode == 2 and words in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    jobs = tmp_path / "run" / "jobs"
    assert not jobs.exists() or not any(jobs.iterdir())  # no script written
