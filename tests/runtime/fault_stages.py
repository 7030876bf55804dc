"""Third-party stages that misbehave on purpose, loaded by the tests through ``imports:``."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from curator import BatchResult, BatchStage, Filter

KILL = "KILL"  # a document starting with this kills the process that runs the stage on it
HANG = "HANG"  # ...with this makes the stage sleep for ever


def _starts_with(batch: pa.Table, prefix: str) -> bool:
    return pc.any(pc.starts_with(batch.column("text"), prefix)).as_py()


class Deadly(Filter):
    """Removes documents shorter than ``min_chars``; dies on a KILL document."""

    type = "test_deadly"

    min_chars: int = Field(3000, description="Shorter documents are removed as 'short'.")

    def reasons(self, batch: pa.Table) -> pa.Array:
        if _starts_with(batch, KILL):
            os._exit(1)
        short = pc.less(pc.utf8_length(batch.column("text")), self.min_chars)
        return pc.if_else(short, "short", pa.scalar(None, pa.string()))


class Sleepy(BatchStage):
    """Adds each document's length in characters; never returns on a HANG document."""

    type = "test_sleepy"

    def process(self, batch: pa.Table) -> BatchResult:
        if _starts_with(batch, HANG):
            time.sleep(10**6)
        return BatchResult(kept=batch.append_column("chars", pc.utf8_length(batch["text"])))


class Broken(BatchStage):
    """Raises on every document; appends a byte to ``calls`` on every call to ``process``."""

    type = "test_broken"

    calls: str = Field(description="File that counts the calls, one byte each.")

    def process(self, batch: pa.Table) -> BatchResult:
        with Path(self.calls).open("ab") as f:
            f.write(b".")
        raise ValueError("this stage is broken")


#: Set by a test in its own process: a sandbox child forked from it sees the new value, a fresh
#: interpreter the default.
MARK = "imported"


class Marked(BatchStage):
    """Adds the ``MARK`` its process sees; with ``hang_if_forked``, its setup never returns in
    a process that inherited ``MARK`` from a test that set it."""

    type = "test_marked"

    hang_if_forked: bool = False

    def setup(self) -> None:
        if self.hang_if_forked and MARK != "imported":
            time.sleep(10**6)

    def process(self, batch: pa.Table) -> BatchResult:
        return BatchResult(kept=batch.append_column("mark", pa.array([MARK] * len(batch))))
