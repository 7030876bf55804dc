"""Decompressed byte streams, bounded, that report damage instead of losing what came before it.

Every decompression is bounded (docs/limits.md): one step returns at most ``OUT_CHUNK`` bytes
(gzip, bz2, xz exactly; zstd, fed ``ZSTD_FEED`` bytes a step, at most ~44 KB per byte fed), and
a stream may give ``max_expansion_ratio`` times the compressed bytes read so far, beyond
``RATIO_GRACE_BYTES``: past that it stops with :class:`OverLimit` at that point, as a damaged
stream stops with :class:`DamagedInput`, after everything before it was yielded.
"""

from __future__ import annotations

import bz2
import lzma
import mmap
import os
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import zstandard
from fsspec.core import url_to_fs

from curator.io.files import open_binary

READ_SIZE = 4 << 20
#: Most bytes one decompression step returns.
OUT_CHUNK = 4 << 20
#: Decompressed bytes a stream may give per compressed byte read (text compresses 3-10 times;
#: gzip's most is ~1030, bz2's and zstd's far more).
MAX_EXPANSION_RATIO = 200.0
#: Decompressed bytes a stream may give before ``MAX_EXPANSION_RATIO`` applies.
RATIO_GRACE_BYTES = 16 << 20
#: Compressed bytes given to a decompressor a step (zstd's own API has no output bound).
FEED = 64 << 10
ZSTD_FEED = 1 << 10


class DamagedInput(Exception):
    """The compressed stream ended early or is corrupt; everything before it was yielded."""

    reason = "damaged"


class OverLimit(DamagedInput):
    """The input passed one of the limits of docs/limits.md; everything before was yielded."""

    reason = "over_limit"


def compression_of(url: str) -> str | None:
    name = url.lower().split("?", 1)[0]
    if name.endswith(".gz"):
        return "gzip"
    if name.endswith((".zst", ".zstd")):
        return "zstd"
    if name.endswith(".bz2"):
        return "bz2"
    if name.endswith(".xz"):
        return "xz"
    return None


@dataclass(frozen=True)
class _Codec:
    name: str
    new: Callable[[], Any]
    errors: tuple[type[Exception], ...]
    feed: int
    step: Callable[[Any, bytes], bytes]  # decompress (at most OUT_CHUNK) from data given
    more: Callable[[Any, bytes], bool]  # output is still waiting after the step that gave this


def _zlib_step(decomp: Any, data: bytes) -> bytes:
    return decomp.decompress(decomp.unconsumed_tail + data, OUT_CHUNK)


def _buffered_step(decomp: Any, data: bytes) -> bytes:  # bz2, lzma: they keep their input
    return decomp.decompress(data, OUT_CHUNK)


_CODECS = {
    "gzip": _Codec("gzip", lambda: zlib.decompressobj(wbits=31), (zlib.error,), FEED, _zlib_step,
                   lambda d, out: not d.eof and (bool(d.unconsumed_tail) or len(out) == OUT_CHUNK)),
    "bz2": _Codec("bz2", bz2.BZ2Decompressor, (OSError, ValueError), FEED, _buffered_step,
                  lambda d, out: not d.eof and not d.needs_input),
    "xz": _Codec("xz", lzma.LZMADecompressor, (lzma.LZMAError,), FEED, _buffered_step,
                 lambda d, out: not d.eof and not d.needs_input),
    "zstd": _Codec("zstd", lambda: zstandard.ZstdDecompressor().decompressobj(),
                   (zstandard.ZstdError,), ZSTD_FEED, lambda d, data: d.decompress(data),
                   lambda d, out: False),
}


def _frames(raw, codec: _Codec, max_ratio: float) -> Iterator[bytes]:
    """Decompress a stream of concatenated frames (gzip members, zstd frames, bz2 streams),
    bounded as the module docstring says."""
    decomp = codec.new()
    in_frame = False
    consumed = produced = 0
    while block := raw.read(READ_SIZE):
        for start in range(0, len(block), codec.feed):
            piece = block[start:start + codec.feed]
            while piece:
                if not in_frame and not piece.strip(b"\0"):
                    break  # zero padding after the last frame
                in_frame = True
                consumed += len(piece)
                data = piece
                while True:
                    try:
                        out = codec.step(decomp, data)
                    except codec.errors as err:
                        raise DamagedInput(f"corrupt {codec.name} data: {err}") from None
                    produced += len(out)
                    allowed = RATIO_GRACE_BYTES + int(max_ratio * consumed)
                    if produced > allowed:
                        if len(out) > produced - allowed:  # what came before the limit
                            yield out[:len(out) - (produced - allowed)]
                        raise OverLimit(f"{codec.name} data expands more than "
                                        f"max_expansion_ratio={max_ratio:g} times: {produced} "
                                        f"bytes from {consumed} compressed")
                    if out:
                        yield out
                    if not codec.more(decomp, out):
                        break
                    data = b""
                if decomp.eof:
                    piece, decomp, in_frame = decomp.unused_data, codec.new(), False
                    consumed -= len(piece)
                else:
                    piece = b""
    if in_frame:
        raise DamagedInput(f"truncated {codec.name}: the stream ended before its end-of-stream "
                           "marker")


def bz2_chunks(raw, max_ratio: float = MAX_EXPANSION_RATIO) -> Iterator[bytes]:
    """The decompressed bytes of concatenated bz2 streams read from ``raw`` (to its end)."""
    return _frames(raw, _CODECS["bz2"], max_ratio)


def decompressed_chunks(raw, compression: str,
                        max_ratio: float = MAX_EXPANSION_RATIO) -> Iterator[bytes]:
    """The decompressed bytes of ``raw`` (``compression`` as :func:`compression_of` names it)."""
    return _frames(raw, _CODECS[compression], max_ratio)


def _local_path(url: str) -> str | None:
    fs, path = url_to_fs(url)
    return path if "file" in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)) \
        else None


def iter_decompressed(url: str, read_size: int = READ_SIZE,
                      max_ratio: float = MAX_EXPANSION_RATIO) -> Iterator[bytes | memoryview]:
    """Yield the decompressed bytes of ``url``; raise ``DamagedInput`` at the damaged point, or
    ``OverLimit`` where it expands more than ``max_ratio`` times.

    A plain local file is yielded once, memory-mapped (no copy); other plain files are read
    ``read_size`` bytes at a time.
    """
    kind = compression_of(url)
    local = _local_path(url) if kind is None else None
    if local is not None:
        if os.path.getsize(local):
            with open(local, "rb") as f:
                # unmapped when the last view of it is released
                yield memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
        return
    with open_binary(url) as raw:
        if kind is not None:
            yield from decompressed_chunks(raw, kind, max_ratio)
        else:
            while block := raw.read(read_size):
                yield block


def read_bounded(url: str, max_bytes: int, max_ratio: float = MAX_EXPANSION_RATIO) -> bytes:
    """The whole decompressed content of ``url``; ``OverLimit`` past ``max_bytes`` (or the
    ratio), ``DamagedInput`` where it is damaged."""
    chunks, size = [], 0
    for chunk in iter_decompressed(url, max_ratio=max_ratio):
        size += len(chunk)
        if size > max_bytes:
            raise OverLimit(f"more than {max_bytes} bytes decompressed")
        chunks.append(bytes(chunk))
    return b"".join(chunks)
