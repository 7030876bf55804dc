"""``python -m curator.jobs.ready SCHEDULER_FILE READY_DIR HOSTS [SECONDS]``: wait until every
host of a batch job has started its workers and they have all joined the scheduler, so that
``curate run`` sees the GPU workers when it decides where GPU stages run."""

from __future__ import annotations

import sys
import time
from pathlib import Path


def wait_for_cluster(scheduler_file: str, ready_dir: Path, hosts: int, seconds: float) -> str:
    """Block until ``hosts`` hosts reported and their workers joined; a one-line summary."""
    deadline = time.monotonic() + seconds
    started = Path(scheduler_file).exists
    while len(reports := list(ready_dir.glob("[!.]*"))) < hosts or not started():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(reports)} of {hosts} hosts started workers in {seconds:g} s")
        time.sleep(0.2)
    expected = sum(int(p.read_text() or 0) for p in reports)
    from distributed import Client

    with Client(scheduler_file=scheduler_file, timeout=max(1, deadline - time.monotonic())) as c:
        c.wait_for_workers(expected, timeout=max(1, deadline - time.monotonic()))
        workers = c.scheduler_info(n_workers=-1)["workers"].values()
        gpus = sum(1 for w in workers if w.get("resources", {}).get("GPU", 0) > 0)
        return f"cluster ready: {len(workers)} workers ({gpus} GPU) on {hosts} hosts"


def main(argv: list[str]) -> int:
    scheduler_file, ready_dir, hosts = argv[0], Path(argv[1]), int(argv[2])
    seconds = float(argv[3]) if len(argv) > 3 else 600
    try:
        print(wait_for_cluster(scheduler_file, ready_dir, hosts, seconds), file=sys.stderr)
    except (TimeoutError, OSError) as err:
        print(f"error: the Dask cluster did not start: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
