"""SIGKILL-and-resume of fuzzy_dedup, repeated: how often does a killed run resume to the
uninterrupted run's bytes?

  python benchmarks/kill_resume.py [--tries 20] [--seed 0] [--workdir DIR]

The case is the one of ``tests/runtime/test_kill_fuzzy.py`` (``tests/runtime/killing.py``): the
bundled sample 8 times over 24 JSONL shards, read_jsonl → length_filter → fuzzy_dedup (32
buckets) → write_parquet on a 2-process Dask LocalCluster. One uninterrupted reference run; then
each try draws a place (the shards before the barrier, a phase of the stage, the shards after)
and which of its tasks to stop at, seeded, starts ``curate run`` with the ``curator.halt`` hook
set to halt there, kills its process group with SIGKILL once it has halted (driver, scheduler,
workers), runs the same command again and compares every output file, the manifests and
stats.json (timings left out) with the reference. Prints one line per try and a summary; appends
them to ``benchmarks/results_kill_resume.txt`` (``--output``) through ``harness.record``.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import harness

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.runtime import killing  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu",
                        help="fuzzy_dedup's device (gpu: on the local cluster's GPU worker)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where the runs go (default: a temporary folder, removed after)")
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks"
                        / "results_kill_resume.txt")
    args = parser.parse_args()

    base = args.workdir or Path(tempfile.mkdtemp(prefix="kill-resume-"))
    base.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    started = time.monotonic()
    config = killing.fuzzy_case(base, args.device)
    run_dir = base / "run"
    reference = base / "reference"
    shutil.rmtree(reference, ignore_errors=True)
    killing.reference_run(config, run_dir, reference, base / "reference.log")
    rounds = killing.stats(reference)["stages"][2]["dedup"]["component_rounds"]
    places = killing.fuzzy_phases(rounds)
    say(f"fuzzy_dedup (device {args.device}) kill-and-resume: {args.tries} tries, seed "
        f"{args.seed}, "
        f"{killing.FUZZY_SHARDS} shards, {killing.FUZZY_BUCKETS} buckets, {rounds} component "
        f"rounds; reference run {time.monotonic() - started:.1f} s")

    if args.device == "gpu":  # the GPU reference against the same run on the CPU
        cpu_config = base / "pipeline-cpu.yaml"
        cpu_config.write_text(config.read_text().replace("device: gpu", "device: cpu"))
        cpu = killing.reference_run(cpu_config, run_dir, base / "reference-cpu",
                                    base / "reference-cpu.log")
        def kept_and_rejected(run: Path) -> dict[str, bytes]:
            return {k: v for k, v in killing.outputs(run).items()
                    if k.startswith(("write_parquet/", "rejected/"))}

        same = kept_and_rejected(cpu) == kept_and_rejected(reference)
        say(f"GPU reference == CPU reference (every output and rejected file): "
            f"{'yes' if same else 'NO'}")
    rng = random.Random(args.seed)
    identical, different, missed = 0, [], []
    for i in range(args.tries):
        segment, phase, tasks = rng.choice(places)
        at = rng.randint(1, max(1, tasks * 3 // 4))
        point = killing.kill_point(segment, phase, tasks, at)
        log = base / f"try-{i:02d}.log"
        clock = time.monotonic()
        try:
            killing.kill_and_resume(config, run_dir, point, log, reference)
        except killing.KillMissed as err:
            missed.append(i)
            say(f"try {i:2d}  {point.name:22s}  NOT RUN: {str(err).splitlines()[0]}")
            continue
        except AssertionError as err:  # the resumed run failed
            different.append(i)
            say(f"try {i:2d}  {point.name:22s}  RESUME FAILED: {str(err).splitlines()[-1]}")
            continue
        diff = killing.differences(run_dir, reference)
        seconds = time.monotonic() - clock
        if diff:
            different.append(i)
            say(f"try {i:2d}  {point.name:22s}  DIFFERENT ({len(diff)}): first {diff[0]}  "
                f"[{seconds:.1f} s]")
            kept = base / f"different-{i:02d}"
            shutil.rmtree(kept, ignore_errors=True)
            run_dir.rename(kept)
        else:
            identical += 1
            say(f"try {i:2d}  {point.name:22s}  identical  [{seconds:.1f} s]")
    resumed = args.tries - len(missed)
    say(f"{identical} of {resumed} killed-and-resumed runs byte-identical to the reference"
        + (f"; different: tries {different}" if different else "")
        + (f"; {len(missed)} tries not run (kill missed its place): {missed}" if missed else "")
        + f"; {time.monotonic() - started:.0f} s in all")
    harness.record(args.output, harness.fenced("\n".join(lines)),
                   title=f"kill_resume.py, device {args.device}")
    if args.workdir is None and not different:
        shutil.rmtree(base, ignore_errors=True)
    elif different:
        say(f"runs that differ kept under {base}")
    return 0 if identical == args.tries else 1


if __name__ == "__main__":
    sys.exit(main())
