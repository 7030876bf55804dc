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
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import xxhash

CHUNK = 1 << 20
CHECK_BLOCK = 1 << 16  # small: each gzip member's unused tail is copied once per member
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


def gzip_damage(path: Path) -> str | None:
    """Why the gzip members of ``path`` are not whole (each decompressed to its end), or None."""
    decomp, in_member = zlib.decompressobj(wbits=31), False
    with open(path, "rb") as f:
        while block := f.read(CHECK_BLOCK):
            while block:
                if not in_member and not block.strip(b"\0"):
                    break
                in_member = True
                try:
                    decomp.decompress(block)  # output discarded: only checked
                except zlib.error as err:
                    return f"corrupt gzip data at byte {f.tell() - len(block)}+: {err}"
                if decomp.eof:
                    block, decomp, in_member = decomp.unused_data, zlib.decompressobj(wbits=31), \
                        False
                else:
                    block = b""
    return "truncated gzip member at the end of the file" if in_member else None


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
    partial = dest.with_name(f".{dest.name}.part")
    result = Downloaded(dest)
    fetch = _fetch_http if urlsplit(url).scheme in ("http", "https") else _fetch_fsspec
    check_gzip = dest.name.endswith(".gz")
    failures, refetched_digest = 0, None
    while True:
        before = partial.stat().st_size if partial.exists() else 0
        slots = host_slots(url, per_host)
        try:
            with slots:
                fetch(url, partial, policy, result)
            damage = gzip_damage(partial) if check_gzip else None
            if damage is None:
                break
            digest = _digest(partial)
            if digest == refetched_digest:  # the same bytes twice: the server's copy is damaged
                result.damaged = damage
                break
            refetched_digest = digest
            partial.unlink()
            raise _Retry(f"{damage}; fetching the whole file again")
        except _Retry as retry:
            result.errors.append(str(retry))
            now = partial.stat().st_size if partial.exists() else 0
            failures = 1 if now > before else failures + 1
            if failures >= policy.max_tries:
                raise DownloadError(f"{url}: gave up after {policy.max_tries} tries without "
                                    f"progress; last error: {retry}") from None
            time.sleep(policy.delay(failures, retry.retry_after))
    os.replace(partial, dest)
    return result


def _digest(path: Path) -> str:
    digest = xxhash.xxh3_128()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


# ------------------------------------------------------------------------------- http(s)
def _fetch_http(url: str, partial: Path, policy: RetryPolicy, result: Downloaded) -> None:
    """One request: continue ``partial`` (Range) or start it over; return when the body is
    whole, raise ``_Retry`` on a transient failure, ``DownloadError`` on a final one."""
    offset = partial.stat().st_size if partial.exists() else 0
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
            partial.unlink()
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
                partial.unlink()
                raise _Retry(f"the server resumed at byte {start}, not {offset}; starting over")
            result.resumed += 1
            mode = "ab"
        else:  # 200: the whole file (a server that ignores Range included)
            offset, mode = 0, "wb"
            length = response.headers.get("Content-Length")
            total = int(length) if length is not None else None
        with open(partial, mode) as out:
            try:
                while block := response.read1(CHUNK):  # what has come: kept on a cut
                    out.write(block)
            except (OSError, http.client.HTTPException) as err:
                raise _Retry(f"transfer cut after {offset + out.tell()} bytes: "
                             f"{_describe(err)}") from None
            size = out.tell()
    if total is not None and size < total:
        raise _Retry(f"transfer cut at byte {size} of {total}")
    if total is not None and size > total:
        partial.unlink()
        raise _Retry(f"received {size} bytes, more than the {total} announced; starting over")


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
def _fetch_fsspec(url: str, partial: Path, policy: RetryPolicy, result: Downloaded) -> None:
    """One attempt through fsspec (s3://, gs://, ...): continue ``partial`` by seeking."""
    from fsspec.core import url_to_fs

    offset = partial.stat().st_size if partial.exists() else 0
    result.requests += 1
    try:
        fs, path = url_to_fs(url)
        total = fs.size(path)
        with fs.open(path, "rb") as src, open(partial, "ab") as out:
            if offset:
                src.seek(offset)
                result.resumed += 1
            while block := src.read(CHUNK):
                out.write(block)
            size = out.tell()
    except FileNotFoundError:
        raise DownloadError(f"{url}: not found") from None
    except PermissionError as err:
        raise DownloadError(f"{url}: {err}") from None
    except (OSError, TimeoutError) as err:
        raise _Retry(f"transfer failed: {_describe(err)}") from None
    if total is not None and size != total:
        if size > total:
            partial.unlink()
        raise _Retry(f"transfer ended at byte {size} of {total}")
