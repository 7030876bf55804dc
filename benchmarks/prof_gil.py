"""Who holds the GIL in a real run: ``py-spy record --gil`` over ``curate run CONFIG``, its samples
summed by the innermost frame of curator (or pyarrow, numpy, cupy) and by leaf frame.

A pipeline whose stages all release the GIL runs its workers as threads of the driver; a frame
that holds the GIL there stalls every other worker thread. ``--all`` samples every thread
whether or not it holds the GIL (``--idle`` off: where the threads' time goes).

    python benchmarks/prof_gil.py CONFIG [--all] [--rate 100] [--top 30] [--raw out.txt]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

OWN = ("curator/", "pyarrow/", "numpy/", "cupy", "numba/", "distributed/")


def summarise(raw: Path, top: int) -> str:
    """The samples of a py-spy raw (collapsed stacks) file, by innermost own frame and by leaf."""
    own, leaf, threads = Counter(), Counter(), Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        total += n
        frames = stack.split(";")
        threads[frames[0][:60]] += n
        mine = [f for f in frames if any(k in f for k in OWN)]
        own[(mine[-1] if mine else frames[-1])[:150]] += n
        leaf[frames[-1][:150]] += n
    out = [f"samples: {total}", "", "by innermost curator/pyarrow/numpy/cupy/numba frame:"]
    out += [f"{n:7d} {n / max(total, 1):6.1%}  {name}" for name, n in own.most_common(top)]
    out += ["", "by leaf frame:"]
    out += [f"{n:7d} {n / max(total, 1):6.1%}  {name}" for name, n in leaf.most_common(top)]
    out += ["", "by thread (first frame):"]
    out += [f"{n:7d} {n / max(total, 1):6.1%}  {name}" for name, n in threads.most_common(8)]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", type=Path)
    ap.add_argument("--all", action="store_true", help="every thread's samples, not the GIL's")
    ap.add_argument("--rate", type=int, default=100)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--raw", type=Path, default=None, help="keep py-spy's raw file here")
    args = ap.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    raw = args.raw or Path(tempfile.mkdtemp()) / "raw.txt"
    command = [spy, "record", "--threads", "--nonblocking", "-r", str(args.rate), "-f", "raw",
               "-o", str(raw), *([] if args.all else ["--gil"]), "--",
               sys.executable, "-m", "curator", "run", str(args.config)]
    done = subprocess.run(command, env={**os.environ}, capture_output=True, text=True)
    if done.returncode != 0 or not raw.exists():
        raise SystemExit(f"py-spy failed ({done.returncode}):\n{done.stderr[-3000:]}")
    print(summarise(raw, args.top))


if __name__ == "__main__":
    main()
