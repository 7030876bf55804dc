"""What a document lookup by id costs in a finished run's folder, three ways: the index alone
(a settled run), the pieces commits write (a running run: one piece per data file here, the
index set aside), and a scan of every data file's id column (no index, no pieces); the three
must find the same places.

    python benchmarks/bench_index_lookup.py RUN_DIR [--lookups 100]

RUN_DIR is copied first (it is left as it was). The ids looked up are drawn from the last data
file, a fixed seed.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import harness

from curator.store.doc_index import INDEX, PIECES, data_files, lookup, write_piece
from curator.store.run_dir import RunDir

RESULTS = Path(__file__).resolve().parent / "results_index_lookup.md"


def _timed(run: RunDir, ids: list[str], settled: bool) -> tuple[float, list]:
    started = time.perf_counter()
    found = [sorted((loc.path, loc.row_group, loc.row, loc.via)
                    for loc in lookup(run, doc_id, "id", settled)) for doc_id in ids]
    return (time.perf_counter() - started) / len(ids) * 1e3, found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--lookups", type=int, default=100)
    ap.add_argument("--scans", type=int, default=10, help="lookups timed by scan (slow)")
    harness.add_results_argument(ap, RESULTS)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = RunDir(Path(tmp) / "run")
        shutil.copytree(args.run, run.root)
        files = data_files(run).files
        ids = pq.read_table(files[-1], columns=["id"]).column("id").to_pylist()
        ids = random.Random(1).sample(ids, min(args.lookups, len(ids)))
        index_ms, by_index = _timed(run, ids, settled=True)
        shutil.rmtree(run.root / INDEX)
        started = time.perf_counter()
        for n, path in enumerate(files):
            write_piece(run, f"file-{n:05d}", [(path, path)])
        pieces_s = time.perf_counter() - started
        piece_ms, by_piece = _timed(run, ids, settled=False)
        shutil.rmtree(run.root / PIECES)
        scan_ms, by_scan = _timed(run, ids[:args.scans], settled=False)

    def places(found: list) -> list:
        return [[place[:3] for place in doc] for doc in found]

    same = places(by_index) == places(by_piece) and places(by_scan) == places(by_piece)[
        :args.scans]
    lines = [f"Run: `{args.run}`: {len(files)} data files; {len(ids)} ids looked up "
             f"({args.scans} by scan).", "",
             "| lookup by id | ms per lookup |", "|---|---:|",
             f"| settled run: the index alone | {index_ms:.2f} |",
             f"| running run: {len(files)} pieces (written in {pieces_s:.2f} s) | "
             f"{piece_ms:.2f} |",
             f"| no index, no pieces: every file's id column | {scan_ms:.1f} |", "",
             f"The three found the same places: {same}."]
    harness.record(args.results, "\n".join(lines), figures={
        "files": len(files), "index_ms": index_ms, "piece_ms": piece_ms, "scan_ms": scan_ms,
        "pieces_seconds": pieces_s, "same": same})
    print("\n".join(lines))
    if not same:
        raise SystemExit("the lookups disagree")


if __name__ == "__main__":
    main()
