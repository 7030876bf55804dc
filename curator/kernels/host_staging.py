"""Host-to-device copies through a pinned buffer of the calling thread's own.

A copy from pageable memory is staged by the driver and serialised across threads: on the
H200 the GPU dedup paths topped out at ~3.5 GB/s whatever the threads (exact_dedup's hash,
benchmarks/prof_exact_hash.py). Copying into page-locked memory first (numpy releases the GIL,
so threads copy in parallel) lets the DMA engines move the bytes asynchronously. Each thread
keeps its buffer (grown to the next power of two, at least ``MIN_BYTES``) for its next parts:
allocating page-locked memory per call would serialise the threads again.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

MIN_BYTES = 16 << 20
_local = threading.local()


def _pinned(nbytes: int) -> np.ndarray:
    buf = getattr(_local, "buffer", None)
    if buf is None or len(buf) < nbytes:
        import cupyx

        size = max(MIN_BYTES, 1 << (max(nbytes, 1) - 1).bit_length())
        _local.buffer = buf = cupyx.empty_pinned((size,), np.uint8)
    return buf


def to_device(host: np.ndarray, stream: Any) -> Any:
    """A device copy of the uint8 array ``host`` made on ``stream``; returns once the pinned
    buffer may be reused (the copy has landed)."""
    import cupy

    staged = _pinned(len(host))[:len(host)]
    np.copyto(staged, host)
    device = cupy.empty(len(host), cupy.uint8)
    device.set(staged, stream=stream)
    stream.synchronize()
    return device
