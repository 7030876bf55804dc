"""Stages. Built-in stage types are declared once, in :data:`BUILTIN_STAGES` (type, module,
class, whether its work releases the GIL, what its tasks import besides its module), and imported
on first use, so that reading a config (and ``curator.launch``) imports no stage library
(tokenizers, numba) and nothing imports in a cycle. Stages defined elsewhere register themselves
by subclassing (``Stage.type``). ``tests/runtime/test_worker_start.py`` checks the table
against the classes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BuiltinStage:
    """One built-in stage type. ``releases_gil``: its work runs on threads (``Stage.holds_gil``
    False), so a pipeline of only such stages starts no worker processes. ``preload``: modules
    its tasks import besides its own, imported once by the fork server that local worker
    processes fork from (``curator.kernels.numba_ready``: the stage runs numba kernels)."""

    type: str
    module: str
    cls: str  # the class, also exported as ``curator.<cls>``
    releases_gil: bool = False
    preload: tuple[str, ...] = ()


NUMBA = "curator.kernels.numba_ready"
BUILTIN_STAGES: tuple[BuiltinStage, ...] = (
    BuiltinStage("read_jsonl", "curator.stages.readers", "ReadJsonl", releases_gil=True),
    BuiltinStage("write_jsonl", "curator.stages.writers", "WriteJsonl"),
    BuiltinStage("read_parquet", "curator.stages.readers", "ReadParquet", releases_gil=True),
    BuiltinStage("common_crawl", "curator.stages.sources.common_crawl", "CommonCrawl"),
    BuiltinStage("write_parquet", "curator.stages.writers", "WriteParquet", releases_gil=True),
    BuiltinStage("length_filter", "curator.stages.filters.length", "LengthFilter",
                 releases_gil=True),
    BuiltinStage("langid", "curator.stages.langid", "LangId", preload=("fasttext",)),
    BuiltinStage("langid_html", "curator.stages.langid_html", "LangIdHtml",
                 preload=("fasttext", "resiliparse.extract.html2text")),
    BuiltinStage("clean", "curator.stages.clean", "Clean"),
    BuiltinStage("pii", "curator.stages.pii", "Pii"),
    BuiltinStage("url_filter", "curator.stages.filters.url", "UrlFilter"),
    BuiltinStage("heuristic_filter", "curator.stages.filters.heuristic", "HeuristicFilter",
                 preload=(NUMBA,)),
    BuiltinStage("classifier_filter", "curator.stages.filters.classifier", "ClassifierFilter"),
    BuiltinStage("sample", "curator.stages.sample", "Sample"),
    BuiltinStage("quality_buckets", "curator.stages.quality_buckets", "QualityBuckets"),
    BuiltinStage("rehydrate", "curator.stages.rehydrate", "Rehydrate", releases_gil=True),
    BuiltinStage("exact_dedup", "curator.stages.dedup.exact", "ExactDedup", releases_gil=True,
                 preload=(NUMBA,)),
    BuiltinStage("url_dedup", "curator.stages.dedup.url", "UrlDedup"),
    BuiltinStage("line_dedup", "curator.stages.dedup.line", "LineDedup", preload=(NUMBA,)),
    BuiltinStage("fuzzy_dedup", "curator.stages.dedup.fuzzy.stage", "FuzzyDedup", releases_gil=True,
                 preload=(NUMBA,)),
    BuiltinStage("decontaminate", "curator.stages.decontaminate", "Decontaminate",
                 preload=(NUMBA,)),
    BuiltinStage("tokenize", "curator.stages.tokenize", "Tokenize"),
    BuiltinStage("pack", "curator.stages.pack", "Pack"),
    BuiltinStage("read_warc", "curator.stages.sources.warc", "ReadWarc"),
    BuiltinStage("extract_html", "curator.stages.extract.html", "ExtractHtml",
                 preload=("trafilatura",)),  # the default extractor
    BuiltinStage("arxiv", "curator.stages.sources.arxiv", "ArxivSource"),
    BuiltinStage("extract_latex", "curator.stages.extract.latex", "ExtractLatex"),
    BuiltinStage("wikipedia", "curator.stages.sources.wikipedia", "Wikipedia"),
)

#: Views of the table, for the launcher and the registry.
BUILTIN: dict[str, str] = {s.type: s.module for s in BUILTIN_STAGES}
PRELOAD: dict[str, tuple[str, ...]] = {s.type: s.preload for s in BUILTIN_STAGES if s.preload}
RELEASE_GIL = frozenset(s.type for s in BUILTIN_STAGES if s.releases_gil)
