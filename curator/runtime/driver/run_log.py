"""``run.log``: what a run told its terminal, kept in its run directory (appended run after run,
so that a folder's log tells its history: the first run, its resumptions, incremental reruns)."""

from __future__ import annotations

import logging
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from curator import __version__
from curator.store.run_dir import RunDir

log = logging.getLogger("curator")


@contextmanager
def run_log(run_dir: RunDir, pipeline_name: str) -> Iterator[None]:
    """Copy the ``curator`` logger's records to ``run.log`` while the run lasts; say there when
    it started, and how it ended (finished, or stopped and why)."""
    handler = logging.FileHandler(run_dir.log_file, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s",
                                           datefmt="%Y-%m-%d %H:%M:%S"))
    handler.setLevel(logging.INFO)
    extra: list[logging.Handler] = []
    if not log.hasHandlers():  # the builder's path: keep warnings on stderr, as before
        extra.append(logging.StreamHandler(sys.stderr))
        extra[0].setLevel(logging.WARNING)
    level = log.level
    if log.getEffectiveLevel() > logging.INFO:
        log.setLevel(logging.INFO)
    for h in (handler, *extra):
        log.addHandler(h)
    try:
        _to_file(handler, logging.INFO, "run of %r started (curator %s): %s", pipeline_name,
                 __version__, shlex.join(sys.argv))
        yield
        _to_file(handler, logging.INFO, "run finished")
    except BaseException as err:  # the terminal gets its one-line error from the CLI
        _to_file(handler, logging.ERROR, "run stopped: %s",
                 str(err).splitlines()[0] if str(err) else type(err).__name__)
        raise
    finally:
        for h in (handler, *extra):
            log.removeHandler(h)
        handler.close()
        log.setLevel(level)


def _to_file(handler: logging.Handler, level: int, message: str, *args: object) -> None:
    """A line for ``run.log`` alone (the run's start and end: the terminal has them already)."""
    handler.handle(log.makeRecord(log.name, level, __file__, 0, message, args, None))


def append_to_log(run_dir: RunDir, text: str) -> None:
    """Add what the terminal printed after the run (its funnel, where its outputs are)."""
    stamp = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    with open(run_dir.log_file, "a", encoding="utf-8") as f:
        f.write(f"{stamp} summary\n{text.rstrip()}\n")
