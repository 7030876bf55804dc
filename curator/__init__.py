"""curator: GPU-accelerated, restartable data curation for LLM pre-training."""

from curator.pipeline import ExecutorConfig, Pipeline
from curator.stages import (
    ExactDedup,
    LengthFilter,
    ReadJsonl,
    ReadParquet,
    Sample,
    WriteJsonl,
    WriteParquet,
)

__all__ = ["ExactDedup", "ExecutorConfig", "LengthFilter", "Pipeline", "ReadJsonl", "ReadParquet",
           "Sample", "WriteJsonl", "WriteParquet"]
__version__ = "0.1.0"
