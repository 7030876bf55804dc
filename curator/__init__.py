"""curator: GPU-accelerated, restartable data curation for LLM pre-training.

The public names are imported on first use, so that ``import curator.kernels`` on a GPU node
needs only NumPy/CuPy, not the pipeline's dependencies.
"""

from __future__ import annotations

import importlib
from typing import Any

from curator.stages import BUILTIN_STAGES

#: Public name → module; every built-in stage class comes from the stage table.
_EXPORTS = {
    "Pipeline": "curator.api",
    "ExecutorConfig": "curator.pipeline",
    "Stage": "curator.stages.base",
    "Source": "curator.stages.base",
    "FileSource": "curator.stages.base",
    "BatchStage": "curator.stages.base",
    "Filter": "curator.stages.base",
    "Sink": "curator.stages.base",
    "DatasetStage": "curator.stages.base",
    "DatasetResult": "curator.stages.base",
    "Decisions": "curator.stages.context",
    "PhaseResult": "curator.stages.context",
    "BatchResult": "curator.batch",
    "Failure": "curator.batch",
    "ScoreBins": "curator.counts",
    **{stage.cls: stage.module for stage in BUILTIN_STAGES},
}

__all__ = sorted(_EXPORTS)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'curator' has no attribute {name!r}")
