"""The ``arxiv`` source: arXiv e-print archives (or extracted project folders) -> one document
per paper whose text is the main file's LaTeX with its inputs resolved.

A paper's work (unpacking, decoding, \\input resolution: regexes and decompression on hostile
bytes) runs under ``timeout_s`` in the segment's sandbox process
(curator.runtime.worker.sandbox)."""

from __future__ import annotations

import posixpath
from collections import Counter
from collections.abc import Iterator
from typing import ClassVar

import pyarrow as pa
import regex as re
from fsspec.core import url_to_fs
from pydantic import Field

from curator.batch import ID, TEXT, BatchResult, Failure, Shard, SourceBatch
from curator.io.archives import ArchiveLimits, UnsafeArchive, read_folder, unpack
from curator.io.files import GLOB_CHARS, InputError
from curator.io.latex_project import (
    TEX_SUFFIXES,
    InputTooLarge,
    NoMainFile,
    decode,
    find_main_file,
    resolve_inputs,
    strip_comments,
    tex_files,
)
from curator.runtime.worker.sandbox import each_document, run_sandboxed
from curator.stages.base import BatchStage, Source

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


class _Limits(BatchStage):
    """The limits of the ``arxiv`` source (shared by the source and its per-paper work)."""

    max_unpacked_bytes: int = Field(256 << 20, gt=0, description="An archive that unpacks to "
                                    "more bytes (all nesting levels counted) is refused.")
    max_members: int = Field(10_000, gt=0, description="An archive with more members is "
                             "refused.")
    max_ratio: float = Field(200.0, gt=1, description="A gzip layer that inflates more than "
                             "this many times its packed size (past 1 MiB) is refused as a "
                             "decompression bomb.")
    max_depth: int = Field(3, ge=0, description="Archives nested deeper are refused.")
    max_text_bytes: int = Field(16 << 20, gt=0, description="A paper whose LaTeX, \\input "
                                "files resolved, would be larger fails with reason 'too_large' "
                                "(files that input each other many times over).")
    timeout_s: float | None = Field(60.0, gt=0, description="Seconds one paper may take to "
                                    "unpack and resolve (in the segment's sandbox process); "
                                    "then it fails with reason 'timeout'. null: no limit, in "
                                    "the worker.")


class _Papers(_Limits):
    """One paper per row (``text``: its file or folder) -> its LaTeX, or a failure with its
    reason. The source's per-paper work, run where ``timeout_s`` guards it."""

    marks_documents: ClassVar[bool] = True

    def process(self, batch: pa.Table) -> BatchResult:
        texts: list[str] = []
        keep: list[bool] = []
        failed: list[Failure] = []
        notes: Counter = Counter()
        ids = batch.column(ID).to_pylist()
        for i, url in enumerate(each_document(batch.column(TEXT).to_pylist())):
            try:
                texts.append(self.latex(url, notes))
                keep.append(True)
            except (UnsafeArchive, NoMainFile, InputTooLarge, OSError) as err:
                reason = getattr(err, "reason", None) or (
                    "no_main_file" if isinstance(err, NoMainFile) else
                    "too_large" if isinstance(err, InputTooLarge) else "unreadable")
                message = str(err) if isinstance(err, UnsafeArchive) else f"{reason}: {err}"
                failed.append(Failure(stage=self.name or "arxiv", error=message, reason=reason,
                                      id=ids[i]))
                keep.append(False)
        kept = batch.filter(pa.array(keep, pa.bool_()))
        kept = kept.set_column(kept.column_names.index(TEXT), TEXT, pa.array(texts, pa.string()))
        return BatchResult(kept=kept, failed=failed, notes=dict(notes))

    def latex(self, url: str, notes: Counter) -> str:
        sources = {}
        for path, data in tex_files(self.files(url)).items():
            sources[path], fallback = decode(data)
            if fallback:
                notes["latin1_decoded"] += 1
        main = find_main_file({p: strip_comments(t) for p, t in sources.items()})
        return resolve_inputs(main, sources, notes, self.max_text_bytes)

    def files(self, url: str) -> dict[str, bytes]:
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
        if "file" in fs.protocol:  # links are refused or left out, never followed
            return read_folder(path, TEX_SUFFIXES, limits)
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


class ArxivSource(Source):
    """Read arXiv e-prints (tar, tar.gz, gzipped single .tex, nested archives, or extracted
    project folders; local or fsspec URLs), one shard and one document per paper: ``text`` is
    the main file's LaTeX with \\input/\\include resolved and comments stripped. A refused
    archive (unsafe paths or links, too large, a decompression bomb), a project without a main
    file, one whose inputs expand past ``max_text_bytes`` or one that takes over ``timeout_s``
    is a failed document with its reason."""

    type = "arxiv"
    version = 2  # 2: links in folders refused or left out; \input expansion bounded

    path: str | list[str] = Field(description="arXiv e-print files, project folders, globs of "
                                  "them, or a list.")
    max_unpacked_bytes: int = _Limits.model_fields["max_unpacked_bytes"]
    max_members: int = _Limits.model_fields["max_members"]
    max_ratio: float = _Limits.model_fields["max_ratio"]
    max_depth: int = _Limits.model_fields["max_depth"]
    max_text_bytes: int = _Limits.model_fields["max_text_bytes"]
    timeout_s: float | None = _Limits.model_fields["timeout_s"]

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
        work = _Papers(name=stage, **{k: getattr(self, k) for k in _Limits.model_fields
                                      if k not in ("name", "max_document_bytes")})
        row = pa.table({ID: [paper], TEXT: [shard.path]})
        result = run_sandboxed(work, stage, row) if self.timeout_s else work.process(row)
        for failure in result.failed:
            failure.file = shard.label
        table = result.kept
        if table.num_rows:
            table = table.append_column("arxiv_id", table.column(ID))
        yield SourceBatch(table if table.num_rows else pa.table({}), result.failed,
                          Counter(result.notes))
