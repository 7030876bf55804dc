"""The ``arxiv`` source: arXiv e-print archives (or extracted project folders) -> one document
per paper whose text is the main file's LaTeX with its inputs resolved."""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Iterator

import pyarrow as pa
import regex as re
from fsspec.core import url_to_fs
from pydantic import Field

from curator.batch import Failure, Shard, SourceBatch
from curator.io.archives import ArchiveLimits, UnsafeArchive, unpack
from curator.io.files import GLOB_CHARS, InputError
from curator.io.latex_project import (
    TEX_SUFFIXES,
    NoMainFile,
    decode,
    find_main_file,
    resolve_inputs,
    strip_comments,
    tex_files,
)
from curator.stages.base import Source

# New-style ids (1911.02782, 2004.14974v2) and old-style ones (hep-th/9901001 as hep-th9901001).
_NEW_ID = re.compile(r"(?<!\d)(\d{4}\.\d{4,5}(?:v\d+)?)(?!\d)")
_OLD_ID = re.compile(r"\b([a-z][a-z\-]*(?:\.[A-Z]{2})?)[_/]?(\d{7}(?:v\d+)?)\b")
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".gz")


def arxiv_id(name: str) -> str:
    """The arXiv id in a file or folder name (``1911.02782.source-textonly.tar.gz`` ->
    ``1911.02782``, ``hep-th9901001.gz`` -> ``hep-th/9901001``); else the name without its
    archive suffix."""
    base = posixpath.basename(name.rstrip("/"))
    if found := _NEW_ID.search(base):
        return found.group(1)
    if found := _OLD_ID.search(base):
        return f"{found.group(1)}/{found.group(2)}"
    for suffix in ARCHIVE_SUFFIXES:
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


class ArxivSource(Source):
    """Read arXiv e-prints (tar, tar.gz, gzipped single .tex, nested archives, or extracted
    project folders; local or fsspec URLs), one shard and one document per paper: ``text`` is
    the main file's LaTeX with \\input/\\include resolved and comments stripped. A refused
    archive (unsafe paths, too large, a decompression bomb) or a project without a main file is
    a failed document with its reason."""

    type = "arxiv"

    path: str | list[str] = Field(description="arXiv e-print files, project folders, globs of "
                                  "them, or a list.")
    max_unpacked_bytes: int = Field(256 << 20, gt=0, description="An archive that unpacks to "
                                    "more bytes (all nesting levels counted) is refused.")
    max_members: int = Field(10_000, gt=0, description="An archive with more members is "
                             "refused.")
    max_ratio: float = Field(200.0, gt=1, description="A gzip layer that inflates more than "
                             "this many times its packed size (past 1 MiB) is refused as a "
                             "decompression bomb.")
    max_depth: int = Field(3, ge=0, description="Archives nested deeper are refused.")

    def shards(self) -> list[Shard]:
        patterns = [self.path] if isinstance(self.path, str) else list(self.path)
        found: dict[str, tuple[int | None, str]] = {}
        for pattern in patterns:
            fs, path = url_to_fs(pattern)
            matches = sorted(fs.glob(path)) if any(c in path for c in GLOB_CHARS) else [path]
            for match in matches:
                if not fs.exists(match):
                    raise InputError(f"input not found: {pattern}")
                url = match if "file" in fs.protocol else fs.unstrip_protocol(match)
                found[url] = (fs.info(match).get("size"), posixpath.basename(match.rstrip("/")))
        if not found:
            raise InputError(f"no input matches {patterns}")
        return [Shard(index=i, path=url, size=size, label=label)
                for i, (url, (size, label)) in enumerate(sorted(found.items()))]

    def read(self, shard: Shard, batch_bytes: int) -> Iterator[SourceBatch]:
        stage = self.name or self.type
        paper = arxiv_id(shard.label or shard.path)
        notes: Counter = Counter()
        try:
            text = self._latex(shard.path, notes)
        except (UnsafeArchive, NoMainFile, OSError) as err:
            reason = getattr(err, "reason", "no_main_file" if isinstance(err, NoMainFile)
                             else "unreadable")
            message = str(err) if isinstance(err, UnsafeArchive) else f"{reason}: {err}"
            yield SourceBatch(pa.table({}), [Failure(stage=stage, error=message, reason=reason,
                                                     file=shard.label, id=paper)], notes)
            return
        table = pa.table({"id": [paper], "text": [text], "arxiv_id": [paper]})
        yield SourceBatch(table, [], notes)

    def _latex(self, url: str, notes: Counter) -> str:
        files = self._files(url)
        sources = {}
        for path, data in tex_files(files).items():
            sources[path], fallback = decode(data)
            if fallback:
                notes["latin1_decoded"] += 1
        main = find_main_file({p: strip_comments(t) for p, t in sources.items()})
        return resolve_inputs(main, sources, notes)

    def _files(self, url: str) -> dict[str, bytes]:
        limits = ArchiveLimits(max_total_bytes=self.max_unpacked_bytes,
                               max_members=self.max_members, max_ratio=self.max_ratio,
                               max_depth=self.max_depth)
        fs, path = url_to_fs(url)
        if not fs.isdir(path):
            with fs.open(path, "rb") as handle:
                data = handle.read(self.max_unpacked_bytes + 1)
            if len(data) > self.max_unpacked_bytes:
                raise UnsafeArchive("archive_too_large", f"file larger than "
                                    f"{self.max_unpacked_bytes} bytes")
            return unpack(data, path, limits)
        files, total = {}, 0
        for found in sorted(fs.find(path)):
            relative = posixpath.relpath(found, path)
            if not relative.lower().endswith(TEX_SUFFIXES):
                continue
            if len(files) >= self.max_members:
                raise UnsafeArchive("archive_too_large", f"more than {self.max_members} files")
            with fs.open(found, "rb") as handle:
                files[relative] = handle.read()
            total += len(files[relative])
            if total > self.max_unpacked_bytes:
                raise UnsafeArchive("archive_too_large", f"folder holds more than "
                                    f"{self.max_unpacked_bytes} bytes of LaTeX")
        return files

