"""Copy stdin to stdout, each line prefixed with seconds since the start; at the end, the
longest silences (gaps between lines) after the line that starts the run (``curate run``).

    make demo 2>&1 | python3 -u benchmarks/silences.py   (results_demo_silence.md)
"""

import sys
import time


def main() -> None:
    start = time.monotonic()
    last, gaps, run_started = start, [], None
    for line in sys.stdin:
        now = time.monotonic()
        if run_started is not None:
            gaps.append((now - last, line.rstrip()[:120]))
        if run_started is None and "curate run" in line:
            run_started = now
        last = now
        sys.stdout.write(f"{now - start:8.1f} {line}")
        sys.stdout.flush()
    began = run_started - start if run_started is not None else -1.0
    print(f"--- run started at {began:.1f} s; longest silences after it:")
    for gap, line in sorted(gaps, reverse=True)[:5]:
        print(f"{gap:6.1f} s before: {line}")


if __name__ == "__main__":
    main()
