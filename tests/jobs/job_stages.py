"""Stages for the job tests, loaded through ``imports:``; neither changes a document."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
from pydantic import Field

from curator import BatchResult, BatchStage


class Pause(BatchStage):
    """Each batch leaves a file named by the worker's pid in ``markers`` (who is working),
    then sleeps ``seconds``."""

    type = "test_pause"

    seconds: float = Field(1.0, description="Seconds each batch takes.")
    markers: str = Field(description="Folder for one file per working process (its pid).")

    def process(self, batch: pa.Table) -> BatchResult:
        Path(self.markers).mkdir(parents=True, exist_ok=True)
        (Path(self.markers) / str(os.getpid())).touch()
        time.sleep(self.seconds)
        return BatchResult(kept=batch)


class GpuProbe(BatchStage):
    """Asks for a GPU, as GPU stages do; each batch leaves ``<pid>-<CUDA_VISIBLE_DEVICES>``
    in ``markers`` (where it ran)."""

    type = "test_gpu_probe"

    markers: str = Field(description="Folder for one file per working process.")

    def resources(self) -> dict[str, float]:
        return {"GPU": 1}

    def process(self, batch: pa.Table) -> BatchResult:
        Path(self.markers).mkdir(parents=True, exist_ok=True)
        device = os.environ.get("CUDA_VISIBLE_DEVICES", "unset")
        (Path(self.markers) / f"{os.getpid()}-{device}").touch()
        return BatchResult(kept=batch)
