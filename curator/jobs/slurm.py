"""Slurm: ``#SBATCH`` directives, hosts from ``$SLURM_JOB_NODELIST``, one launcher per host
with ``srun``, node-local scratch in ``$TMPDIR``; ``sbatch``. USR1 two minutes before the
walltime stops the run cleanly."""

from __future__ import annotations

from pathlib import Path

from curator.jobs.common import BODY, JobSpec, SubmitError, modules, settings


def render(spec: JobSpec, script: Path, gpus_per_node: int | None = None,
           partition: str | None = None, account: str | None = None) -> str:
    """The job script; GPUs are booked only for a pipeline with GPU stages."""
    if gpus_per_node and not spec.gpu:
        raise SubmitError("the pipeline has no GPU stage; leave out --gpus-per-node")
    gpus = (gpus_per_node or 1) if spec.gpu else 0
    lines = [
        "#!/bin/bash",
        f"# curate submit --system slurm: {spec.nodes} nodes, Dask cluster in the job",
        f"#SBATCH --job-name={spec.name}",
        f"#SBATCH --nodes={spec.nodes}",
        "#SBATCH --ntasks-per-node=1",
        "#SBATCH --exclusive",
        f"#SBATCH --time={spec.walltime}",
        "#SBATCH --signal=B:USR1@120",
        f"#SBATCH --output={spec.run_dir}/jobs/slurm-%j.out",
    ]
    if gpus:
        lines.append(f"#SBATCH --gpus-per-node={gpus}")
    if partition:
        lines.append(f"#SBATCH --partition={partition}")
    if account:
        lines.append(f"#SBATCH --account={account}")
    lines.append("set -uo pipefail")
    system = r'''
JOB_KEY="${2:-${SLURM_JOB_ID:-$$}}"  # node mode: the first host's key
NODE_SCRATCH="${TMPDIR:-/tmp}/curator-$JOB_KEY"

count_hosts() { scontrol show hostnames "$SLURM_JOB_NODELIST" | grep -c .; }

launch_nodes() {  # one launcher per node of the allocation
  exec srun --overlap --nodes="$(count_hosts)" --ntasks-per-node=1 --kill-on-bad-exit=0 \
    bash "$JOB_SCRIPT" node "$JOB_KEY"
}
'''
    return "\n".join(["\n".join(lines), settings(spec, script), modules(spec.modules), system,
                      BODY])


def submit_command(script: Path) -> list[str]:
    return ["sbatch", str(script)]
