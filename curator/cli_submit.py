"""``curate submit``: write a batch job that hosts a Dask cluster and runs the pipeline in it;
submit it with ``qsub`` (TSUBAME4) or ``sbatch`` (Slurm) unless ``--dry-run``."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Annotated

import typer

from curator.cli_errors import FAILED, USAGE, fail
from curator.config import ConfigError, load_pipeline
from curator.jobs import slurm, tsubame4
from curator.jobs.common import JobSpec, SubmitError, needs_gpu, parse_walltime, script_path

Opt = typer.Option


def submit(
    config: Path,
    system: Annotated[str, Opt(help="tsubame4 (Grid Engine) or slurm.")],
    nodes: Annotated[int, Opt(help="Hosts in the job.", min=1)],
    walltime: Annotated[str, Opt(help="Wall time H:MM:SS.")],
    resource: Annotated[str | None, Opt(
        help="TSUBAME4 resource type (node_f, node_h, node_q, cpu_160, ...); default node_f "
        "for a pipeline with GPU stages, cpu_160 without.")] = None,
    group: Annotated[str | None, Opt(
        help="TSUBAME4 group (qsub -g) or Slurm account.")] = None,
    modules: Annotated[list[str] | None, Opt(
        "--modules", help="Environment modules to load (repeat the option).")] = None,
    container: Annotated[Path | None, Opt(
        help="Apptainer image (.sif) to run the scheduler, workers and curate in.")] = None,
    bind: Annotated[list[str] | None, Opt(
        help="Extra Apptainer bind path, e.g. /gs (repeat the option).")] = None,
    output: Annotated[Path | None, Opt(help="Run directory (default: the config's).")] = None,
    cpu_workers: Annotated[int | None, Opt(
        help="CPU worker processes per host; default its cores less its GPU workers.",
        min=1)] = None,
    interface: Annotated[str | None, Opt(
        help="Network interface for the scheduler and workers (e.g. ib0, bond0).")] = None,
    partition: Annotated[str | None, Opt(help="Slurm partition.")] = None,
    gpus_per_node: Annotated[int | None, Opt(
        help="Slurm GPUs per node for a pipeline with GPU stages (default 1).", min=1)] = None,
    set_: Annotated[list[str] | None, Opt("--set", help="Override STAGE.PARAM=VALUE.")] = None,
    dry_run: Annotated[bool, Opt(help="Write the script, do not submit it.")] = False,
) -> None:
    """Write a batch job that starts a Dask cluster on its hosts and runs the pipeline there;
    submit it (the same job, submitted again, resumes the run)."""
    try:
        pipeline = load_pipeline(config, set_ or [])
    except ConfigError as err:
        fail(str(err), USAGE)
    run_dir = output or (Path(pipeline.output) if pipeline.output else None)
    if run_dir is None:
        fail("no run directory: set 'output' in the pipeline or pass --output", USAGE)
    try:
        spec = JobSpec(config=config.resolve(), run_dir=run_dir.resolve(), workdir=Path.cwd(),
                       nodes=nodes, walltime=parse_walltime(walltime),
                       name=re.sub(r"[^A-Za-z0-9_.-]", "_", f"curate-{pipeline.name}")[:60],
                       gpu=needs_gpu(pipeline), modules=modules or [],
                       container=container.resolve() if container else None,
                       binds=bind or [], cpu_workers=cpu_workers,
                       workers_per_gpu=pipeline.executor.workers_per_gpu, interface=interface,
                       sets=set_ or [])
        script = script_path(spec.run_dir, system)
        if system == "tsubame4":
            if partition or gpus_per_node:
                raise SubmitError("--partition and --gpus-per-node are Slurm options; on "
                                  "tsubame4 choose a --resource type")
            text = tsubame4.render(spec, script, tsubame4.choose_resource(resource, spec.gpu))
            command = tsubame4.submit_command(script, group)
        elif system == "slurm":
            if resource:
                raise SubmitError("--resource is a TSUBAME4 resource type; on slurm use "
                                  "--gpus-per-node and --partition")
            text = slurm.render(spec, script, gpus_per_node, partition, group)
            command = slurm.submit_command(script)
        else:
            raise SubmitError(f"--system must be tsubame4 or slurm; got {system!r}")
    except SubmitError as err:
        fail(str(err), USAGE)
    script.write_text(text, encoding="utf-8")
    script.chmod(0o755)
    typer.echo(str(script))
    if dry_run:
        return
    if shutil.which(command[0]) is None:
        fail(f"{command[0]} not found on PATH: submit from a login node of the cluster "
             f"({' '.join(command)})", FAILED)
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip().splitlines()
        fail(f"{' '.join(command)} failed: {why[-1] if why else f'exit {done.returncode}'}",
             FAILED)
    typer.echo(done.stdout.strip())
