"""A mixed pipeline in one cluster started by a ``curate submit`` job script, on one GPU machine:
read_parquet → heuristic_filter (CPU workers) → fuzzy_dedup device gpu (the GPU worker) →
write_parquet. The Slurm script is run with bash and the srun/scontrol shims of tests/jobs/shims
(one host: this machine), ``CUDA_VISIBLE_DEVICES`` granting GPU 0. Reports the cluster the
script started, where fuzzy_dedup ran (stats.json ``device``), per-stage seconds, and that the
output equals a ``--executor local`` run with fuzzy_dedup on CPU. Needs a GPU and CuPy.

    PYTHONPATH=. python benchmarks/bench_mixed_gpu.py [--mb 32]
        [--out benchmarks/results_mixed_gpu.md]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import harness

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scaling import build, output_bytes

ROOT = Path(__file__).resolve().parents[1]
SHIMS = ROOT / "tests" / "jobs" / "shims"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=32)
    parser.add_argument("--shards", type=int, default=32)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results_mixed_gpu.md")
    args = parser.parse_args()
    from curator.runtime.cluster.executors import gpu_count

    try:
        import cupy  # noqa: F401
    except ImportError:
        print("bench_mixed_gpu: skipped, needs CuPy (pip install 'curator[gpu]')")
        return
    if gpu_count() < 1:
        print("bench_mixed_gpu: skipped, needs a GPU")
        return
    work = Path(tempfile.mkdtemp(prefix="bench-mixed-"))
    data = build(work / "data", args.mb, args.shards, 0.05, 1)
    config = work / "pipeline.yaml"
    config.write_text(f"""
name: bench-mixed
stages:
  - {{type: read_parquet, path: "{work / 'data'}/*.parquet"}}
  - {{type: heuristic_filter}}
  - {{type: fuzzy_dedup, device: gpu}}
  - {{type: write_parquet}}
""")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    curate = [sys.executable, "-m", "curator.cli"]
    script = subprocess.run([*curate, "submit", str(config), "--system", "slurm", "--nodes",
                             "1", "--walltime", "0:30:00", "--output", str(work / "run"),
                             "--dry-run"], env=env, capture_output=True, text=True, check=True
                            ).stdout.strip().splitlines()[-1]
    (work / "scratch").mkdir()
    job_env = {**env, "PATH": f"{SHIMS}:{env['PATH']}", "SLURM_JOB_NODELIST": "localhost",
               "SLURM_JOB_ID": "1", "SLURM_JOB_NUM_NODES": "1", "TMPDIR": str(work / "scratch"),
               "CUDA_VISIBLE_DEVICES": "0"}
    started = time.perf_counter()
    job = subprocess.run(["bash", script], env=job_env, capture_output=True, text=True,
                         cwd=work)
    wall = time.perf_counter() - started
    log = job.stdout + job.stderr
    if job.returncode != 0:
        raise SystemExit(f"job failed ({job.returncode}):\n{log[-4000:]}")
    ready = re.search(r"cluster ready: .*", log)
    stats = json.loads((work / "run" / "stats.json").read_text())
    stage = {s["name"]: s for s in stats["stages"]}
    reference = subprocess.run([*curate, "run", str(config), "--set", "fuzzy_dedup.device=cpu",
                                "--executor", "local", "--output", str(work / "local")],
                               env=env, capture_output=True, text=True)
    same = reference.returncode == 0 and output_bytes(work / "run") == output_bytes(work / "local")
    lines = [
        "# Mixed pipeline: CPU stages on CPU workers, fuzzy_dedup on the GPU worker", "",
        f"Machine: {os.cpu_count()} cores, GPU 0 granted. Data: {data['docs']} documents, "
        f"{data['bytes'] / 1e6:.1f} MB in {args.shards} shards ({data['planted']} planted near "
        "duplicates). Path: `curate submit --system slurm --nodes 1 --dry-run`, the script run "
        "with bash and the srun/scontrol shims (tests/jobs/shims).", "",
        f"- cluster: {ready.group(0) if ready else '(no cluster line)'}",
        f"- job wall time: {wall:.1f} s; inside the run: {stats['seconds']:.1f} s",
        f"- heuristic_filter: {stage['heuristic_filter']['seconds']:.1f} task-s (sum over "
        f"shards), removed {stage['heuristic_filter']['removed']}",
        f"- fuzzy_dedup: {stage['fuzzy_dedup']['seconds']:.1f} s, device "
        f"{stage['fuzzy_dedup'].get('dedup', {}).get('device', '?')}, removed "
        f"{stage['fuzzy_dedup']['removed']}",
        f"- output identical to `--executor local` with fuzzy_dedup on CPU: "
        f"{'yes' if same else 'NO'}", "",
        "Command: `PYTHONPATH=. python benchmarks/bench_mixed_gpu.py "
        + " ".join(sys.argv[1:]) + "`", ""]
    harness.record(args.out, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
