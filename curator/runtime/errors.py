"""Errors that stop a run (the CLI prints their one-line message and exits 1)."""

from __future__ import annotations


class CurationError(RuntimeError):
    """A record failed and the pipeline says ``on_error: fail``, or a stage is over its budget."""


class ExecutorError(RuntimeError):
    """The executor could not start or reach its workers (scheduler, worker processes)."""
