"""Robust download of one remote file to a local path: streamed, retried, resumed, checked whole.

http(s) goes through ``urllib`` (so that Range, status codes and Retry-After are ours to read);
other schemes (``s3://``, ...) through fsspec, resumed by seeking. Why and how: docs/acquisition.md.
"""

from __future__ import annotations

import email.utils
import fcntl
import http.client
import os
import random
import threading
import time
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import xxhash

from curator import halt

CHUNK = 1 << 20
CHECK_BLOCK = 1 << 16
RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})


class DownloadError(Exception):
    """A file that could not be downloaded whole; the message is one line naming the URL."""


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try: ``max_tries`` consecutive attempts without progress, backoff
    ``base_delay_s * 2**n`` with full jitter (capped at ``max_delay_s``), ``timeout_s`` to
    connect and between two reads."""

    max_tries: int = 8
    base_delay_s: float = 1.0
    max_delay_s: float = 60.0
    timeout_s: float = 60.0

    def delay(self, failures: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            return retry_after
        cap = min(self.max_delay_s, self.base_delay_s * 2 ** max(0, failures - 1))
        return random.uniform(cap / 2, cap)


@dataclass
class Downloaded:
    """A file on disk and how it got there."""

    path: Path
    cached: bool = False  # found complete on disk: no request made
    requests: int = 0
    resumed: int = 0  # requests that continued a partial transfer with Range
    damaged: str | None = None  # the server's copy itself is damaged (kept as served)
    errors: list[str] = field(default_factory=list)  # what went wrong on the way, in order


class _Retry(Exception):
    """A transient failure: try again after ``retry_after`` seconds (None: backoff)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


_HOST_SLOTS: dict[str, threading.BoundedSemaphore] = {}
_HOST_LOCK = threading.Lock()


def host_slots(url: str, limit: int) -> threading.BoundedSemaphore:
    """The process-wide semaphore for ``url``'s host: at most ``limit`` transfers at once from
    this worker process (the first limit asked for a host is the one kept)."""
    host = urlsplit(url).netloc or urlsplit(url).scheme
    with _HOST_LOCK:
        if host not in _HOST_SLOTS:
            _HOST_SLOTS[host] = threading.BoundedSemaphore(limit)
        return _HOST_SLOTS[host]


class GzipCheck:
    """Decompresses gzip members as their bytes arrive, output discarded, to tell whether every
    member is whole (each decompressed to its end)."""

    def __init__(self) -> None:
        self._decomp, self._in_member, self._seen = zlib.decompressobj(wbits=31), False, 0
        self.error: str | None = None

    def feed(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        for start in range(0, len(view), CHECK_BLOCK):  # small: a member's tail is copied
            piece = view[start:start + CHECK_BLOCK]
            if self.error is None:
                self._feed(bytes(piece))
            self._seen += len(piece)

    def _feed(self, block: bytes) -> None:
        while block:
            if not self._in_member and not block.strip(b"\0"):
                return  # zero padding after a member
            self._in_member = True
            try:  # bounded output per call: a decompression bomb costs time, not memory
                self._decomp.decompress(block, CHUNK)
                while self._decomp.unconsumed_tail and not self._decomp.eof:
                    self._decomp.decompress(self._decomp.unconsumed_tail, CHUNK)
            except zlib.error as err:
                self.error = f"corrupt gzip data after byte {self._seen}: {err}"
                return
            if not self._decomp.eof:
                return
            block, self._in_member = self._decomp.unused_data, False
            self._decomp = zlib.decompressobj(wbits=31)

    def damage(self) -> str | None:
        """Why the bytes fed so far are not whole gzip members, or None."""
        if self.error is None and self._in_member:
            return "truncated gzip member at the end of the file"
        return self.error


class _Partial:
    """The bytes received so far (``.<name>.part``), hashed and gzip-checked as they arrive, so
    the check overlaps the transfer; bytes left by an earlier process are read once."""

    def __init__(self, path: Path, check_gzip: bool) -> None:
        self.path, self.check_gzip = path, check_gzip
        self._reset()
        if path.exists():
            with open(path, "rb") as f:
                while block := f.read(CHUNK):
                    self._feed(block)

    def _reset(self) -> None:
        self.size, self.digest = 0, xxhash.xxh3_128()
        self.gzip = GzipCheck() if self.check_gzip else None

    def _feed(self, block: bytes) -> None:
        self.size += len(block)
        self.digest.update(block)
        if self.gzip is not None:
            self.gzip.feed(block)

    def discard(self) -> None:
        self.path.unlink(missing_ok=True)
        self._reset()

    @contextmanager
    def appending(self, from_start: bool) -> Iterator[Callable[[bytes], None]]:
        """A writer of the next bytes: after the current ones, or from byte 0."""
        if from_start:
            self._reset()
        with open(self.path, "wb" if from_start else "ab") as out:
            def write(block: bytes) -> None:
                out.write(block)
                self._feed(block)
                out.flush()
                halt.point("download", self.path.name.removeprefix(".").removesuffix(".part"))

            yield write

    def damage(self) -> str | None:
        return self.gzip.damage() if self.gzip is not None else None


def download(url: str, dest: Path, policy: RetryPolicy = RetryPolicy(),
             per_host: int = 4) -> Downloaded:
    """Fetch ``url`` to ``dest`` unless it is already there (a complete file is only ever
    renamed into place). Raises :class:`DownloadError` when the file cannot be had whole."""
    dest = Path(dest)
    if dest.exists():
        return Downloaded(dest, cached=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    # One downloader per file: another process or thread fetching it (a shared cache, a task
    # tried again while the first still runs) is waited for, then its file is reused.
    with open(dest.with_name(f".{dest.name}.lock"), "wb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if dest.exists():
            return Downloaded(dest, cached=True)
        return _transfer(url, dest, policy, per_host)


def _transfer(url: str, dest: Path, policy: RetryPolicy, per_host: int) -> Downloaded:
    partial = _Partial(dest.with_name(f".{dest.name}.part"), dest.name.endswith(".gz"))
    result = Downloaded(dest)
    fetch = _fetch_http if urlsplit(url).scheme in ("http", "https") else _fetch_fsspec
    failures, refetched_digest = 0, None
    while True:
        before = partial.size
        try:
            with host_slots(url, per_host):
                fetch(url, partial, policy, result)
            damage = partial.damage()
            if damage is None:
                break
            digest = partial.digest.hexdigest()
            if digest == refetched_digest:  # the same bytes twice: the server's copy is damaged
                result.damaged = damage
                break
            refetched_digest = digest
            partial.discard()
            raise _Retry(f"{damage}; fetching the whole file again")
        except _Retry as retry:
            result.errors.append(str(retry))
            failures = 1 if partial.size > before else failures + 1
            if failures >= policy.max_tries:
                raise DownloadError(f"{url}: gave up after {policy.max_tries} tries without "
                                    f"progress; last error: {retry}") from None
            time.sleep(policy.delay(failures, retry.retry_after))
    os.replace(partial.path, dest)
    return result


# ------------------------------------------------------------------------------- http(s)
def _fetch_http(url: str, partial: _Partial, policy: RetryPolicy, result: Downloaded) -> None:
    """One request: continue ``partial`` (Range) or start it over; return when the body is
    whole, raise ``_Retry`` on a transient failure, ``DownloadError`` on a final one."""
    offset = partial.size
    request = urllib.request.Request(url, headers={"User-Agent": "curator",
                                                   "Accept-Encoding": "identity"})
    if offset:
        request.add_header("Range", f"bytes={offset}-")
    result.requests += 1
    try:
        response = urllib.request.urlopen(request, timeout=policy.timeout_s)
    except urllib.error.HTTPError as err:
        err.close()
        if err.code == 416 and offset:  # our partial copy is no prefix of the file: start over
            partial.discard()
            raise _Retry(f"HTTP 416 for a Range from byte {offset}; starting over") from None
        if err.code in RETRY_STATUS:
            raise _Retry(f"HTTP {err.code}", _retry_after(err.headers.get("Retry-After"),
                                                          policy)) from None
        raise DownloadError(f"{url}: HTTP {err.code} {err.reason}") from None
    except (OSError, http.client.HTTPException) as err:
        raise _Retry(f"connection failed: {_describe(err)}") from None
    with response:
        if response.status == 206:
            start, total = _content_range(response.headers.get("Content-Range", ""))
            if start != offset:
                partial.discard()
                raise _Retry(f"the server resumed at byte {start}, not {offset}; starting over")
            result.resumed += 1
        else:  # 200: the whole file (a server that ignores Range included)
            length = response.headers.get("Content-Length")
            total = int(length) if length is not None else None
        with partial.appending(from_start=response.status != 206) as write:
            try:
                while block := response.read1(CHUNK):  # what has come: kept on a cut
                    write(block)
            except (OSError, http.client.HTTPException) as err:
                raise _Retry(f"transfer cut after {partial.size} bytes: "
                             f"{_describe(err)}") from None
    if total is not None and partial.size < total:
        raise _Retry(f"transfer cut at byte {partial.size} of {total}")
    if total is not None and partial.size > total:
        partial.discard()
        raise _Retry(f"received more bytes than the {total} announced; starting over")


def _content_range(value: str) -> tuple[int, int | None]:
    """``bytes START-END/TOTAL`` -> (START, TOTAL or None)."""
    try:
        span, _, total = value.removeprefix("bytes ").partition("/")
        return int(span.split("-")[0]), (None if total in ("", "*") else int(total))
    except ValueError:
        return -1, None


def _retry_after(value: str | None, policy: RetryPolicy) -> float | None:
    """Seconds to wait from a Retry-After header (seconds or an HTTP date), capped."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        when = email.utils.parsedate_to_datetime(value)
        seconds = when.timestamp() - time.time() if when else 0.0
    return min(max(0.0, seconds), policy.max_delay_s)


def _describe(err: BaseException) -> str:
    reason = getattr(err, "reason", None)
    inner = reason if isinstance(reason, BaseException) else err
    return f"{type(inner).__name__}: {inner}".rstrip(": ")


# ------------------------------------------------------------------------------- fsspec
def _fetch_fsspec(url: str, partial: _Partial, policy: RetryPolicy, result: Downloaded) -> None:
    """One attempt through fsspec (s3://, gs://, ...): continue ``partial`` by seeking."""
    from fsspec.core import url_to_fs

    offset = partial.size
    result.requests += 1
    try:
        fs, path = url_to_fs(url)
        total = fs.size(path)
        with fs.open(path, "rb") as src, partial.appending(from_start=False) as write:
            if offset:
                src.seek(offset)
                result.resumed += 1
            while block := src.read(CHUNK):
                write(block)
    except FileNotFoundError:
        raise DownloadError(f"{url}: not found") from None
    except PermissionError as err:
        raise DownloadError(f"{url}: {err}") from None
    except (OSError, TimeoutError) as err:
        raise _Retry(f"transfer failed: {_describe(err)}") from None
    if total is not None and partial.size != total:
        if partial.size > total:
            partial.discard()
        raise _Retry(f"transfer ended at byte {partial.size} of {total}")
