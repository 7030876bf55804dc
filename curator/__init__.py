"""curator: GPU-accelerated, restartable data curation for LLM pre-training.

The public names are imported on first use, so that ``import curator.kernels`` on a GPU node
needs only NumPy/CuPy, not the pipeline's dependencies.
"""

from __future__ import annotations

import importlib
from typing import Any

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
    "BatchResult": "curator.batch",
    "Failure": "curator.batch",
    "ScoreBins": "curator.counts",
    "ReadJsonl": "curator.stages.readers",
    "WriteJsonl": "curator.stages.writers",
    "ReadParquet": "curator.stages.readers",
    "WriteParquet": "curator.stages.writers",
    "LengthFilter": "curator.stages.filters.length",
    "LangId": "curator.stages.langid",
    "LangIdHtml": "curator.stages.langid_html",
    "Clean": "curator.stages.clean",
    "Pii": "curator.stages.pii",
    "UrlFilter": "curator.stages.filters.url",
    "HeuristicFilter": "curator.stages.filters.heuristic",
    "ClassifierFilter": "curator.stages.filters.classifier",
    "Sample": "curator.stages.sample",
    "ExactDedup": "curator.stages.dedup.exact",
    "FuzzyDedup": "curator.stages.dedup.fuzzy",
    "Tokenize": "curator.stages.tokenize",
    "Pack": "curator.stages.pack",
    "Decontaminate": "curator.stages.decontaminate",
    "ReadWarc": "curator.stages.sources.warc",
    "ExtractHtml": "curator.stages.extract.html",
    "CommonCrawl": "curator.stages.sources.common_crawl",
    "ArxivSource": "curator.stages.sources.arxiv",
    "ExtractLatex": "curator.stages.extract.latex",
    "Wikipedia": "curator.stages.sources.wikipedia",
}

__all__ = sorted(_EXPORTS)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'curator' has no attribute {name!r}")
