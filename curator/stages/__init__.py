"""Built-in stages; importing this package registers them under their YAML ``type``."""

from curator.io.jsonl import ReadJsonl, WriteJsonl
from curator.io.parquet import ReadParquet, WriteParquet
from curator.stages.dedup.exact import ExactDedup
from curator.stages.filters.length import LengthFilter
from curator.stages.sample import Sample

__all__ = ["ExactDedup", "LengthFilter", "ReadJsonl", "ReadParquet", "Sample", "WriteJsonl",
           "WriteParquet"]
