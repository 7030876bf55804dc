"""Stages. Built-in stage types are listed here by module and imported on first use, so that
reading a config does not import every library (tokenizers, numba) and nothing imports in a
cycle. Stages defined elsewhere register themselves by subclassing (``Stage.type``)."""

BUILTIN: dict[str, str] = {
    "read_jsonl": "curator.stages.readers",
    "write_jsonl": "curator.stages.writers",
    "read_parquet": "curator.stages.readers",
    "common_crawl": "curator.stages.sources.common_crawl",
    "write_parquet": "curator.stages.writers",
    "length_filter": "curator.stages.filters.length",
    "langid": "curator.stages.langid",
    "langid_html": "curator.stages.langid_html",
    "clean": "curator.stages.clean",
    "pii": "curator.stages.pii",
    "url_filter": "curator.stages.filters.url",
    "heuristic_filter": "curator.stages.filters.heuristic",
    "classifier_filter": "curator.stages.filters.classifier",
    "sample": "curator.stages.sample",
    "exact_dedup": "curator.stages.dedup.exact",
    "fuzzy_dedup": "curator.stages.dedup.fuzzy",
    "decontaminate": "curator.stages.decontaminate",
    "tokenize": "curator.stages.tokenize",
    "pack": "curator.stages.pack",
    "read_warc": "curator.stages.sources.warc",
    "extract_html": "curator.stages.extract.html",
    "arxiv": "curator.stages.sources.arxiv",
    "extract_latex": "curator.stages.extract.latex",
    "wikipedia": "curator.stages.sources.wikipedia",
}

#: Modules a built-in stage's tasks import besides its own module, imported once by the fork
#: server that local worker processes fork from (``Stage.preload``). numba_ready: the stage runs
#: numba kernels (heuristic_filter: gopher_repetition and nemo).
PRELOAD: dict[str, tuple[str, ...]] = {
    "langid": ("fasttext",),
    "langid_html": ("fasttext", "resiliparse.extract.html2text"),
    "extract_html": ("trafilatura",),  # the default extractor
    "heuristic_filter": ("curator.kernels.numba_ready",),
    "exact_dedup": ("curator.kernels.numba_ready",),
    "fuzzy_dedup": ("curator.kernels.numba_ready",),
    "decontaminate": ("curator.kernels.numba_ready",),
}

#: Built-in stages whose work releases the GIL (``Stage.holds_gil`` False): a pipeline of only
#: these runs on threads, with no worker processes to start.
RELEASE_GIL = frozenset({"read_jsonl", "read_parquet", "write_parquet", "length_filter",
                         "exact_dedup", "fuzzy_dedup"})
