"""What the per-document guards cost on the product path: ``curate run`` of the end-to-end
benchmark's pipeline as shipped (``langid_html`` and ``extract_html`` with their default
``timeout_s`` of 60 s: every page of those two stages runs in the segment's sandbox child, one
per worker thread) against the same run with both guards off (``--set
langid_html.timeout_s=null --set extract_html.timeout_s=null``: the stages get whole batches in
the worker, no sandbox is started), on the same input, in interleaved rounds.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_guard_cost.py [--copies 10] [--rounds 3]

Input and pipeline are ``bench_e2e.py``'s (``stage_input``, ``curator_yaml``, ``tokenizer_file``):
data/sample/warc/*.warc.gz (94 responses) plus the 481 HTML pages of the Zyte article benchmark
and trafilatura's evaluation set (../shared/corpus), wrapped into WARC files ``--copies`` times
over under distinct URLs (the copies are exact duplicates: the corpus has only these 575 unique
pages, about 8 s of ``curate run`` on 2 cores), read_warc -> langid_html -> extract_html
(trafilatura) -> langid -> Gopher/C4/FineWeb filters -> fuzzy dedup -> write_parquet ->
tokenize, Dask with ``--workers`` processes. The only change to ``curator_yaml``'s text: its
explicit ``timeout_s: 60`` on extract_html is dropped, so the guarded run is the defaults.
``--warc GLOB`` reads other WARC files instead, such as ``bench_incremental.py``'s unique pages:

    PYTHONPATH=. .venv/bin/python benchmarks/bench_guard_cost.py --rounds 2 \
        --warc 'bench-data/incremental/warc-200mb-8f-seed0/crawl-0[01].warc.gz'

Each round runs ``.venv/bin/curate run`` guarded, then unguarded, each into a fresh run folder
(``--warmup`` unmeasured guarded runs first fill numba's and the page cache). Measured: wall
seconds to the ``curate`` process's exit, and CPU seconds of the whole process tree as
``getrusage(RUSAGE_CHILDREN)`` deltas around the run. The Dask workers are children of
multiprocessing's forkserver, which outlives ``curate`` and would take their CPU time with it:
this process makes itself the child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``) and reaps
every orphan of the run before it reads the delta, so forkserver, workers and sandbox children
are all counted. The process tree is sampled every 0.25 s to count the processes started under
the Dask workers (the sandbox children): the check that ``null`` really turns the sandbox off.

Then every run's published files (the sink folders, ``write_parquet/`` and ``tokens/``, by
bytes, the run folder's own path written as a placeholder in the files that name it:
``blend.json``, ``per_dataset_sequences.json``) are compared with the first guarded run's, and
so are its ``rejected/`` and ``errors/`` files and its funnel (stats.json counts, timings
excluded). Appends a section to ``benchmarks/results_guard_cost.md`` (``harness.record``).
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import ctypes
import glob
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import harness
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_e2e import TIMEOUT_S, curator_yaml, stage_input, tokenizer_file

ROOT = Path(__file__).resolve().parents[1]
GUARDED_STAGES = ("langid_html", "extract_html")
UNGUARDED = [f"{name}.timeout_s=null" for name in GUARDED_STAGES]
VARIANTS = {"guarded": [], "unguarded": UNGUARDED}
PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.25
REAP_WAIT_S = 30.0


@dataclass
class Run:
    variant: str
    round: int
    wall: float
    cpu: float
    sandboxes: int  # processes seen under the Dask workers
    processes: int  # descendants of curate seen
    stage_seconds: float  # langid_html + extract_html, stats.json
    run_seconds: float  # stats.json
    digests: dict[str, str] = field(default_factory=dict)  # sink files
    side: dict[str, str] = field(default_factory=dict)  # rejected/, errors/
    funnel: list = field(default_factory=list)


def become_subreaper() -> bool:
    """Orphaned descendants (the forkserver and its workers) become this process's children, so
    that reaping them adds their CPU time to RUSAGE_CHILDREN."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def reap_all() -> int:
    """Wait for every child left (orphans of the run); kill those still alive after
    ``REAP_WAIT_S``. Returns how many were killed."""
    deadline, killed = time.monotonic() + REAP_WAIT_S, 0
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return killed
        if pid:
            continue
        if time.monotonic() > deadline:
            for child in psutil.Process().children():
                with contextlib.suppress(psutil.Error):
                    child.kill()
                    killed += 1
            deadline = float("inf")
        time.sleep(0.05)


def cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def depth_counts(tree: dict[int, int], root: int) -> dict[int, int]:
    """Processes per depth below ``root`` (1: its children) from pid -> parent pid."""
    counts: dict[int, int] = {}
    for pid in tree:
        depth, parent = 1, tree[pid]
        while parent != root and parent in tree and depth < 16:
            depth, parent = depth + 1, tree[parent]
        if parent == root:
            counts[depth] = counts.get(depth, 0) + 1
    return counts


def measure(cmd: list[str], env: dict, log: Path) -> tuple[float, float, dict[int, int], int]:
    """(wall s, CPU s of the whole tree, processes per depth, rc) of ``cmd``."""
    reap_all()
    cpu0 = cpu_children()
    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        root = psutil.Process(proc.pid)
        tree: dict[int, int] = {}
        while proc.poll() is None:
            with contextlib.suppress(psutil.Error):
                for child in root.children(recursive=True):
                    if child.pid not in tree:
                        with contextlib.suppress(psutil.Error):
                            tree[child.pid] = child.ppid()
            time.sleep(POLL_S)
    wall = time.perf_counter() - start
    killed = reap_all()
    if killed:
        print(f"  ({killed} processes still alive {REAP_WAIT_S:g} s after the run: killed)")
    return wall, cpu_children() - cpu0, depth_counts(tree, proc.pid), proc.returncode


def digest_dir(folder: Path, run_dir: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (key: path relative to the run folder), the run
    folder's path replaced by a placeholder."""
    out = {}
    if not folder.is_dir():
        return out
    marker = str(run_dir).encode()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes().replace(marker, b"<run>")
        out[str(path.relative_to(run_dir))] = hashlib.sha256(data).hexdigest()
    return out


def published(run_dir: Path, stats: dict) -> tuple[dict[str, str], dict[str, str], list]:
    """Digests of the sink folders, of rejected/ and errors/, and the funnel."""
    sinks = []
    for stage in stats["stages"]:
        if stage.get("output"):
            sinks.append(Path(stage["output"]))
        elif stage["type"].startswith("write_"):
            sinks.append(run_dir / stage["name"])
    digests: dict[str, str] = {}
    for folder in sinks:
        digests.update(digest_dir(folder, run_dir))
    side = {**digest_dir(run_dir / "rejected", run_dir), **digest_dir(run_dir / "errors", run_dir)}
    funnel = [[s["name"], s["in"], s["kept"], s["removed"], s["failed"],
               sorted((s.get("removed_by_reason") or s.get("rules") or {}).items())]
              for s in stats["stages"]]
    return digests, side, funnel


def check_config(config: Path) -> list[str]:
    """The guarded stages' timeout_s and whether they run sandboxed, per variant, as curate
    reads the YAML and the --set overrides."""
    from curator.config import load_pipeline
    from curator.runtime.worker.isolation import sandboxed

    lines = []
    for variant, sets in VARIANTS.items():
        pipeline = load_pipeline(config, sets)
        for stage in pipeline.stages:
            if stage.type in GUARDED_STAGES:
                boxed = sandboxed(stage, False)
                lines.append(f"{variant}: {stage.type}.timeout_s = {stage.timeout_s!r}, "
                             f"sandboxed: {boxed}")
                if boxed != (variant == "guarded"):
                    raise SystemExit(f"unexpected: {lines[-1]}")
    return lines


def ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b else "n/a"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--copies", type=int, default=10,
                    help="times the 481 benchmark pages are wrapped (bench_e2e's --copies)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="interleaved rounds, each one guarded and one unguarded run")
    ap.add_argument("--warmup", type=int, default=1, help="unmeasured guarded runs first")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--corpus", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--warc", default=None,
                    help="read these WARC files (a glob) instead of the tiled benchmark pages, "
                    "e.g. bench_incremental.py's unique pages under bench-data/incremental/")
    ap.add_argument("--dir", default="bench-data/guard-cost")
    ap.add_argument("--keep", action="store_true", help="keep every run folder")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results_guard_cost.md"))
    args = ap.parse_args()
    root = Path(args.dir).resolve()

    reaper = become_subreaper()
    # as bench_e2e: curator's modules byte-compiled, as an installed package has them (this
    # machine sets PYTHONDONTWRITEBYTECODE: every process would compile them again)
    compileall.compile_dir(str(ROOT / "curator"), quiet=1)
    if args.warc:
        pattern, n_pages = str(Path(args.warc).resolve()), 0
    else:
        pattern, n_pages = stage_input(root, Path(args.corpus), args.copies)
    tokenizer = tokenizer_file(root)
    yaml = curator_yaml(pattern, tokenizer, args.workers)
    explicit = f", timeout_s: {TIMEOUT_S}"
    if yaml.count(explicit) != 1:
        raise SystemExit(f"bench_e2e.curator_yaml changed: expected one {explicit!r}")
    yaml = yaml.replace(explicit, "")  # the guarded run: the stages' defaults
    config = root / "curator.yaml"
    config.write_text(yaml)
    checks = check_config(config)
    for line in checks:
        print(line)
    curate = Path(sys.executable).parent / "curate"
    if not curate.is_file():
        raise SystemExit(f"no {curate}: install the checkout (pip install -e .)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    runs_dir = root / "runs"
    shutil.rmtree(runs_dir, ignore_errors=True)
    runs_dir.mkdir(parents=True)

    def one(variant: str, rnd: int) -> Run:
        name = f"{variant}-{rnd}" if rnd > 0 else f"warmup-{1 - rnd}"
        out = runs_dir / name
        shutil.rmtree(out, ignore_errors=True)
        cmd = [str(curate), "run", str(config), "--output", str(out)]
        for item in VARIANTS[variant]:
            cmd += ["--set", item]
        wall, cpu, depths, rc = measure(cmd, env, runs_dir / f"{name}.log")
        if rc:
            log = (runs_dir / f"{name}.log").read_text(errors="replace")
            raise SystemExit(f"curate run ({variant}, round {rnd}) failed, rc {rc}:\n"
                             f"{log[-3000:]}")
        stats = json.loads((out / "stats.json").read_text())
        digests, side, funnel = published(out, stats)
        stage_s = sum(s.get("seconds", 0.0) for s in stats["stages"]
                      if s["type"] in GUARDED_STAGES)
        # the Dask workers are depth 2 (curate -> forkserver -> worker): what runs under them
        sandboxes = sum(n for depth, n in depths.items() if depth >= 3)
        run = Run(variant, rnd, wall, cpu, sandboxes, sum(depths.values()), stage_s,
                  stats.get("seconds", 0.0), digests, side, funnel)
        print(f"{name:12s}: {wall:6.1f} s wall, {cpu:6.1f} CPU-s, "
              f"{run.processes} processes ({sandboxes} under the workers), "
              f"langid_html+extract_html {stage_s:.1f} s", flush=True)
        if not args.keep and name != "guarded-1":  # the reference for the sizes
            shutil.rmtree(out, ignore_errors=True)
        return run

    n_in = len(glob.glob(pattern)) if args.warc else \
        sum(1 for _ in Path(pattern).parent.parent.glob("*/*.warc.gz"))
    print(f"input: {pattern} ({n_in} files), {n_pages} pages x {args.copies} + sample; "
          f"{args.rounds} rounds", flush=True)
    for i in range(args.warmup):
        one("guarded", -i)
    runs = []
    for rnd in range(1, args.rounds + 1):
        for variant in VARIANTS:
            runs.append(one(variant, rnd))

    # ------------------------------------------------------------------ outputs
    ref = runs[0]
    differ = []
    for run in runs[1:]:
        for what, mine, theirs in (("sink files", run.digests, ref.digests),
                                   ("rejected/errors files", run.side, ref.side),
                                   ("funnel", run.funnel, ref.funnel)):
            if mine != theirs:
                if isinstance(mine, dict):
                    keys = sorted(k for k in mine.keys() | theirs.keys()
                                  if mine.get(k) != theirs.get(k))
                    detail = ", ".join(keys[:5]) + (" ..." if len(keys) > 5 else "")
                else:
                    detail = "counts differ"
                differ.append(f"{run.variant} round {run.round}: {what} differ from guarded "
                              f"round 1 ({detail})")
    sink_bytes = sum((runs_dir / "guarded-1" / k).stat().st_size for k in ref.digests
                     if (runs_dir / "guarded-1" / k).exists())
    records = ref.funnel[0][1] if ref.funnel else 0

    # ------------------------------------------------------------------ report
    by = {v: [r for r in runs if r.variant == v] for v in VARIANTS}
    summary = {}
    for variant, rs in by.items():
        walls, cpus = [r.wall for r in rs], [r.cpu for r in rs]
        summary[variant] = {"wall_best": min(walls), "wall_median": statistics.median(walls),
                            "cpu_best": min(cpus), "cpu_median": statistics.median(cpus),
                            "stage_median": statistics.median(r.stage_seconds for r in rs),
                            "sandboxes": sorted({r.sandboxes for r in rs})}
    g, u = summary["guarded"], summary["unguarded"]
    lines = [
        "# Cost of the per-document guards (langid_html, extract_html timeout_s), curate run",
        "",
        (f"Input: {records} WARC response records of `{args.warc}` (as given), "
         if args.warc else
         f"Input: {records} WARC response records ({n_pages} benchmark pages x {args.copies} "
         f"copies under distinct URLs, exact duplicates, + the bundled sample's responses "
         f"once), ")
        + f"bench_e2e's pipeline, Dask, {args.workers} workers; the code of `{ROOT}`. "
        f"{args.rounds} "
        f"interleaved rounds (guarded, unguarded), {args.warmup} unmeasured guarded run(s) "
        "first, a fresh run folder each. CPU: the whole process tree "
        "(RUSAGE_CHILDREN, orphans reaped as subreaper"
        + ("" if reaper else "; **subreaper refused: orphans' CPU missing**") + ").",
        "",
        "guarded: defaults (`timeout_s` 60 on both); unguarded: `--set "
        "langid_html.timeout_s=null --set extract_html.timeout_s=null`. As curate reads them:",
        "",
        *[f"* {line}" for line in checks],
        f"* processes seen under the Dask workers (sandbox children) per run: guarded "
        f"{g['sandboxes']}, unguarded {u['sandboxes']}",
        "",
        "| round | variant | wall s | CPU s | processes | under workers | "
        "langid_html+extract_html s (stats) | run s (stats) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
        *[f"| {r.round} | {r.variant} | {r.wall:.1f} | {r.cpu:.1f} | {r.processes} | "
          f"{r.sandboxes} | {r.stage_seconds:.1f} | {r.run_seconds:.1f} |" for r in runs],
        "",
        "| | guarded | unguarded | guarded / unguarded |",
        "|---|---:|---:|---:|",
        f"| wall s, best | {g['wall_best']:.1f} | {u['wall_best']:.1f} | "
        f"**{ratio(g['wall_best'], u['wall_best'])}** |",
        f"| wall s, median | {g['wall_median']:.1f} | {u['wall_median']:.1f} | "
        f"**{ratio(g['wall_median'], u['wall_median'])}** |",
        f"| CPU s, best | {g['cpu_best']:.1f} | {u['cpu_best']:.1f} | "
        f"**{ratio(g['cpu_best'], u['cpu_best'])}** |",
        f"| CPU s, median | {g['cpu_median']:.1f} | {u['cpu_median']:.1f} | "
        f"**{ratio(g['cpu_median'], u['cpu_median'])}** |",
        f"| langid_html+extract_html s, median (stats.json) | {g['stage_median']:.1f} | "
        f"{u['stage_median']:.1f} | {ratio(g['stage_median'], u['stage_median'])} |",
        "",
    ]
    if differ:
        lines += ["**Outputs differ:**", "", *[f"* {d}" for d in differ], ""]
    else:
        lines += [f"Outputs: **identical** in all {len(runs)} runs: {len(ref.digests)} "
                  f"published files ({sink_bytes / 1e6:.1f} MB: write_parquet/ and tokens/, "
                  f"by bytes, the run folder's path made a placeholder), {len(ref.side)} "
                  "rejected/ and errors/ files, and the funnel's counts.", ""]
    text = "\n".join(lines)
    print()
    print(text)
    figures = {"copies": args.copies, "records": records, "workers": args.workers,
               "rounds": args.rounds, "summary": summary, "identical": not differ,
               "differ": differ,
               "runs": [{"round": r.round, "variant": r.variant, "wall_s": round(r.wall, 2),
                         "cpu_s": round(r.cpu, 2), "processes": r.processes,
                         "under_workers": r.sandboxes,
                         "guarded_stages_s": round(r.stage_seconds, 2)} for r in runs]}
    harness.record(args.out, text, figures=figures)


if __name__ == "__main__":
    main()
