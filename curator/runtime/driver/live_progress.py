"""``progress.json``: where a running run stands, for readers in other processes (``curate
serve``). The driver rewrites it atomically at every segment or phase boundary and at the end;
figures that move in between are written by a daemon thread at most once a second (the last
ones too, however long the run then waits), so a reader never sees a half-written file and the
run pays one small write a second at most."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

from curator.commit import write_json_atomic

WRITE_EVERY_S = 1.0


class LiveProgress:
    """The run's live figures: the segment it is in, the shards or phase tasks done of that
    segment, documents, bytes, docs/s and ETA (what the terminal shows), and an overall
    fraction (segments done plus the current one's share)."""

    def __init__(self, path: Path, segments: int) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._dirty = False
        self._stop = threading.Event()
        self.state: dict[str, Any] = {
            "state": "running", "started": time.time(), "updated": time.time(),
            "host": socket.gethostname(), "pid": os.getpid(), "segment": 0,
            "segments": segments, "label": "starting", "done": 0, "total": 0, "fraction": 0.0}
        self._write()
        threading.Thread(target=self._flush, name="curator-live-progress", daemon=True).start()

    def _flush(self) -> None:
        while not self._stop.wait(WRITE_EVERY_S):
            with self._lock:
                if self._dirty:
                    self._write()

    def segment(self, index: int) -> None:
        """The run enters segment ``index`` (0-based)."""
        self.update({"segment": index, "label": f"segment {index + 1}", "done": 0, "total": 0,
                     "docs": None, "bytes_done": None, "bytes_total": None,
                     "docs_per_s": None, "eta_s": None}, force=True)

    def update(self, figures: dict[str, Any], force: bool = False) -> None:
        """Merge ``figures``; written now when forced, else within a second."""
        with self._lock:
            self.state.update(figures)
            if self.state["segment"] == 0 and figures.get("docs") is not None:
                self.state["docs_in"] = figures["docs"]  # read so far: the first segment's
            done, total = self.state["done"], self.state["total"]
            share = done / total if total else 0.0
            self.state["fraction"] = round(
                min(1.0, (self.state["segment"] + share) / max(self.state["segments"], 1)), 4)
            self._dirty = True
            if force:
                self._write()

    def finish(self, state: str, error: str | None = None) -> None:
        """The run ended: ``finished`` (fraction 1) or ``stopped`` (with its one-line error)."""
        self._stop.set()
        with self._lock:
            self.state.update({"state": state, "error": error})
            if state == "finished":
                self.state["fraction"] = 1.0
            self._write()

    def _write(self) -> None:
        self.state["updated"] = time.time()
        self._dirty = False
        with contextlib.suppress(OSError):  # a courtesy: a full disk must not stop the run here
            write_json_atomic(self.path, self.state)
