"""A task's end gives back the memory its process kept for reuse."""

from __future__ import annotations

import numpy as np
import psutil
import pyarrow as pa
import pytest

from curator.runtime.worker.memory import memory_returned

MB = 1 << 20


def _rss() -> int:
    return psutil.Process().memory_info().rss


def test_arrow_pool_memory_goes_back_when_the_task_ends():
    if pa.default_memory_pool().backend_name != "mimalloc":
        pytest.skip("measured with Arrow's default pool (mimalloc)")
    base = _rss()
    with memory_returned():
        buffers = [pa.allocate_buffer(256 << 10) for _ in range(800)]  # 200 MB, written
        for buffer in buffers:
            np.frombuffer(buffer, np.uint8)[::4096] = 1  # every page touched
        del buffers
        kept = _rss() - base
    returned = _rss() - base
    assert kept > 100 * MB  # the pool keeps freed memory resident for reuse
    assert returned < kept / 4


def test_large_blocks_are_unmapped_when_freed():
    """glibc's default threshold rises after a large free (here to 16 MB); with it fixed,
    blocks of 1 MB freed during a task do not stay in the heap between blocks still in use."""
    with memory_returned():
        big = np.ones(16 * MB, np.uint8)
        del big
        base = _rss()
        pairs = [(np.ones(MB, np.uint8), np.ones(4096, np.uint8)) for _ in range(200)]
        still_used = [small for _, small in pairs]  # between the large blocks: no trimming
        del pairs
        assert _rss() - base < 50 * MB
        del still_used
