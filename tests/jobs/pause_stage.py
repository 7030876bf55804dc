"""A stage that takes its time, loaded by the tests through ``imports:``: each batch leaves a
file named by the worker's pid in ``markers`` (who is working), then sleeps ``seconds``."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
from pydantic import Field

from curator import BatchResult, BatchStage


class Pause(BatchStage):
    """Passes every document through after ``seconds``."""

    type = "test_pause"

    seconds: float = Field(1.0, description="Seconds each batch takes.")
    markers: str = Field(description="Folder for one file per working process (its pid).")

    def process(self, batch: pa.Table) -> BatchResult:
        Path(self.markers).mkdir(parents=True, exist_ok=True)
        (Path(self.markers) / str(os.getpid())).touch()
        time.sleep(self.seconds)
        return BatchResult(kept=batch)
