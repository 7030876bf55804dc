"""Atomic file commits: write under a temporary name, rename into place when whole."""

from __future__ import annotations

import itertools
import json
import mmap
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import xxhash


def checksum(path: Path) -> str:
    """xxh3-128 of a file's bytes, hashed where the page cache holds them (memory-mapped: a file
    just written is hashed at ~11 GB/s here, read into blocks at ~1 GB/s)."""
    digest = xxhash.xxh3_128()
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                mapped.madvise(mmap.MADV_SEQUENTIAL)
                digest.update(mapped)
    return digest.hexdigest()


class Commit:
    """Files written under temporary names, renamed into place together once everything they
    belong with is written. Each temporary name is unique to its attempt
    (``.<name>.<pid>-<n>.tmp``): a retried task never writes into a file a killed attempt left,
    and a resumed run removes such leftovers (``RunDir.prepare``)."""

    def __init__(self) -> None:
        self.pairs: list[tuple[Path, Path]] = []  # (temporary, final), in writing order

    def temporary_for(self, final: Path) -> Path:
        """A temporary name beside ``final`` (its folder created)."""
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.with_name(f".{final.name}.{os.getpid()}-{next(_ATTEMPTS)}.tmp")
        self.pairs.append((tmp, final))
        return tmp

    def drop(self, tmp: Path) -> None:
        """Give up one temporary file (removed, never renamed)."""
        tmp.unlink(missing_ok=True)
        self.pairs = [pair for pair in self.pairs if pair[0] != tmp]

    def finals(self) -> list[Path]:
        return [final for _, final in self.pairs]

    def publish(self) -> None:
        """Rename every temporary file into place (the files a ``recording`` block collects)."""
        files = getattr(_RECORDING, "files", None)
        for tmp, final in self.pairs:
            os.replace(tmp, final)
            if files is not None:
                files.append(final)

    def discard(self) -> None:
        """Remove every temporary file: a task that stops leaves none."""
        for tmp, _ in self.pairs:
            tmp.unlink(missing_ok=True)


_ATTEMPTS = itertools.count()
_RECORDING = threading.local()


@contextmanager
def recording() -> Iterator[list[Path]]:
    """Collect the files this thread commits inside the block (a phase task's files, for its
    marker)."""
    outer = getattr(_RECORDING, "files", None)
    _RECORDING.files = files = []
    try:
        yield files
    finally:
        _RECORDING.files = outer
        if outer is not None:
            outer.extend(files)


def facts(path: Path) -> dict[str, Any]:
    """What a record keeps of a file it committed: size and checksum (``bytes``, ``xxh3_128``),
    and where and when it was written (``seen``: mtime and inode, the cheap check on resume)."""
    stat = path.stat()
    return {"bytes": stat.st_size, "xxh3_128": checksum(path),
            "seen": [stat.st_mtime_ns, stat.st_ino]}


def damage(path: Path, recorded: dict[str, Any], full: bool = False) -> str | None:
    """Why ``path`` is not the file ``recorded`` by :func:`facts`, or None. Cheap unless ``full``
    or its size, mtime or inode differ: then its checksum decides."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return "missing"
    if stat.st_size != recorded["bytes"]:
        return f"{stat.st_size} bytes, {recorded['bytes']} recorded"
    if not full and recorded.get("seen") == [stat.st_mtime_ns, stat.st_ino]:
        return None
    if checksum(path) != recorded["xxh3_128"]:
        return "checksum differs from the one recorded"
    return None


def full_check(item: tuple[str, str, dict[str, Any]]) -> tuple[str, str, str | None]:
    """``(owner, path, recorded)`` → ``(owner, path, why damaged or None)``, by checksum: the
    form an executor maps over the files a run is about to read again."""
    owner, path, recorded = item
    return owner, path, damage(Path(path), recorded, full=True)


class DamagedRecord(ValueError):
    """A record file (run.json, a manifest, a marker) that cannot be read; names the file."""


def read_json(path: Path) -> Any:
    """A record file's JSON; :class:`DamagedRecord` naming the file when it cannot be parsed."""
    try:
        return json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError) as err:
        raise DamagedRecord(f"{path}: damaged record ({err})") from None


def write_json_atomic(path: Path, data: Any) -> None:
    pending = Commit()
    pending.temporary_for(path).write_text(json.dumps(data, indent=1), encoding="utf-8")
    pending.publish()
