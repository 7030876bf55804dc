"""The failure budget: a stage that fails too many documents of a shard is a bug, not bad data.

A stage stops the run when its failures in a shard exceed ``max_failed_fraction`` of the
documents it got there (and number at least ``MIN_FAILED``, so that one bad document in a tiny
shard does not). It is stopped early, before the shard is through, when a sample is clearly over
the budget: the documents of the shard so far, or single documents sampled from a batch the stage
failed on as a whole. "Clearly" means more than ``fraction * n + 3 * sqrt(n * fraction * (1 -
fraction))`` of at least ``MIN_SAMPLE`` documents, which a stage failing at the budget's rate
reaches by chance about once in a thousand samples.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from curator.batch import Failure
from curator.runtime.errors import CurationError

MIN_FAILED = 5
MIN_SAMPLE = 32


class FailureBudgetExceeded(CurationError):
    """A stage failed more documents than ``max_failed_fraction`` allows."""


@dataclass
class FailureBudget:
    """One stage's failures in one shard, checked against ``fraction`` as they come."""

    stage: str
    shard: str
    fraction: float
    seen: int = 0
    failed: int = 0
    first: Failure | None = None

    def record(self, n: int, failures: list[Failure]) -> None:
        """Count a batch of ``n`` documents and its failures; stop if the shard so far is over."""
        self.seen += n
        self.failed += len(failures)
        self.note(failures)
        self.check_sample(self.failed, self.seen, "the first {n} documents")

    def note(self, failures: list[Failure]) -> None:
        """Remember the shard's first failure for the message."""
        if self.first is None and failures:
            self.first = failures[0]

    def check_sample(self, failed: int, n: int, what: str) -> None:
        """Stop when ``failed`` of ``n`` documents (described by ``what``) are clearly too many."""
        f = self.fraction
        if n >= MIN_SAMPLE and failed > f * n + 3 * math.sqrt(n * f * (1 - f)):
            raise self._exceeded(failed, what.format(n=n))

    def check_shard(self) -> None:
        """At the end of the shard: stop when its failures exceed the budget."""
        if self.failed >= MIN_FAILED and self.failed > self.fraction * self.seen:
            raise self._exceeded(self.failed, f"the {self.seen} documents")

    def _exceeded(self, failed: int, what: str) -> FailureBudgetExceeded:
        first = ""
        if self.first is not None:
            error = " ".join(self.first.error.split())
            first = f"; first error{f' (id {self.first.id})' if self.first.id else ''}: {error}"
        return FailureBudgetExceeded(
            f"stage {self.stage!r} failed on {failed} of {what} of shard {self.shard} "
            f"(max_failed_fraction {self.fraction:g}){first}")
