"""Stages' ``warm_up`` on a background thread of the process that will run their tasks."""

from __future__ import annotations

import logging
import threading

from curator.stages.base import Stage

log = logging.getLogger("curator")


def _warm(stages: list[Stage]) -> None:
    for stage in stages:
        try:
            stage.warm_up()
        except Exception as err:  # only a head start: the stage's first task meets it again
            log.debug("warm-up of %s failed: %s", stage.type, err)


def warm_up_in_background(stages: list[Stage]) -> threading.Thread:
    """Run every stage's ``warm_up`` on a daemon thread, in order, while the run goes on."""
    thread = threading.Thread(target=_warm, args=(stages,), name="curator-warm-up", daemon=True)
    thread.start()
    return thread
