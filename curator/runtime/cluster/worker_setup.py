"""Preloaded into each local Dask worker process: Ctrl-C (SIGINT to the whole foreground process
group) is the driver's to handle; it stops the workers itself. The process starts with SIGINT
blocked (``local_cluster``); from here on it is ignored."""

from __future__ import annotations

import signal
from typing import Any


def dask_setup(worker: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
