"""Stages' ``warm_up``: on a background thread of the process that will run their tasks, or,
where worker processes run them, on a background thread of the driver that the run waits for
before the first segment holding a warmed stage (numba's on-disk cache then serves the workers,
and earlier segments run meanwhile: the reader segment of a dedup run, say).

A warm-up that has not ended after :data:`SLOW_S` is compiling kernels (numba's, the first run
on a machine: on-disk caches serve every later run): it says so, then how long it has been at
it every few seconds, so that a first run is never silent for long, and says when they are
ready."""

from __future__ import annotations

import logging
import threading
import time

from curator.stages.base import Stage

log = logging.getLogger("curator")

#: Seconds after which a warm-up says that it compiles; then how often it says it still does.
SLOW_S = 2.0
STILL_S = 5.0


def _warm(stages: list[Stage]) -> None:
    for stage in stages:
        started = time.perf_counter()
        stop = threading.Event()
        notice = threading.Thread(target=_notices, args=(stage.type, started, stop),
                                  name="curator-warm-up-notices", daemon=True)
        notice.start()
        try:
            stage.warm_up()
        except Exception as err:  # only a head start: the stage's first task meets it again
            log.debug("warm-up of %s failed: %s", stage.type, err)
        finally:
            stop.set()
        took = time.perf_counter() - started
        if took > SLOW_S:
            log.info("%s: kernels ready in %.1f s", stage.type, took)


def _notices(stage_type: str, started: float, stop: threading.Event) -> None:
    """Say that a warm-up compiles once it has taken :data:`SLOW_S`, then every
    :data:`STILL_S` how long it has been at it."""
    if stop.wait(SLOW_S):
        return
    log.info("%s: compiling its kernels (the first run on this machine only: cached after)…",
             stage_type)
    while not stop.wait(STILL_S):
        log.info("%s: still compiling its kernels (%.0f s)", stage_type,
                 time.perf_counter() - started)


def warm_up_in_background(stages: list[Stage]) -> threading.Thread:
    """Run every stage's ``warm_up`` on a daemon thread, in order, while the run goes on."""
    thread = threading.Thread(target=_warm, args=(stages,), name="curator-warm-up", daemon=True)
    thread.start()
    return thread


class WarmUpAhead:
    """The CPU stages' ``warm_up`` running in the driver for worker processes: numba's on-disk
    cache, which they share, then serves them, and the first run's compiling is said and charged
    to no stage. GPU stages are left to their workers (a CUDA context here would hold the driver
    on a device). ``before`` waits for it where a segment holds a stage it warms."""

    def __init__(self, stages: list[Stage]) -> None:
        warmed = [stage for stage in stages if not stage.resources().get("GPU")
                  and type(stage).warm_up is not Stage.warm_up]
        self.types = {stage.type for stage in warmed}
        self.thread = warm_up_in_background(warmed) if warmed else None

    def before(self, stages: list[Stage]) -> None:
        """Return once the warm-up is over, if one of ``stages`` is a stage it warms."""
        if self.thread is not None and any(stage.type in self.types for stage in stages):
            self.thread.join()
