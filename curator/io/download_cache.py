"""A download cache keyed by URL, shared by concurrent runs and processes: each file is checked
against the record written once it was whole, and garbage collection never removes a file in use.

An entry is a folder ``root/<key[:2]>/<key>/`` (key: xxh3-128 of the URL) holding the file
(the URL path's basename), ``entry.json`` (url, bytes, xxh3_128, fetched, mtime_ns, inode;
written after the file is whole; its own mtime is the entry's last use) and ``.lock``: readers
hold it shared, whoever repairs or removes the entry holds it exclusive. ``download`` runs
under that exclusive lock (its own ``.<name>.lock`` inside is then never contended).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, fields
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import xxhash

from curator.commit import checksum, write_json_atomic
from curator.io.download import Downloaded, RetryPolicy, download

ENTRY = "entry.json"
LOCK = ".lock"
CACHE_FOLDER = ".curator-cache"
DEFAULT_POLICY = RetryPolicy()
_PREFIX, _KEY = re.compile(r"[0-9a-f]{2}"), re.compile(r"[0-9a-f]{32}")


def default_cache_dir(run_dir: Path) -> Path:
    """The cache beside ``run_dir`` (``--force`` on the run never touches it; runs in one
    parent folder share it)."""
    return Path(run_dir).absolute().parent / CACHE_FOLDER


@dataclass
class Fetched(Downloaded):
    """A :class:`Downloaded` from the cache."""

    damaged_in_cache: int = 0  # a cached copy failed its check and was fetched again


@dataclass
class GcReport:
    entries_kept: int = 0
    bytes_kept: int = 0
    entries_removed: int = 0
    leftovers_removed: int = 0  # partial downloads, unrecorded files, stray locks and records
    bytes_freed: int = 0
    in_use: int = 0  # entries skipped: their lock was held

    def summary(self, root: Path) -> str:
        return (f"{root}: {self.entries_kept} entries kept ({_human(self.bytes_kept)}), "
                f"{self.entries_removed} removed, {self.leftovers_removed} leftovers removed, "
                f"{_human(self.bytes_freed)} freed, {self.in_use} in use skipped")


class DownloadCache:
    """Files downloaded once, found again by URL, checked before reuse."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def folder(self, url: str) -> Path:
        key = xxhash.xxh3_128_hexdigest(url.encode())
        return self.root / key[:2] / key

    def path(self, url: str) -> Path:
        """Where ``url``'s file lives in the cache (whether or not it is there)."""
        return self.folder(url) / _file_name(url)

    def fetch(self, url: str, policy: RetryPolicy = DEFAULT_POLICY, per_host: int = 4) -> Fetched:
        """``url``'s file, checked (or downloaded); raises ``DownloadError`` as ``download``.
        A file the server serves damaged (``damaged`` set) stays unrecorded: fetched again next
        time."""
        with self.fetching(url, policy, per_host) as got:
            return got

    @contextmanager
    def fetching(self, url: str, policy: RetryPolicy = DEFAULT_POLICY,
                 per_host: int = 4) -> Iterator[Fetched]:
        """``fetch``, then keep the file (a shared lock) until the block ends."""
        folder, path, lock = self.folder(url), self.path(url), self.folder(url) / LOCK
        while True:
            fd = _lock(lock, fcntl.LOCK_SH)
            try:
                if _trusted(folder, path, url):
                    _touch(folder)
                    yield Fetched(path, cached=True)
                    return
                fcntl.flock(fd, fcntl.LOCK_UN)  # readers and checkers first, then one repairer
                fcntl.flock(fd, fcntl.LOCK_EX)
                if not _same_file(fd, lock):  # gc removed the entry meanwhile
                    continue
                got = _make_whole(folder, path, url, policy, per_host)
                if got.damaged:  # not recorded: nothing to keep it for
                    yield got
                    return
                fcntl.flock(fd, fcntl.LOCK_SH)  # not atomic: gc may evict in between
                if _same_file(fd, lock) and (folder / ENTRY).exists():
                    yield got
                    return
            finally:
                os.close(fd)

    @contextmanager
    def reading(self, url: str) -> Iterator[Path]:
        """The cached file of ``url``, kept (a shared lock) while the block reads it; raises
        ``FileNotFoundError`` when it is not in the cache."""
        folder, path = self.folder(url), self.path(url)
        if not (folder / ENTRY).exists():
            raise FileNotFoundError(f"{url}: not in the cache {self.root}")
        fd = _lock(folder / LOCK, fcntl.LOCK_SH)
        try:
            if not _trusted(folder, path, url):
                raise FileNotFoundError(f"{url}: not in the cache {self.root}")
            _touch(folder)
            yield path
        finally:
            os.close(fd)

    def gc(self, max_bytes: int | None = None) -> GcReport:
        """Remove leftovers of entries nobody holds; with ``max_bytes``, evict whole entries,
        least recently used first, until the kept files add up to at most ``max_bytes``
        (entries in use are skipped, so the bound may stay exceeded)."""
        report, idle, busy = GcReport(), [], 0
        for folder in self._folders():
            fd = _try_lock(folder / LOCK)
            if fd is None:
                busy += 1
                report.bytes_kept += _size(folder)
                continue
            try:
                kept = _tidy(folder, report)
            finally:
                os.close(fd)
            if kept is not None:
                idle.append((*kept, folder))
                report.bytes_kept += kept[1]
        for used, size, folder in sorted(idle):
            if max_bytes is None or report.bytes_kept <= max_bytes:
                break
            fd = _try_lock(folder / LOCK)
            if fd is None:
                report.in_use += 1
                continue
            try:
                if _used(folder) != used:  # used since the scan: no longer the oldest
                    continue
                for child in folder.iterdir():
                    if child.is_file():
                        child.unlink()
                _remove_folder(folder)
            finally:
                os.close(fd)
            report.entries_removed += 1
            report.bytes_kept -= size
            report.bytes_freed += size
        report.entries_kept = len(idle) + busy - report.entries_removed
        report.in_use += busy
        for prefix in self._prefixes():
            _rmdir(prefix)
        return report

    def _prefixes(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir() if p.is_dir() and _PREFIX.fullmatch(p.name))

    def _folders(self) -> Iterator[Path]:
        """Entry folders only: gc pointed at the wrong folder removes nothing else."""
        for prefix in self._prefixes():
            for folder in sorted(prefix.iterdir()):
                if (folder.is_dir() and _KEY.fullmatch(folder.name)
                        and folder.name.startswith(prefix.name)):
                    yield folder


# ------------------------------------------------------------------------------- entries
def _file_name(url: str) -> str:
    name = PurePosixPath(urlsplit(url).path).name
    return name if name and not name.startswith(".") and name != ENTRY else f"_{name}"


def _entry(folder: Path) -> dict | None:
    """The record: None when there is none, {} when it cannot be read."""
    try:
        entry = json.loads((folder / ENTRY).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return entry if isinstance(entry, dict) else {}


def _stat_facts(path: Path) -> dict:
    stat = path.stat()
    return {"bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns, "inode": stat.st_ino}


def _trusted(folder: Path, path: Path, url: str) -> bool:
    """The cheap check: recorded, and the file's size, mtime and inode are those recorded."""
    entry = _entry(folder)
    try:
        facts = _stat_facts(path)
    except FileNotFoundError:
        return False
    return bool(entry) and entry.get("url") == url and all(
        entry.get(k) == v for k, v in facts.items())


def _make_whole(folder: Path, path: Path, url: str, policy: RetryPolicy,
                per_host: int) -> Fetched:
    """Under the exclusive lock: the recorded file if its checksum agrees (its stat facts
    refreshed), else a fresh download, recorded once whole. A file without a record (its
    download killed before the record was written) is never trusted: fetched again."""
    entry, damage = _entry(folder), None
    if entry is not None:
        if _trusted(folder, path, url):
            return Fetched(path, cached=True)
        if not entry or entry.get("url") != url:
            damage = f"unreadable record {folder / ENTRY}"
        elif not path.exists():
            damage = "the cached file is missing"
        elif path.stat().st_size != entry.get("bytes") or checksum(path) != entry.get("xxh3_128"):
            damage = "the cached file differs from its record"
        else:
            write_json_atomic(folder / ENTRY, {**entry, **_stat_facts(path)})
            return Fetched(path, cached=True)
    (folder / ENTRY).unlink(missing_ok=True)
    path.unlink(missing_ok=True)
    got = download(url, path, policy, per_host)
    result = Fetched(**{f.name: getattr(got, f.name) for f in fields(got)},
                     damaged_in_cache=int(damage is not None))
    if damage:
        result.errors.insert(0, f"{damage}; fetched again")
    if not got.damaged:
        write_json_atomic(folder / ENTRY, {"url": url, **_stat_facts(path),
                                           "xxh3_128": checksum(path), "fetched": time.time()})
    return result


def _touch(folder: Path) -> None:
    """Mark the entry used now (gc evicts the least recently used first)."""
    with suppress(PermissionError):  # another user's entry: used, not marked
        os.utime(folder / ENTRY)


def _used(folder: Path) -> int:
    try:
        return (folder / ENTRY).stat().st_mtime_ns
    except FileNotFoundError:
        return 0


def _size(folder: Path) -> int:
    entry = _entry(folder)
    return int(entry.get("bytes", 0)) if entry else 0


def _tidy(folder: Path, report: GcReport) -> tuple[int, int] | None:
    """Under the exclusive lock: remove what no whole entry needs; (used, bytes) of the entry
    kept, or None when the folder held none (then removed)."""
    entry = _entry(folder)
    name = _file_name(entry["url"]) if entry and isinstance(entry.get("url"), str) else None
    whole = name is not None and (folder / name).is_file()
    keep = {LOCK, ENTRY, name} if whole else {LOCK}
    for child in folder.iterdir():
        if child.name not in keep and child.is_file():
            report.bytes_freed += child.stat().st_size
            report.leftovers_removed += 1
            child.unlink()
    if whole:
        return _used(folder), (folder / name).stat().st_size
    _remove_folder(folder)
    return None


def _remove_folder(folder: Path) -> None:
    """Unlink the lock (held by the caller: whoever opened it meanwhile sees another inode
    under the name, or none, and opens again) and the then empty folder."""
    (folder / LOCK).unlink(missing_ok=True)
    _rmdir(folder)


def _rmdir(folder: Path) -> None:
    with suppress(OSError):  # not empty: in use again (or it holds something not ours)
        folder.rmdir()


# ------------------------------------------------------------------------------- locks
def _lock(path: Path, operation: int) -> int:
    """A descriptor of ``path`` locked with ``operation``; created (and its folder) if needed.
    The lock counts only if ``path`` still names the locked file (gc unlinks locks it holds)."""
    while True:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except FileNotFoundError:  # gc removed the folder in between
            continue
        try:
            fcntl.flock(fd, operation)
            if _same_file(fd, path):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def _try_lock(path: Path) -> int | None:
    """``path`` locked exclusive without waiting, or None when someone holds it."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    if not _same_file(fd, path):  # removed meanwhile by another gc
        os.close(fd)
        return None
    return fd


def _same_file(fd: int, path: Path) -> bool:
    try:
        here, there = os.fstat(fd), os.stat(path)
    except FileNotFoundError:
        return False
    return (here.st_ino, here.st_dev) == (there.st_ino, there.st_dev)


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError
