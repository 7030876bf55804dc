"""Progress a person can read: per segment the shards, documents and bytes done, docs/s and an
ETA; per phase of a barrier stage its tasks (``fuzzy_dedup: edges 12/64``). Rich bars on a
terminal, a log line every few seconds otherwise.

A shard task counts what it reads with ``TaskProgress`` and sends it at most once a second: on
a Dask worker through ``Worker.log_event`` (the driver subscribes to the topic), in-process
straight to the handler the local executor registered."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from curator.batch import Shard
from curator.counts import per_second

log = logging.getLogger("curator")

TOPIC = "curator-progress"
SEND_EVERY_S = 1.0
LOG_EVERY_S = 5.0
#: A segment or phase that has logged nothing for this long says where it stands (a task
#: compiling, a long first shard): a run is never silent for long.
HEARTBEAT_S = 8.0

#: topic -> handler, for tasks that run in the driver's process (the local executor).
LOCAL_HANDLERS: dict[str, Callable[[Any], None]] = {}


class TaskProgress:
    """What one shard task has read so far (documents, in-memory bytes): sent after the first
    batch, then at most once a second."""

    def __init__(self, key: str) -> None:
        self.key, self.docs, self.nbytes = key, 0, 0
        self._sent = -SEND_EVERY_S

    def add(self, docs: int, nbytes: int) -> None:
        self.docs += docs
        self.nbytes += nbytes
        if time.monotonic() - self._sent >= SEND_EVERY_S:
            self.send()

    def send(self) -> None:
        """Report the totals now (also once at the end, so the driver learns the byte count)."""
        self._sent = time.monotonic()
        message = [self.key, self.docs, self.nbytes]
        distributed = sys.modules.get("distributed")  # a Dask worker has imported it
        try:
            worker = distributed.get_worker() if distributed else None
        except ValueError:  # not in a Dask task
            worker = None
        if worker is not None:
            worker.log_event(TOPIC, message)
        elif handler := LOCAL_HANDLERS.get(TOPIC):
            handler(message)


def _input_bytes(shard: Shard) -> int:
    if shard.size is not None:
        return shard.size
    try:
        return Path(shard.path).stat().st_size
    except OSError:  # a remote URL: progress is then counted in shards
        return 0


def _amount(done: float, total: float) -> str:
    """``12/340 MB``, ``1.2/4.0 GB``: both in the unit that suits the total."""
    scale, unit = (1e6, "MB") if total < 1e9 else (1e9, "GB")
    return f"{done / scale:.1f}/{total / scale:.1f} {unit}"


class ProgressReporter:
    """Shows one segment, or one phase of a barrier stage, at a time."""

    def __init__(self, enabled: bool = True,
                 live: Callable[[dict[str, Any], bool], None] | None = None) -> None:
        self.enabled = enabled
        self.live = live  # gets the figures (and whether to write them now) on every change
        self.rich = enabled and sys.stderr.isatty()
        self._lock = threading.Lock()
        self._bar: Any = None
        self._sizes: dict[str, int] = {}  # input bytes per task key of a segment; {} in a phase
        self._docs: dict[str, int] = {}
        self._read: dict[str, int] = {}  # in-memory bytes read, per task
        self._finished: set[str] = set()
        self._attached: list[Any] = []
        self._phase = ""
        self._last_line = time.monotonic()
        self._beating: threading.Event | None = None  # set: the heartbeat of a segment stops

    def attach(self, executor: Any) -> None:
        """Receive the executor's task messages (once per executor)."""
        if (self.enabled or self.live) and not any(executor is e for e in self._attached):
            self._attached.append(executor)
            executor.subscribe(TOPIC, self._on_message)

    def start(self, label: str, total: int, done: int,
              tasks: dict[str, Shard] | None = None) -> None:
        """A segment whose ``tasks`` (key -> shard) are to run, or a phase of ``total`` tasks;
        ``done`` were committed by an earlier run."""
        self.stop()
        with self._lock:
            self.label, self.total, self.done = label, total, done
            self._sizes = {key: _input_bytes(s) for key, s in (tasks or {}).items()}
            self._docs, self._read, self._finished = {}, {}, set()
            self._started = time.monotonic()
            self._last_log = 0.0
            self._last_line = time.monotonic()
            self._publish(force=True)
        if self.enabled and not self.rich:
            self._beating = threading.Event()
            threading.Thread(target=self._heartbeat, args=(self._beating,), daemon=True,
                             name="curator-progress-heartbeat").start()
        if self.rich:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._bar = Progress("[bold]{task.description}", BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[stats]}"),
                                 transient=False,
                                 console=Console(stderr=True))
            self._bar.start()
            self._task = self._bar.add_task(label, total=total, completed=done, stats="")
        elif self.enabled and tasks is not None:
            log.info("%s: %d shards, %d already done", label, total, done)

    def advance(self, key: str | None = None, docs: int = 0) -> None:
        """One task finished (a shard task's ``key`` with its ``docs``)."""
        with self._lock:
            self.done += 1
            if key in self._sizes:
                self._finished.add(key)
                self._docs[key] = docs
            self._show(final=self.done == self.total)

    def phase(self, label: str, done: int, total: int) -> None:
        """A barrier stage's phase (``fuzzy_dedup: edges``): ``done`` of its ``total`` tasks."""
        if label != self._phase:
            self._phase = label
            self.start(label, total, done)
        else:
            with self._lock:
                self.done = done
                self._show(final=done == total)
        if done == total:
            self.stop()

    def _on_message(self, message: list) -> None:
        key, docs, nbytes = message
        with self._lock:
            if key not in self._sizes:
                return  # a task of an earlier segment
            self._read[key] = nbytes
            if key not in self._finished:
                self._docs[key] = docs
            self._show(final=False)

    def _figures(self) -> dict[str, Any]:
        """The segment's documents, input bytes done and in all, docs/s and the seconds left
        (None where not known yet); a phase has only its tasks."""
        figures: dict[str, Any] = {"label": self.label, "done": self.done, "total": self.total}
        if not self._sizes:
            return figures
        elapsed = max(time.monotonic() - self._started, 1e-9)
        finished = [k for k in self._finished if self._read.get(k)]
        ratio = (sum(self._sizes[k] for k in finished) / sum(self._read[k] for k in finished)
                 if finished else 1.0)  # input bytes per in-memory byte, as measured so far
        done = sum(self._sizes[k] if k in self._finished
                   else min(self._read.get(k, 0) * ratio, self._sizes[k]) for k in self._sizes)
        total = sum(self._sizes.values())
        left = len(self._sizes) - len(self._finished)
        eta = None
        if total and done >= total / 100:  # an estimate from less is noise
            eta = round(elapsed * (total - done) / done)
        elif self._finished:
            eta = round(elapsed * left / len(self._finished))
        docs = sum(self._docs.values())
        return {**figures, "docs": docs, "bytes_done": round(done), "bytes_total": total,
                "docs_per_s": round(docs / elapsed, 1), "eta_s": eta}

    def _summary(self) -> str:
        """``N docs, a/b GB, r docs/s, ETA h:mm:ss`` for a segment; empty for a phase."""
        if not self._sizes:
            return ""
        f = self._figures()
        eta = "ETA ?" if f["eta_s"] is None else f"ETA {timedelta(seconds=f['eta_s'])}"
        elapsed = max(time.monotonic() - self._started, 1e-9)
        return (f"{f['docs']:,} docs, {_amount(f['bytes_done'], f['bytes_total'])}, "
                f"{per_second(f['docs'], elapsed)} docs/s, {eta}")

    def _publish(self, force: bool) -> None:
        if self.live is not None:
            self.live(self._figures(), force)

    def _show(self, final: bool) -> None:
        self._publish(final)
        stats = self._summary()
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done, stats=stats)
        elif self.enabled and (final or time.monotonic() - self._last_log >= LOG_EVERY_S):
            self._last_log = self._last_line = time.monotonic()
            if self._sizes:
                log.info("%s: %d/%d shards, %s", self.label, self.done, self.total, stats)
            else:
                log.info("%s %d/%d", self.label, self.done, self.total)

    def _heartbeat(self, stopped: threading.Event) -> None:
        """Every second until ``stopped``: a line for a segment or phase that has logged none
        for :data:`HEARTBEAT_S` (its tasks done so far and how long it has run)."""
        while not stopped.wait(1.0):
            with self._lock:
                if not stopped.is_set() and time.monotonic() - self._last_line >= HEARTBEAT_S:
                    self._last_line = time.monotonic()
                    log.info("%s: %d/%d %s done, running %.0f s", self.label, self.done,
                             self.total, "shards" if self._sizes else "tasks",
                             time.monotonic() - self._started)

    def stop(self) -> None:
        with self._lock:
            if self._beating is not None:
                self._beating.set()
                self._beating = None
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
