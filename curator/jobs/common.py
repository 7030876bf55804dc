"""What every batch job script shares: the cluster bootstrap body and where scripts are written.

The body starts the Dask scheduler on the first host (scheduler file in the run directory, on
shared storage), one launcher per host (``mpirun``/``srun`` runs this same script with ``node``)
that starts the GPU workers (``gpu_workers_per_device`` per GPU, as a local cluster does; each with
``GPU_TASKS`` threads and as much ``GPU`` resource: a GPU task asks for 1, so that many parts are
in flight per worker) and CPU workers
(``CUDA_VISIBLE_DEVICES`` empty), each worker with one ``GIL`` (executors.GIL), then ``curate run
--scheduler-file`` and tears the cluster down however the job ends. Rationale: docs/scale-out.md.
"""

from __future__ import annotations

import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from curator.pipeline import PipelineModel
from curator.runtime.cluster.executors import GPU_TASKS, WORKERS_PER_GPU_UP_TO


class SubmitError(ValueError):
    """A submit option that cannot work; the message says which and why."""


@dataclass
class JobSpec:
    """Everything a job script needs, resolved to absolute paths at submit time."""

    config: Path
    run_dir: Path
    workdir: Path
    nodes: int
    walltime: str
    name: str
    gpu: bool  # start GPU workers (the pipeline has a stage that asks for a GPU)
    modules: list[str] = field(default_factory=list)
    container: Path | None = None
    binds: list[str] = field(default_factory=list)  # extra Apptainer bind paths
    cpu_workers: int | None = None  # per host; default: the host's cores less its GPU workers
    workers_per_gpu: int | None = None  # default: gpu_workers_per_device's rule, per host
    interface: str | None = None
    sets: list[str] = field(default_factory=list)
    python: str = sys.executable


def needs_gpu(pipeline: PipelineModel) -> bool:
    """Whether a stage of ``pipeline`` asks for a GPU on a cluster that has GPU workers: the
    runtime's own decision (``for_cluster(True).resources()``), taken with this environment's
    libraries (the job uses the same virtualenv or container)."""
    return any(stage.for_cluster(True).resources().get("GPU", 0) > 0
               for _, stage in pipeline.named_stages())


def parse_walltime(text: str) -> str:
    """``H:MM:SS`` checked and normalised (hours may exceed 24 for Slurm)."""
    parts = text.split(":")
    if len(parts) != 3 or not all(p.isdigit() for p in parts) or int(parts[1]) > 59 \
            or int(parts[2]) > 59 or not any(int(p) for p in parts):
        raise SubmitError(f"--walltime must be H:MM:SS (e.g. 6:00:00); got {text!r}")
    return f"{int(parts[0])}:{parts[1]:0>2}:{parts[2]:0>2}"


def script_path(run_dir: Path, system: str) -> Path:
    """A new file name under ``run_dir/jobs/``: timestamp, then a counter if taken."""
    jobs = run_dir / "jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path, n = jobs / f"curate-{system}-{stamp}.sh", 1
    while path.exists():
        n += 1
        path = jobs / f"curate-{system}-{stamp}-{n}.sh"
    return path


def _q(value: object) -> str:
    return shlex.quote(str(value))


def settings(spec: JobSpec, script: Path) -> str:
    """The variables the body reads, as bash assignments."""
    container_args = ""
    python = spec.python
    if spec.container:
        binds = [str(spec.run_dir), str(spec.workdir), str(spec.config.parent), *spec.binds]
        bind_args = " ".join(f"--bind {_q(b)}" for b in dict.fromkeys(binds))
        container_args = ("--nv " if spec.gpu else "") + bind_args
        python = "python3"
    sets = " ".join(f"--set {_q(s)}" for s in spec.sets)
    return "\n".join([
        f"CONFIG={_q(spec.config)}",
        f"RUN_DIR={_q(spec.run_dir)}",
        f"WORKDIR={_q(spec.workdir)}",
        f"JOB_SCRIPT={_q(script)}",
        f"PYTHON={_q(python)}",
        f"CONTAINER={_q(spec.container or '')}",
        f"CONTAINER_ARGS=({container_args})",
        f"CURATE_SETS=({sets})",
        f"GPU_WORKERS={'yes' if spec.gpu else 'no'}",
        f"GPU_TASKS={GPU_TASKS}",
        f"WORKERS_PER_GPU={spec.workers_per_gpu or ''}",
        f"WORKERS_PER_GPU_UP_TO={WORKERS_PER_GPU_UP_TO}",
        f"CPU_WORKERS={spec.cpu_workers or ''}",
        f"INTERFACE={_q(spec.interface or '')}",
    ])


def modules(names: list[str]) -> str:
    """Load environment modules where the host has them (a job shell does not source them)."""
    if not names:
        return ""
    listed = " ".join(_q(n) for n in names)
    return ("if [ -f /etc/profile.d/modules.sh ]; then\n"
            "  # shellcheck source=/dev/null\n"
            "  . /etc/profile.d/modules.sh\n"
            f"  module purge\n  module load {listed}\n"
            f"else\n  echo \"curate-job: no environment modules here; not loaded: {listed}\" >&2\n"
            "fi\n")


#: The bash body after the system's header, settings and variables (NODE_SCRATCH, launch_nodes,
#: count_hosts, JOB_KEY). ``node`` mode runs on every host; the rest on the first host only.
BODY = r'''
SCHEDULER_FILE="$RUN_DIR/jobs/scheduler-$JOB_KEY.json"
mkdir -p "$NODE_SCRATCH"
RUN_IN=()  # the command prefix: apptainer exec, node-local scratch bound in
if [ -n "$CONTAINER" ]; then
  RUN_IN=(apptainer exec "${CONTAINER_ARGS[@]}" --bind "$NODE_SCRATCH" "$CONTAINER")
fi
READY_DIR="$RUN_DIR/jobs/ready-$JOB_KEY"
IFACE_ARGS=()
if [ -n "$INTERFACE" ]; then IFACE_ARGS=(--interface "$INTERFACE"); fi

log() { echo "curate-job $(date +%H:%M:%S) $*" >&2; }

gpu_ids() {  # the GPUs this host gives the job, one id a line
  if [ -n "${CUDA_VISIBLE_DEVICES+x}" ]; then
    tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -v '^$' || true
  elif command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=index --format=csv,noheader || true
  fi
}

worker() {  # dask worker with the options every worker shares
  "${RUN_IN[@]}" "$PYTHON" -m distributed.cli.dask_worker --scheduler-file "$SCHEDULER_FILE" \
    --local-directory "$NODE_SCRATCH" --death-timeout 60 --no-dashboard \
    "${IFACE_ARGS[@]}" "$@"
}

per_gpu() {  # GPU worker processes per card: as set, else one per GPU_TASKS CPU workers a card
  local n=$WORKERS_PER_GPU  # has (CPU_WORKERS, else the host's cores), as a local cluster does
  if [ -z "$n" ]; then
    n=$(( ${CPU_WORKERS:-$(nproc)} / (GPU_TASKS * $1) ))
    if [ "$n" -gt "$WORKERS_PER_GPU_UP_TO" ]; then n=$WORKERS_PER_GPU_UP_TO; fi
    if [ "$n" -lt 1 ]; then n=1; fi
  fi
  echo "$n"
}

run_node() {  # on every host: GPU workers, CPU workers; until killed
  local pids=() gpus=() cpus per=0 k dask_cuda=no
  exec 3>&2 >>"$RUN_DIR/jobs/workers-$JOB_KEY-$(hostname).log" 2>&1  # 3: the job's log
  if [ "$GPU_WORKERS" = yes ]; then mapfile -t gpus < <(gpu_ids); fi
  if [ "${#gpus[@]}" -gt 0 ]; then
    per=$(per_gpu "${#gpus[@]}")
    if "${RUN_IN[@]}" "$PYTHON" -c 'import dask_cuda' 2>/dev/null; then dask_cuda=yes; fi
    for (( k = 0; k < per; k++ )); do
      if [ "$dask_cuda" = yes ]; then
        CUDA_VISIBLE_DEVICES=$(IFS=,; echo "${gpus[*]}") "${RUN_IN[@]}" "$PYTHON" -m dask cuda \
          worker --scheduler-file "$SCHEDULER_FILE" --local-directory "$NODE_SCRATCH" \
          --nthreads "$GPU_TASKS" --resources "GPU=$GPU_TASKS GIL=1" --death-timeout 60 \
          "${IFACE_ARGS[@]}" &
        pids+=($!)
      else
        for g in "${gpus[@]}"; do
          CUDA_VISIBLE_DEVICES=$g worker --nthreads "$GPU_TASKS" \
            --resources "GPU=$GPU_TASKS GIL=1" &
          pids+=($!)
        done
      fi
    done
  fi
  cpus=${CPU_WORKERS:-$(( $(nproc) - ${#gpus[@]} * per ))}
  if [ "$cpus" -lt 1 ]; then cpus=1; fi
  CUDA_VISIBLE_DEVICES="" OMP_NUM_THREADS=1 worker --nthreads 1 --nworkers "$cpus" \
    --resources GIL=1 &
  pids+=($!)
  echo "$(( ${#gpus[@]} * per + cpus ))" > "$READY_DIR/.$(hostname)-$$"
  mv "$READY_DIR/.$(hostname)-$$" "$READY_DIR/$(hostname)-$$"
  log "$(hostname): $(( ${#gpus[@]} * per )) GPU workers ($per a card) and $cpus CPU workers;" \
    "scratch $NODE_SCRATCH" 2>&3
  trap 'kill -TERM "${pids[@]}" 2>/dev/null' TERM INT HUP USR1 USR2
  wait
  wait
}

if [ "${1:-}" = node ]; then
  run_node
  exit 0
fi

SCHEDULER_PID=""
LAUNCH_PID=""
CURATE_PID=""

# shellcheck disable=SC2317,SC2329  # run by trap
teardown() {  # on every exit: stop the run, the workers, the scheduler
  local status=$?
  trap - EXIT TERM INT HUP USR1 USR2
  if [ -n "$CURATE_PID" ]; then kill -INT "$CURATE_PID" 2>/dev/null; wait "$CURATE_PID"; fi
  if [ -n "$LAUNCH_PID" ]; then kill -TERM "$LAUNCH_PID" 2>/dev/null; wait "$LAUNCH_PID"; fi
  if [ -n "$SCHEDULER_PID" ]; then
    kill -TERM "$SCHEDULER_PID" 2>/dev/null
    wait "$SCHEDULER_PID"
  fi
  rm -rf "$SCHEDULER_FILE" "$READY_DIR" "$RUN_DIR/jobs/hosts-$JOB_KEY"
  log "cluster stopped; exit $status (the same job resumes $RUN_DIR)"
  exit "$status"
}

# shellcheck disable=SC2317,SC2329  # run by trap
on_signal() {
  log "$1 received: stopping; submit the same job again to resume"
  exit "$2"
}

trap teardown EXIT
trap 'on_signal TERM 143' TERM
trap 'on_signal INT 130' INT
trap 'on_signal HUP 129' HUP
trap 'on_signal USR1 138' USR1
trap 'on_signal USR2 140' USR2

cd "$WORKDIR" || exit 1
mkdir -p "$RUN_DIR/jobs"
rm -rf "$SCHEDULER_FILE" "$READY_DIR"
mkdir -p "$READY_DIR"
NHOSTS=$(count_hosts)
log "job $JOB_KEY: $NHOSTS hosts; scheduler file $SCHEDULER_FILE"

"${RUN_IN[@]}" "$PYTHON" -m distributed.cli.dask_scheduler --scheduler-file "$SCHEDULER_FILE" \
  --port 0 --dashboard-address :0 "${IFACE_ARGS[@]}" >"$RUN_DIR/jobs/scheduler-$JOB_KEY.log" 2>&1 &
SCHEDULER_PID=$!

launch_nodes &
LAUNCH_PID=$!

"${RUN_IN[@]}" "$PYTHON" -m curator.jobs.ready "$SCHEDULER_FILE" "$READY_DIR" "$NHOSTS" || exit 1

"${RUN_IN[@]}" "$PYTHON" -m curator run "$CONFIG" --output "$RUN_DIR" --executor dask \
  --scheduler-file "$SCHEDULER_FILE" "${CURATE_SETS[@]}" &
CURATE_PID=$!
wait "$CURATE_PID"
status=$?
CURATE_PID=""
exit "$status"
'''
