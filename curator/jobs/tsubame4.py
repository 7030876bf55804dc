"""TSUBAME4.0 (Altair Grid Engine): ``#$`` directives, hosts from ``$PE_HOSTFILE``, one launcher
per host with OpenMPI's ``mpirun``, node-local scratch in ``$T4TMPDIR``; ``qsub -g GROUP``."""

from __future__ import annotations

from pathlib import Path

from curator.jobs.common import BODY, JobSpec, SubmitError, modules, settings

#: Resource type -> (CPU cores, GPUs) per unit (TSUBAME4.0 handbook; MIG halves count as GPUs).
RESOURCES: dict[str, tuple[int, float]] = {
    "node_f": (192, 4), "node_h": (96, 2), "node_q": (48, 1), "node_o": (24, 0.5),
    "gpu_1": (8, 1), "gpu_h": (4, 0.5), "cpu_160": (160, 0), "cpu_80": (80, 0),
    "cpu_40": (40, 0), "cpu_16": (16, 0), "cpu_8": (8, 0), "cpu_4": (4, 0),
}
#: Modules loaded when none are given: OpenMPI for mpirun, CUDA for GPU workers.
DEFAULT_MODULES = ["openmpi/5.0.7-gcc"]
GPU_MODULES = ["cuda/12.8.0"]


def choose_resource(resource: str | None, gpu: bool) -> str:
    """The resource type: the one given (checked against the pipeline), else a whole GPU node
    for a pipeline with GPU stages and a 160-core CPU node for one without."""
    if resource is None:
        return "node_f" if gpu else "cpu_160"
    if resource not in RESOURCES:
        raise SubmitError(f"unknown TSUBAME4 resource type {resource!r}; expected one of: "
                          f"{', '.join(RESOURCES)}")
    has_gpu = RESOURCES[resource][1] > 0
    if gpu and not has_gpu:
        raise SubmitError(f"the pipeline has GPU stages but {resource} has no GPU; choose "
                          "node_f, node_h or node_q (or set the stages' device to cpu)")
    if not gpu and has_gpu:
        raise SubmitError(f"the pipeline has no GPU stage; {resource} would book GPUs it never "
                          "uses: choose a cpu_* type (cpu_160 is the largest)")
    return resource


def render(spec: JobSpec, script: Path, resource: str) -> str:
    """The job script (the group is not a directive: it goes on the qsub command line)."""
    loads = spec.modules or DEFAULT_MODULES + (GPU_MODULES if spec.gpu else [])
    header = "\n".join([
        "#!/bin/bash",
        f"# curate submit --system tsubame4: {spec.nodes} x {resource}, Dask cluster in the job",
        "#$ -S /bin/bash",
        "#$ -cwd",
        f"#$ -N {spec.name}",
        f"#$ -l {resource}={spec.nodes}",
        f"#$ -l h_rt={spec.walltime}",
        "#$ -j y",
        f"#$ -o {spec.run_dir}/jobs/",
        "set -uo pipefail",
    ])
    system = r'''
JOB_KEY="${2:-${JOB_ID:-$$}}"  # node mode: the first host's key
NODE_SCRATCH="${T4TMPDIR:-${TMPDIR:-/tmp}}/curator-$JOB_KEY"

count_hosts() { grep -c . "$PE_HOSTFILE"; }

launch_nodes() {  # one launcher per host of $PE_HOSTFILE (host slots queue range)
  local hostfile="$RUN_DIR/jobs/hosts-$JOB_KEY"
  awk 'NF { print $1 " slots=1" }' "$PE_HOSTFILE" > "$hostfile"
  exec mpirun -npernode 1 -np "$(count_hosts)" -hostfile "$hostfile" --bind-to none \
    -x PATH -x LD_LIBRARY_PATH -x T4TMPDIR bash "$JOB_SCRIPT" node "$JOB_KEY"
}
'''
    return "\n".join([header, settings(spec, script), modules(loads), system, BODY])


def submit_command(script: Path, group: str | None) -> list[str]:
    return ["qsub", *(["-g", group] if group else []), str(script)]
