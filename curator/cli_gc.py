"""``curate gc``: tidy a download cache (the ``.curator-cache`` beside run directories)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from curator.cli_errors import USAGE, fail, one_line_errors
from curator.io.download_cache import DownloadCache

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGTP]?)(?:I?B)?", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``50G``, ``500M``, ``1.5T``, ``123`` (bytes) -> bytes; K, M, G, T, P are powers of 1024."""
    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise ValueError(f"--max-size must be a size such as 50G, 500M or 1000000 (bytes), "
                         f"got {text!r}")
    return int(float(match[1]) * UNITS[match[2].upper()])


def gc(
    run: Annotated[Path | None, typer.Argument(help="A run directory: remove what its current "
                                               "configuration does not use.")] = None,
    cache: Annotated[Path | None, typer.Option("--cache", help="The cache folder (e.g. runs/"
                                               ".curator-cache, or a stage's cache_dir).")] = None,
    max_size: Annotated[str | None, typer.Option(
        "--max-size", help="Evict the least recently used entries until the cache holds at most "
        "this much: 50G, 500M, or bytes (K, M, G, T: powers of 1024).")] = None,
) -> None:
    """``curate gc RUN``: remove from a run directory the checkpoints, scores and work files
    of configurations no longer current (docs/reuse.md). ``curate gc --cache DIR``: remove what
    interrupted downloads left in a download cache and, with --max-size, the least recently
    used files beyond it (files being read are never removed)."""
    if run is not None:
        from curator.runtime.driver.run_gc import gc_run

        with one_line_errors():
            typer.echo(gc_run(run).summary(run))
        if cache is None:
            return
    if cache is None:
        fail("say what to tidy: a run directory (curate gc RUN) or --cache DIR", USAGE)
    try:
        bound = None if max_size is None else parse_size(max_size)
    except ValueError as err:
        fail(str(err), USAGE)
    if not cache.is_dir():
        fail(f"{cache}: no such cache folder", USAGE)
    with one_line_errors():
        report = DownloadCache(cache).gc(bound)
    typer.echo(report.summary(cache))
