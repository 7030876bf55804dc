"""The keys results are reused by: what decides a stage's output for one shard.

A stage's key for a shard chains the key of what it reads (the shard's identity, or the
content checksum of a run's own intermediate file) with the stage's decisive parameters, the
contents of the files it reads besides documents (``Stage.side_inputs``), the versions of the
libraries that compute it and the ``imports:`` code. A filter's scores have a key of their own
without its thresholds (``Filter.score_params``). Why and how: docs/reuse.md."""

from __future__ import annotations

import contextlib
import glob
import hashlib
import importlib.metadata
import importlib.util
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from curator.commit import checksum

#: A key: 20 hex digits of SHA-256 over a canonical JSON form.
Key = str


def digest(value: Any) -> Key:
    """The key of a JSON-able value (dict keys sorted)."""
    blob = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


@cache
def _distributions() -> dict[str, list[str]]:
    return importlib.metadata.packages_distributions()


@cache
def library_version(distribution: str) -> str | None:
    """The installed version of ``distribution`` (None when it is not installed)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def library_versions(modules: Iterable[str], distributions: Iterable[str]) -> dict[str, Any]:
    """Versions of curator, of the distributions that provide ``modules`` (a stage's
    requirements) and of ``distributions`` (its ``libraries``)."""
    names = {"curator", *distributions}
    for module in modules:
        names.update(_distributions().get(module.split(".")[0], [module]))
    return {name: library_version(name) for name in sorted(names)}


_FILE_DIGESTS: dict[tuple[str, int, int], str] = {}


def _file_digest(path: Path) -> str:
    stat = path.stat()
    seen = (str(path), stat.st_size, stat.st_mtime_ns)
    if seen not in _FILE_DIGESTS:
        _FILE_DIGESTS[seen] = checksum(path)
    return _FILE_DIGESTS[seen]


def content_digest(spec: str) -> str:
    """The content of a side input: a file's checksum; a folder's or a glob's files, each by
    name and checksum; a URL (or a path that does not exist) by its text alone."""
    if "://" in spec:
        return f"url:{spec}"
    path = Path(spec).expanduser()
    if path.is_file():
        return _file_digest(path)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        return digest([[str(p.relative_to(path)), _file_digest(p)] for p in files])
    matches = sorted(glob.glob(os.path.expanduser(spec)))
    if matches:
        return digest([[m, content_digest(m)] for m in matches])
    return f"missing:{spec}"


def stage_key(stage: Any, params: dict[str, Any], imports: str) -> Key:
    """A stage's own part of a key: ``params`` (its decisive or score parameters), its side
    inputs' contents, its libraries' versions, the ``imports:`` code."""
    return digest({"params": params,
                   "side": {spec: content_digest(spec) for spec in stage.side_inputs()},
                   "libraries": library_versions(stage.requirements(), stage.libraries),
                   "imports": imports})


def chain(before: Key, own: Key) -> Key:
    """The key of a stage's output: what it read, then what it is."""
    return digest([before, own])


def imports_digest(paths: Iterable[str | Path]) -> str:
    """The code of the ``imports:`` modules (files by content; dotted names by their file when
    importable, else by name): part of every stage's key, since a plugin may change any."""
    parts = []
    for item in paths:
        text = str(item)
        if Path(text).is_file():
            parts.append([Path(text).name, _file_digest(Path(text))])
            continue
        try:
            spec = importlib.util.find_spec(text)
        except (ImportError, ValueError):
            spec = None
        origin = spec.origin if spec is not None else None
        parts.append([text, _file_digest(Path(origin)) if origin and Path(origin).is_file()
                      else text])
    return digest(parts)


@dataclass(frozen=True)
class ShardKeys:
    """The keys of one shard task: of what it reads, of each stage's output (in task order),
    of each filter's scores (None for other stages), and which stage's output is kept as the
    shard's checkpoint (the rows after extraction: a later change re-reads them instead)."""

    input: Key
    stages: tuple[Key, ...]
    scores: tuple[Key | None, ...]
    checkpoint: int | None = None

    @property
    def final(self) -> Key:
        return self.stages[-1] if self.stages else self.input


@dataclass(frozen=True)
class StageKeys:
    """One stage's own keys (the same for every shard): of its output and of its scores."""

    own: Key
    scores: Key | None


def shard_keys(input_key: Key, stages: list[StageKeys], checkpoint: int | None) -> ShardKeys:
    """Chain ``input_key`` through the stages' own keys."""
    keys, scores = [], []
    before = input_key
    for stage in stages:
        scores.append(None if stage.scores is None else chain(before, stage.scores))
        before = chain(before, stage.own)
        keys.append(before)
    return ShardKeys(input_key, tuple(keys), tuple(scores), checkpoint)


def file_identity(path: str, size: int | None) -> dict[str, Any]:
    """What names an input file's content without reading it: path, size, mtime (local)."""
    identity: dict[str, Any] = {"path": path, "size": size}
    if "://" not in path:
        with contextlib.suppress(OSError):
            identity["mtime_ns"] = os.stat(path).st_mtime_ns
    return identity
