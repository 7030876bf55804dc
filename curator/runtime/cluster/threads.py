"""Whether a local cluster may run its GIL-free work on threads of the driver: only while it has
few workers. Threads spare the workers' start (1.5-2 s) and pickling, but the threads of one
process share its address space: on 16 threads every page fault and every freed block that goes
back to the system contends with the others, and small Python-bound tasks queue for the GIL. At
16 workers an exact-dedup run at 8.27 GB took 29.0 s on threads and 21.5 s on worker processes
(one H100 machine's 16 cores, the same output); at 2 workers both took ~12 s for 1 GB
(docs/design-notes.md, "Threads or processes")."""

from __future__ import annotations

import os

#: The most local workers that run GIL-free segments as threads of one process.
THREADS_UP_TO = 4


def local_workers(workers: int | None) -> int:
    """The workers a local cluster starts: ``workers``, or one per core."""
    return workers or os.cpu_count() or 1


def threads_suffice(workers: int | None) -> bool:
    """Whether a local cluster of ``workers`` runs its GIL-free segments on threads."""
    return local_workers(workers) <= THREADS_UP_TO
