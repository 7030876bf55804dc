"""``curate serve`` under load: 50 clients polling a running run's progress once a second.

    python benchmarks/bench_serve.py                 # 3 runs without clients, 3 with (~8 min)
    python benchmarks/bench_serve.py --copies 4 --runs 1 --seconds 20   # a quick look

The run: ``curate run`` of read_jsonl → heuristic_filter → exact_dedup → write_parquet (its
default local Dask cluster) on the bundled sample documents (English speeches, Japanese
literature) copied ``--copies`` times over ``--shards`` JSONL files. The service: ``curate
serve`` of the runs folder, one subprocess for the whole benchmark. The clients: a process of
their own (asyncio, one aiohttp session each; on the run's own cores, so their CPU counts
against the run), each asking ``/api/runs/{run}/progress`` once a second
(their starts spread over the first second) from the moment the run's folder is listed until
``--seconds`` have passed or the run has ended. After one untimed run (caches warm), runs
alternate without and with clients in the order A B B A A B (a drift of the machine over the
benchmark then weighs on both sides alike; the service is up, idle, for the runs without); each
run's wall time is its ``curate run`` process's, start to exit. Reported: request latency
(median, p99, max; every answer must be 200) and the median run time of each side; verdict:
the run with clients at most 5 % slower.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
TOKEN = "bench-serve-token"
ALLOWED_SLOWDOWN = 0.05
URL_LINE = re.compile(r"http://127\.0\.0\.1:(\d+)/")


def write_inputs(folder: Path, copies: int, shards: int) -> int:
    """The sample documents, ``copies`` times (ids made unique), dealt over ``shards`` JSONL
    files; returns the number of documents."""
    docs = []
    for path in sorted(SAMPLE.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            docs += [json.loads(line) for line in f]
    folder.mkdir(parents=True, exist_ok=True)
    handles = [open(folder / f"shard-{i:03d}.jsonl", "w", encoding="utf-8")  # noqa: SIM115
               for i in range(shards)]
    n = 0
    for copy in range(copies):
        for doc in docs:
            record = {"id": f"{doc['id']}#{copy}", "text": doc["text"], "source": "sample"}
            handles[n % shards].write(json.dumps(record, ensure_ascii=False) + "\n")
            n += 1
    for handle in handles:
        handle.close()
    return n


def pipeline(folder: Path, inputs: Path) -> Path:
    config = folder / "serve-bench.yaml"
    config.write_text(f"name: serve-bench\nstages:\n"
                      f"  - {{type: read_jsonl, path: '{inputs}/*.jsonl'}}\n"
                      f"  - {{type: heuristic_filter}}\n  - {{type: exact_dedup}}\n"
                      f"  - {{type: write_parquet}}\n", encoding="utf-8")
    return config


def start_service(runs: Path, log: Path) -> tuple[subprocess.Popen, int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "curator", "serve", str(runs), "--port", "0",
                             "--token", TOKEN], stdout=subprocess.PIPE,
                            stderr=open(log, "wb"), text=True, env=env)  # noqa: SIM115
    match = URL_LINE.search(proc.stdout.readline())
    if match is None:
        proc.kill()
        raise SystemExit(f"curate serve did not start; see {log}")
    return proc, int(match.group(1))


async def client(session: aiohttp.ClientSession, url: str, offset: float, stop: asyncio.Event,
                 latencies: list[float], failures: list[str]) -> None:
    """Ask ``url`` once a second (on a fixed schedule from ``offset``) until ``stop``."""
    await asyncio.sleep(offset)
    tick = time.monotonic()
    while not stop.is_set():
        began = time.perf_counter()
        try:
            async with session.get(url) as response:
                await response.read()
                if response.status != 200:
                    failures.append(str(response.status))
        except aiohttp.ClientError as err:
            failures.append(type(err).__name__)
        latencies.append(time.perf_counter() - began)
        tick += 1.0
        await asyncio.sleep(max(0.0, tick - time.monotonic()))


async def poll(url: str, clients: int, seconds: float, stop_file: Path
               ) -> tuple[list[float], list[str]]:
    """``clients`` pollers of ``url``, from when it answers 200 until ``seconds`` have passed
    or ``stop_file`` exists (the run has ended)."""
    latencies: list[float] = []
    failures: list[str] = []
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with aiohttp.ClientSession(headers=headers) as probe:
        while not stop_file.exists():
            async with probe.get(url) as response:
                if response.status == 200:
                    break
            await asyncio.sleep(0.2)
    stop = asyncio.Event()
    sessions = [aiohttp.ClientSession(headers=headers) for _ in range(clients)]
    try:
        tasks = [asyncio.create_task(client(s, url, i / clients, stop, latencies, failures))
                 for i, s in enumerate(sessions)]
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not stop_file.exists():
            await asyncio.sleep(0.2)
        stop.set()
        await asyncio.gather(*tasks)
    finally:
        await asyncio.gather(*(s.close() for s in sessions))
    return latencies, failures


def start_clients(port: int, name: str, clients: int, seconds: float, folder: Path
                  ) -> tuple[subprocess.Popen, Path, Path]:
    """The pollers in a process of their own (at normal priority: they stand for browsers on
    other machines, yet here they share the run's cores, and their CPU is charged to the run).
    Returns the process, its stop file and its result file."""
    stop, result = folder / "clients.stop", folder / "clients.json"
    stop.unlink(missing_ok=True)
    result.unlink(missing_ok=True)
    url = f"http://127.0.0.1:{port}/api/runs/{name}/progress"
    proc = subprocess.Popen([sys.executable, __file__, "--poll", url,
                             "--clients", str(clients), "--seconds", str(seconds),
                             "--stop-file", str(stop), "--result", str(result)])
    return proc, stop, result


def one_run(config: Path, output: Path, log: Path, port: int | None, clients: int,
            seconds: float, latencies: list[float], failures: list[str]) -> tuple[float, float]:
    """Wall seconds of one ``curate run`` into a fresh ``output`` (with pollers when ``port``
    is given), and the pollers' CPU seconds."""
    shutil.rmtree(output, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    pollers = None
    began = time.perf_counter()
    with open(log, "ab") as out:
        run = subprocess.Popen([sys.executable, "-m", "curator", "run", str(config), "--output",
                                str(output)], stdout=out, stderr=subprocess.STDOUT, env=env)
        if port is not None:
            pollers, stop, result = start_clients(port, output.name, clients, seconds,
                                                  output.parent)
        code = run.wait()
    wall = time.perf_counter() - began
    cpu = 0.0
    if pollers is not None:
        stop.touch()
        pollers.wait()
        answer = json.loads(result.read_text())
        latencies += answer["latencies"]
        failures += answer["failures"]
        cpu = answer["cpu"]
    if code != 0:
        raise SystemExit(f"curate run failed ({code}); see {log}")
    return wall, cpu


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=44, help="copies of the sample documents")
    ap.add_argument("--shards", type=int, default=96, help="input JSONL files")
    ap.add_argument("--runs", type=int, default=3, help="runs without and with clients, each")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60.0, help="how long the clients poll")
    ap.add_argument("--dir", type=Path, default=ROOT / "bench-data" / "serve")
    ap.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results_serve.md")
    ap.add_argument("--poll", help=argparse.SUPPRESS)  # the pollers' process (start_clients)
    ap.add_argument("--stop-file", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.poll:
        latencies, failures = asyncio.run(poll(args.poll, args.clients, args.seconds,
                                               args.stop_file))
        args.result.write_text(json.dumps({"latencies": latencies, "failures": failures,
                                           "cpu": _cpu(psutil.Process())}))
        return

    shutil.rmtree(args.dir, ignore_errors=True)
    args.dir.mkdir(parents=True)
    documents = write_inputs(args.dir / "in", args.copies, args.shards)
    size = sum(p.stat().st_size for p in (args.dir / "in").iterdir())
    config = pipeline(args.dir, args.dir / "in")
    runs = args.dir / "runs"
    runs.mkdir()
    service, port = start_service(runs, args.dir / "serve.log")
    walls: dict[str, list[float]] = {"without": [], "with": []}
    latencies: list[float] = []
    failures: list[str] = []
    cpu = {"service": 0.0, "clients": 0.0}  # CPU seconds spent during the runs with clients
    try:
        one_run(config, runs / "warm-up", args.dir / "runs.log", None, 0, 0, [], [])
        for i in range(args.runs):
            for side in ("without", "with") if i % 2 == 0 else ("with", "without"):
                served = _cpu(psutil.Process(service.pid))
                wall, polled = one_run(config, runs / f"run-{side}-{i}", args.dir / "runs.log",
                                       port if side == "with" else None, args.clients,
                                       args.seconds, latencies, failures)
                if side == "with":
                    cpu["service"] += _cpu(psutil.Process(service.pid)) - served
                    cpu["clients"] += polled
                walls[side].append(wall)
                print(f"run {i + 1}/{args.runs} {side} clients: {wall:.1f} s", flush=True)
    finally:
        service.terminate()
        service.wait(30)

    without, with_ = statistics.median(walls["without"]), statistics.median(walls["with"])
    slower = with_ / without - 1
    ms = [x * 1000 for x in latencies]
    verdict = "PASS" if slower <= ALLOWED_SLOWDOWN and not failures else "FAIL"
    lines = [
        "# curate serve: 50 clients polling a running run's progress",
        "",
        f"Run: read_jsonl → heuristic_filter → exact_dedup → write_parquet on {documents:,} "
        f"sample documents ({size / 1e6:.1f} MB of JSONL in {args.shards} files), default "
        f"executor; {args.runs} runs each side.",
        f"Clients: {args.clients}, each polling /api/runs/{{run}}/progress once a second for up "
        f"to {args.seconds:.0f} s, from a process apart from the service (`curate serve` "
        "subprocess) and the run, on the same 2 cores; one untimed run first, then the runs "
        "in the order A B B A A B (A: without clients).",
        "",
        "| figure | value |",
        "| --- | --- |",
        f"| requests | {len(ms):,} ({len(failures)} not 200) |",
        f"| latency median | {statistics.median(ms):.2f} ms |",
        f"| latency p99 | {percentile(ms, 0.99):.2f} ms |",
        f"| latency max | {max(ms):.2f} ms |",
        f"| run wall, no clients (median of {args.runs}) | {without:.1f} s "
        f"({', '.join(f'{w:.1f}' for w in walls['without'])}) |",
        f"| run wall, {args.clients} clients (median of {args.runs}) | {with_:.1f} s "
        f"({', '.join(f'{w:.1f}' for w in walls['with'])}) |",
        f"| slower with clients | {slower:+.1%} |",
        f"| CPU of the service during the runs with clients | {cpu['service']:.1f} s "
        f"({cpu['service'] / sum(walls['with']):.1%} of one core) |",
        f"| CPU of the clients' process, same runs | {cpu['clients']:.1f} s "
        f"({cpu['clients'] / sum(walls['with']):.1%} of one core) |",
        "",
        f"Verdict: {verdict} (at most {ALLOWED_SLOWDOWN:.0%} slower, every answer 200).",
    ]
    print("\n".join(lines))
    harness.record(args.results, "\n".join(lines), figures={
        "documents": documents, "bytes": size, "requests": len(ms), "failures": failures[:20],
        "latency_ms": {"median": statistics.median(ms), "p99": percentile(ms, 0.99),
                       "max": max(ms)},
        "wall_s": walls, "slower": slower, "cpu_s": cpu, "verdict": verdict})


if __name__ == "__main__":
    main()
