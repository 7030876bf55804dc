"""Decompressed byte streams that report truncation instead of losing what came before it."""

from __future__ import annotations

import bz2
import mmap
import os
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import zstandard
from fsspec.core import url_to_fs

from curator.io.files import open_binary

READ_SIZE = 4 << 20


class DamagedInput(Exception):
    """The compressed stream ended early or is corrupt; everything before it was yielded."""


def compression_of(url: str) -> str | None:
    name = url.lower().split("?", 1)[0]
    if name.endswith(".gz"):
        return "gzip"
    if name.endswith((".zst", ".zstd")):
        return "zstd"
    return None


def _frames(raw, new_decompressor: Callable[[], Any], errors: tuple[type[Exception], ...],
            name: str) -> Iterator[bytes]:
    """Decompress a stream of concatenated frames (gzip members, zstd frames)."""
    decomp = new_decompressor()
    in_frame = False
    while block := raw.read(READ_SIZE):
        while block:
            if not in_frame and not block.strip(b"\0"):
                break  # zero padding after the last frame
            in_frame = True
            try:
                out = decomp.decompress(block)
            except errors as err:
                raise DamagedInput(f"corrupt {name} data: {err}") from None
            if out:
                yield out
            if decomp.eof:
                block, decomp, in_frame = decomp.unused_data, new_decompressor(), False
            else:
                block = b""
    if in_frame:
        raise DamagedInput(f"truncated {name}: the stream ended before its end-of-stream marker")


def bz2_chunks(raw) -> Iterator[bytes]:
    """The decompressed bytes of concatenated bz2 streams read from ``raw`` (to its end)."""
    return _frames(raw, bz2.BZ2Decompressor, (OSError,), "bz2")


def _gzip_chunks(raw) -> Iterator[bytes]:
    return _frames(raw, lambda: zlib.decompressobj(wbits=31), (zlib.error,), "gzip")


def _zstd_chunks(raw) -> Iterator[bytes]:
    return _frames(raw, lambda: zstandard.ZstdDecompressor().decompressobj(),
                   (zstandard.ZstdError,), "zstd")


def _local_path(url: str) -> str | None:
    fs, path = url_to_fs(url)
    return path if "file" in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)) \
        else None


def iter_decompressed(url: str, read_size: int = READ_SIZE) -> Iterator[bytes | memoryview]:
    """Yield the decompressed bytes of ``url``; raise ``DamagedInput`` at the damaged point.

    A plain local file is yielded once, memory-mapped (no copy); other plain files are read
    ``read_size`` bytes at a time.
    """
    local = _local_path(url) if compression_of(url) is None else None
    if local is not None:
        if os.path.getsize(local):
            with open(local, "rb") as f:
                # unmapped when the last view of it is released
                yield memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
        return
    with open_binary(url) as raw:
        kind = compression_of(url)
        if kind == "gzip":
            yield from _gzip_chunks(raw)
        elif kind == "zstd":
            yield from _zstd_chunks(raw)
        else:
            while block := raw.read(read_size):
                yield block
