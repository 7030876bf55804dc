"""Decompressed byte streams that report truncation instead of losing what came before it."""

from __future__ import annotations

import mmap
import os
import zlib
from collections.abc import Iterator

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


def _gzip_chunks(raw) -> Iterator[bytes]:
    """Decompress a (possibly multi-member) gzip stream."""
    decomp = zlib.decompressobj(wbits=31)
    in_member = False
    while block := raw.read(READ_SIZE):
        while block:
            if not in_member and not block.strip(b"\0"):
                break  # zero padding after the last member
            in_member = True
            try:
                out = decomp.decompress(block)
            except zlib.error as err:
                raise DamagedInput(f"corrupt gzip data: {err}") from None
            if out:
                yield out
            if decomp.eof:
                block = decomp.unused_data
                decomp = zlib.decompressobj(wbits=31)
                in_member = False
            else:
                block = b""
    if in_member:
        raise DamagedInput("truncated gzip: the stream ended before its end-of-stream marker")


def _zstd_chunks(raw) -> Iterator[bytes]:
    decomp = zstandard.ZstdDecompressor().decompressobj()
    fed = False
    while block := raw.read(READ_SIZE):
        while block:
            fed = True
            try:
                out = decomp.decompress(block)
            except zstandard.ZstdError as err:
                raise DamagedInput(f"corrupt zstd data: {err}") from None
            if out:
                yield out
            if decomp.eof:
                block = decomp.unused_data
                decomp = zstandard.ZstdDecompressor().decompressobj()
                fed = False
            else:
                block = b""
    if fed and not decomp.eof:
        raise DamagedInput("truncated zstd: the stream ended before its last frame was complete")


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
