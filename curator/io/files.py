"""Input listing through fsspec: local paths, http(s)://, s3:// and globs, in a stable order."""

from __future__ import annotations

import os

import fsspec
import pyarrow as pa
from fsspec.core import url_to_fs

from curator.batch import Failure, Shard, SourceBatch

GLOB_CHARS = "*?["


class InputError(ValueError):
    """An input path that matches nothing or cannot be listed."""


def _glob_root(pattern: str) -> str:
    """The directory part of ``pattern`` before its first wildcard."""
    cut = min((pattern.find(c) for c in GLOB_CHARS if c in pattern), default=len(pattern))
    head = pattern[:cut]
    return head[: head.rfind("/") + 1] if "/" in head else ""


def list_shards(patterns: str | list[str]) -> list[Shard]:
    """Expand ``patterns`` into one shard per file, sorted by path, with relative labels."""
    patterns = [patterns] if isinstance(patterns, str) else list(patterns)
    found: dict[str, tuple[int | None, str]] = {}
    for pattern in patterns:
        fs, path = url_to_fs(pattern)
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        matches = sorted(fs.glob(path)) if any(c in path for c in GLOB_CHARS) else [path]
        root = _glob_root(path)
        for match in matches:
            try:
                info = fs.info(match)
            except FileNotFoundError:
                raise InputError(f"input not found: {pattern}") from None
            if info.get("type") == "directory":
                continue
            url = match if protocol in ("file", "local") else fs.unstrip_protocol(match)
            if protocol in ("http", "https"):
                url = match
            inside = root and match.startswith(root)
            label = match[len(root):] if inside else match.rsplit("/", 1)[-1]
            found[url] = (info.get("size"), label)
    if not found:
        raise InputError(f"no input files match {patterns}")
    return [Shard(index=i, path=url, size=size, label=label)
            for i, (url, (size, label)) in enumerate(sorted(found.items()))]


def open_binary(url: str):
    """Open ``url`` for reading raw (still compressed) bytes: a local path with the builtin
    ``open`` (fsspec's local file adds a Python call to every read), any other URL through
    fsspec."""
    if "://" not in url or url.startswith("file://"):
        return open(url.removeprefix("file://"), "rb")
    return fsspec.open(url, "rb").open()


def is_empty_file(shard: Shard) -> bool:
    """Whether the shard's file has 0 bytes (as listed; a local file asked where not listed)."""
    if shard.size is not None:
        return shard.size == 0
    path = shard.path.removeprefix("file://")
    return "://" not in path and os.path.isfile(path) and os.path.getsize(path) == 0


def file_failure(shard: Shard, stage: str, error: str, reason: str) -> SourceBatch:
    """A batch that fails a whole file (one rule for every reader): one failure naming it, at
    offset 0, counted as one failed record."""
    return SourceBatch(pa.table({}), [Failure(stage=stage, error=error, offset=0, reason=reason,
                                              file=shard.label or shard.path)])
