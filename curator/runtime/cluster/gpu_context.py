"""A GPU worker's CUDA context made ahead of its first task, on a thread of its own, while the
run's earlier segments go on: CuPy's import, the driver's start and the context otherwise took
about 0.4 s of each GPU worker's first signatures task (profiled on an H100:
docs/dedup-scale.md)."""

from __future__ import annotations

import logging
import threading

log = logging.getLogger("curator")
#: Set once this process has tried to make its context (made or not).
TRIED = threading.Event()


def start_context_thread() -> None:
    """Start ``make_context`` on a daemon thread of this process and return at once."""
    threading.Thread(target=make_context, name="curator-cuda-context", daemon=True).start()


def make_context() -> None:
    """CuPy imported and the device's context made; nothing if either fails (no CuPy, no
    device): the worker's first GPU task meets the error and says it."""
    try:
        import cupy

        cupy.empty(1)
    except Exception as err:
        log.debug("no CUDA context made ahead: %s", err)
    finally:
        TRIED.set()
