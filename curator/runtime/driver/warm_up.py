"""Stages' ``warm_up`` on a background thread of the process that will run their tasks.

A warm-up that has not ended after :data:`SLOW_S` is compiling kernels (numba's, the first run
on a machine: on-disk caches serve every later run): it says so, so that a first run is never
silent for a minute, and says when they are ready."""

from __future__ import annotations

import logging
import threading
import time

from curator.stages.base import Stage

log = logging.getLogger("curator")

#: Seconds after which a warm-up says that it compiles.
SLOW_S = 2.0


def _warm(stages: list[Stage]) -> None:
    for stage in stages:
        started = time.perf_counter()
        notice = threading.Timer(SLOW_S, log.info, (
            "%s: compiling its kernels (the first run on this machine only: cached after)…",
            stage.type))
        notice.daemon = True
        notice.start()
        try:
            stage.warm_up()
        except Exception as err:  # only a head start: the stage's first task meets it again
            log.debug("warm-up of %s failed: %s", stage.type, err)
        finally:
            notice.cancel()
        took = time.perf_counter() - started
        if took > SLOW_S:
            log.info("%s: kernels ready in %.1f s", stage.type, took)


def warm_up_in_background(stages: list[Stage]) -> threading.Thread:
    """Run every stage's ``warm_up`` on a daemon thread, in order, while the run goes on."""
    thread = threading.Thread(target=_warm, args=(stages,), name="curator-warm-up", daemon=True)
    thread.start()
    return thread
