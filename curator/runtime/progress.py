"""Progress: rich bars on a terminal, plain log lines otherwise."""

from __future__ import annotations

import logging
import sys
import time

log = logging.getLogger("curator")


class ProgressReporter:
    """Counts finished shards of one segment at a time."""

    def __init__(self, enabled: bool = True) -> None:
        self.rich = enabled and sys.stderr.isatty()
        self.enabled = enabled
        self._bar = None

    def start(self, label: str, total: int, done: int) -> None:
        self.label, self.total, self.done = label, total, done
        self._last_log = 0.0
        if self.rich:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

            self._bar = Progress("[bold]{task.description}", BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), transient=False)
            self._bar.start()
            self._task = self._bar.add_task(label, total=total, completed=done)
        elif self.enabled:
            log.info("%s: %d shards, %d already done", label, total, done)

    def advance(self) -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.advance(self._task)
        elif self.enabled and (time.monotonic() - self._last_log > 5 or self.done == self.total):
            self._last_log = time.monotonic()
            log.info("%s: %d/%d shards", self.label, self.done, self.total)

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
