"""Memory a task gives back when it ends, so that a run's peak does not grow with the corpus.

Arrow's pool (mimalloc) keeps what a task freed for the next allocations of the thread that
made them, and glibc raises its mmap threshold after each large free, so that later large
buffers (Parquet pages, compression contexts) come from heaps it seldom returns. Over many
tasks both grew a 2-worker fuzzy-dedup run's peak by ~15-20 % from 1x to 4x the text:
docs/design-notes.md, "Flat memory".
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache

import pyarrow as pa

_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
#: Blocks from this size up are mapped on their own and unmapped when freed (a fixed threshold:
#: glibc's default starts here and rises after each large free).
MMAP_THRESHOLD = 128 << 10


@cache
def _fixed_mmap_threshold() -> bool:
    name = ctypes.util.find_library("c")
    mallopt = getattr(ctypes.CDLL(name), "mallopt", None) if name else None  # glibc only
    return bool(mallopt and mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))


@contextmanager
def memory_returned() -> Iterator[None]:
    """Run a task; when it ends, what Arrow's pool kept for reuse goes back to the system."""
    _fixed_mmap_threshold()
    try:
        yield
    finally:
        pa.default_memory_pool().release_unused()
