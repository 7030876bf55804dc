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
