"""A test hook: stop a run at a named point, so that a test can SIGKILL it there, not race a clock.

Off unless ``CURATOR_HALT`` is set (``NAME`` or ``NAME@N``: the N-th arrival at the point named
``NAME``, counted over every process of the run) together with ``CURATOR_HALT_DIR``. The process
that arrives there writes ``<dir>/halted.json`` (the point, its key, the arrival, its pid) and
waits for the signal; any process that reaches any point after that waits too, so nothing that
passes a point is written once the run has halted. A test that removes ``halted.json`` lets
every waiting process go on (after killing one worker, say). Points are listed in
:data:`POINTS`; the environment is inherited by Dask and Ray worker processes.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from pathlib import Path

HALT = "CURATOR_HALT"
HALT_DIR = "CURATOR_HALT_DIR"
HALTED = "halted.json"

#: Every point a run passes, by name (a name is ``KIND`` or ``KIND:SCOPE``).
POINTS = {
    "download": "a download has written its first bytes (scope: the file name)",
    "shard-commit": "a shard's files are renamed into place, its manifest not yet written "
                    "(scope: segment-NN)",
    "shard-done": "a shard's manifest is written (scope: segment-NN)",
    "phase-task": "a dataset phase task has written its files, its marker not yet "
                  "(scope: the phase)",
    "phase-done": "a dataset phase task's marker is written (scope: the phase)",
    "finalize": "every shard of a segment is committed, its writers not finalized "
                "(scope: segment-NN)",
    "trim": "a dataset stage's record is written, its work folder not yet trimmed "
            "(scope: segment-NN)",
    "stats": "every segment is done, stats.json not yet written",
    "index-piece": "a task's document index rows are written, the files they index not yet "
                   "renamed into place (key: the piece's name)",
    "index": "the document index's files are written in its temporary folder, not yet swapped "
             "in (stats.json and report.html are written)",
}

_SETTING = os.environ.get(HALT)


def point(name: str, key: str = "") -> None:
    """Pass the point ``name`` (``key``: which shard, task or file); a no-op unless a test set
    ``CURATOR_HALT``."""
    if _SETTING is None:
        return
    folder = Path(os.environ[HALT_DIR])
    if not (folder / HALTED).exists():
        wanted, _, nth = _SETTING.partition("@")
        if name != wanted:
            return
        arrival = _arrive(folder, name)
        if arrival != int(nth or 1):
            return
        record = {"point": name, "key": key, "arrival": arrival, "pid": os.getpid()}
        tmp = folder / f".{HALTED}.{os.getpid()}"
        tmp.write_text(json.dumps(record), encoding="utf-8")
        os.replace(tmp, folder / HALTED)
    while (folder / HALTED).exists():  # halted: wait for the test's signal, or its release
        time.sleep(0.05)


def _arrive(folder: Path, name: str) -> int:
    """This arrival's number at ``name``, counted under a file lock over every process."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{name.replace('/', '_')}.count", "a+", encoding="utf-8") as counter:
        fcntl.flock(counter, fcntl.LOCK_EX)
        counter.seek(0)
        arrival = int(counter.read() or 0) + 1
        counter.seek(0)
        counter.truncate()
        counter.write(str(arrival))
        return arrival
