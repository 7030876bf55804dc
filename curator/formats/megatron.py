"""Streaming writer for Megatron-Core indexed datasets (``MMIDIDX`` version 1).

Byte layout (see ../shared/reference/megatron_format.md §2.1, checked byte for byte against
megatron-core's own ``IndexedDatasetBuilder`` in tests/io/test_megatron.py)::

    <prefix>.bin   token ids, one sequence per document, back to back, no header
    <prefix>.idx   b"MMIDIDX\\x00\\x00" | u64 version=1 | u8 dtype code | u64 N | u64 D+1
                   | i32 lengths[N] | i64 byte pointers[N] | i64 document_indices[D+1]

Tokens go to the ``.bin`` with NumPy as batches arrive; only one int32 length per document is
kept in memory for the ``.idx`` (4 bytes a document; 20 bytes a document for the moment the index
is written). Both files are written under temporary names and renamed when whole: ``.bin`` first,
then ``.idx``, so a finished ``.idx`` always has its ``.bin`` beside it, and a prefix whose ``.idx``
exists is complete. Re-running after a kill rewrites the shard from the start and gives the same
bytes, because nothing depends on timing, process ids or partial state.
"""

from __future__ import annotations

import array
import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

__all__ = [
    "DTYPE_CODES",
    "INDEX_HEADER",
    "IndexedDatasetWriter",
    "ShardInfo",
    "ShardedIndexedDatasetWriter",
    "TokenOutOfVocabError",
    "is_complete",
    "optimal_dtype",
    "read_index",
]

INDEX_HEADER = b"MMIDIDX\x00\x00"
# megatron.core.datasets.indexed_dataset.DType
DTYPE_CODES = {
    np.dtype(np.uint8): 1,
    np.dtype(np.int8): 2,
    np.dtype(np.int16): 3,
    np.dtype(np.int32): 4,
    np.dtype(np.int64): 5,
    np.dtype(np.float64): 6,
    np.dtype(np.float32): 7,
    np.dtype(np.uint16): 8,
}
CODE_DTYPES = {v: k for k, v in DTYPE_CODES.items()}
UINT16_LIMIT = 65500  # megatron-core DType.optimal_dtype: uint16 iff cardinality < 65500


class TokenOutOfVocabError(ValueError):
    """A token id is negative or not below the vocabulary size."""


def optimal_dtype(vocab_size: int) -> np.dtype:
    """uint16 when the vocabulary is below 65500 ids, else int32 (megatron-core's rule)."""
    if vocab_size is None or vocab_size <= 0:
        raise ValueError(f"vocab_size must be a positive int, got {vocab_size!r}")
    return np.dtype(np.uint16) if vocab_size < UINT16_LIMIT else np.dtype(np.int32)


def is_complete(prefix: str) -> bool:
    """A shard is complete iff its ``.idx`` exists (it is renamed last)."""
    return os.path.isfile(prefix + ".idx") and os.path.isfile(prefix + ".bin")


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _flatten(docs: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter((len(d) for d in docs), dtype=np.int64, count=len(docs))
    if not lengths.any():
        return np.zeros(0, dtype=np.int64), lengths
    # one C-level conversion per document is cheaper than one Python step per token
    flat = np.concatenate([np.asarray(d, dtype=np.int64) for d in docs if len(d)])
    return flat, lengths


class IndexedDatasetWriter:
    """Write one ``<prefix>.bin/.idx`` pair, one sequence per document.

    ``add_batch(token_lists)`` takes the tokenizer's output for a batch of documents, appends
    ``eod_id`` to each (when given) and writes them with one ``write`` call. A document whose token
    list is empty is skipped and counted in ``empty_skipped`` (or, with ``keep_empty=True``,
    written as the EOD token alone). Ids outside ``[0, vocab_size)`` raise
    :class:`TokenOutOfVocabError` before anything of that batch is written.

    Use as a context manager: a clean exit commits (renames into place); an exception removes the
    temporary files and leaves no shard behind.

    ``temporary`` hands the commit to a caller: it maps each final path (``.bin``, then ``.idx``)
    to the temporary path to write, and ``close`` leaves the files there for the caller to rename
    (the pipeline runtime commits a shard's files together, then its manifest).
    """

    def __init__(
        self,
        prefix: str,
        *,
        vocab_size: int,
        eod_id: int | None = None,
        dtype: np.dtype | type | None = None,
        keep_empty: bool = False,
        fsync: bool = True,
        buffer_size: int = 1 << 22,
        temporary: Callable[[str], str] | None = None,
        shuffle_seed: Sequence[int] | None = None,
    ) -> None:
        self.prefix = os.fspath(prefix)
        self.shuffle_seed = shuffle_seed
        self.vocab_size = int(vocab_size)
        self.dtype = np.dtype(dtype) if dtype is not None else optimal_dtype(self.vocab_size)
        if self.dtype not in DTYPE_CODES:
            raise ValueError(f"unsupported token dtype {self.dtype}")
        if self.dtype == np.uint16 and self.vocab_size > 65536:
            raise ValueError(f"vocab_size {self.vocab_size} does not fit uint16 tokens")
        if eod_id is not None and not 0 <= eod_id < self.vocab_size:
            raise TokenOutOfVocabError(
                f"eod_id {eod_id} is outside the vocabulary [0, {self.vocab_size})"
            )
        self.eod_id = eod_id
        self.keep_empty = keep_empty
        self.fsync = fsync
        self.bin_path = self.prefix + ".bin"
        self.idx_path = self.prefix + ".idx"
        parent = os.path.dirname(self.prefix)
        if parent:
            os.makedirs(parent, exist_ok=True)
        self._commit = temporary is None
        if temporary is None:
            self._tmp_bin = self.bin_path + ".tmp"
            self._tmp_idx = self.idx_path + ".tmp"
            # A stale finished shard under the same prefix is invalidated first (idx before bin),
            # so a crash from here on can never leave an old .idx next to a new .bin.
            for p in (self.idx_path, self.bin_path):
                if os.path.exists(p):
                    os.remove(p)
        else:
            self._tmp_bin = os.fspath(temporary(self.bin_path))
            self._tmp_idx = os.fspath(temporary(self.idx_path))
        self._bin = open(self._tmp_bin, "wb", buffering=buffer_size)  # noqa: SIM115 (close())
        self._lengths = array.array("i")
        self._num_documents = 0
        self.num_tokens = 0
        self.empty_skipped = 0
        self.closed = False

    # -- writing ---------------------------------------------------------------------------------
    @property
    def num_documents(self) -> int:
        return self._num_documents

    @property
    def num_bytes(self) -> int:
        return self.num_tokens * self.dtype.itemsize

    def add_document(self, tokens: Sequence[int]) -> bool:
        """One document; returns False when it was empty and skipped."""
        before = self.num_documents
        self.add_batch([tokens])
        return self.num_documents > before

    def add_batch(self, docs: Sequence[Sequence[int]]) -> int:
        """Tokenizer output for a batch of documents; returns how many were written."""
        flat, lengths = _flatten(docs)
        return self.add_flat(flat, lengths)

    def add_flat(self, flat: np.ndarray, lengths: np.ndarray) -> int:
        """Documents given as one flat id array and per-document lengths (no EOD yet)."""
        if self.closed:
            raise ValueError(f"writer for {self.prefix!r} is closed")
        flat = np.asarray(flat)
        lengths = np.asarray(lengths, dtype=np.int64)
        if int(lengths.sum()) != flat.size:
            raise ValueError(f"lengths sum to {int(lengths.sum())} but {flat.size} ids were given")
        if flat.size:
            lo, hi = int(flat.min()), int(flat.max())
            if lo < 0 or hi >= self.vocab_size:
                bad = lo if lo < 0 else hi
                pos = int(np.flatnonzero((flat < 0) | (flat >= self.vocab_size))[0])
                doc = int(np.searchsorted(np.cumsum(lengths), pos, side="right"))
                raise TokenOutOfVocabError(
                    f"token id {bad} in document {doc} of this batch is outside the vocabulary "
                    f"[0, {self.vocab_size}) of {self.prefix!r}"
                )
        empty = lengths == 0
        n_empty = int(empty.sum())
        if n_empty and not self.keep_empty:
            self.empty_skipped += n_empty
            lengths = lengths[~empty]
        if lengths.size == 0:
            return 0
        if self.eod_id is not None:
            # Insert EOD after each document in one vectorised pass.
            out_len = lengths + 1
            out = np.empty(int(out_len.sum()), dtype=self.dtype)
            ends = np.cumsum(out_len) - 1
            mask = np.ones(out.size, dtype=bool)
            mask[ends] = False
            out[mask] = flat
            out[ends] = self.eod_id
            lengths = out_len
        else:
            if n_empty and self.keep_empty:
                pass  # zero-length sequences are legal in the format
            out = flat.astype(self.dtype, copy=False)
        if lengths.max(initial=0) > np.iinfo(np.int32).max:
            raise ValueError("a document longer than 2**31-1 tokens cannot be indexed")
        self._bin.write(memoryview(np.ascontiguousarray(out)).cast("B"))
        self._lengths.frombytes(lengths.astype(np.int32).tobytes())
        self.num_tokens += int(out.size)
        self._num_documents += int(lengths.size)
        return int(lengths.size)

    # -- finishing -------------------------------------------------------------------------------
    def _index_bytes(self) -> bytes:
        n = len(self._lengths)
        lengths = np.frombuffer(self._lengths, dtype=np.int32) if n else np.zeros(0, np.int32)
        pointers = np.zeros(n, dtype=np.int64)
        if n > 1:
            np.cumsum(lengths[:-1], dtype=np.int64, out=pointers[1:])
        pointers *= self.dtype.itemsize
        if self.shuffle_seed is not None:
            # A seeded document order: the index lists the sequences in a permuted order; the
            # .bin stays as streamed (Megatron reads each sequence at its own pointer).
            order = np.random.default_rng(list(self.shuffle_seed)).permutation(n)
            lengths, pointers = lengths[order], pointers[order]
        doc_idx = np.arange(n + 1, dtype=np.int64)
        head = INDEX_HEADER + struct.pack("<Q", 1) + struct.pack("<B", DTYPE_CODES[self.dtype])
        head += struct.pack("<Q", n) + struct.pack("<Q", n + 1)
        return b"".join(
            (
                head,
                lengths.astype("<i4").tobytes(),
                pointers.astype("<i8").tobytes(),
                doc_idx.astype("<i8").tobytes(),
            )
        )

    def close(self) -> ShardInfo:
        """Write the index and move both files into place; returns the shard's summary."""
        if self.closed:
            raise ValueError(f"writer for {self.prefix!r} is already closed")
        self._bin.flush()
        if self.fsync:
            os.fsync(self._bin.fileno())
        self._bin.close()
        with open(self._tmp_idx, "wb") as f:
            f.write(self._index_bytes())
            f.flush()
            if self.fsync:
                os.fsync(f.fileno())
        if self._commit:
            os.replace(self._tmp_bin, self.bin_path)
            os.replace(self._tmp_idx, self.idx_path)
            if self.fsync:
                _fsync_dir(os.path.dirname(self.prefix))
        self.closed = True
        info = self.info()
        self._lengths = array.array("i")  # free the index memory; counts stay
        return info

    def abort(self) -> None:
        """Drop everything written so far; no shard is left under the prefix."""
        if self.closed:
            return
        try:
            self._bin.close()
        finally:
            for p in (self._tmp_bin, self._tmp_idx):
                if os.path.exists(p):
                    os.remove(p)
            self.closed = True

    def info(self) -> ShardInfo:
        return ShardInfo(
            prefix=self.prefix,
            num_sequences=self.num_documents,
            num_documents=self.num_documents,
            num_tokens=self.num_tokens,
            num_bytes=self.num_bytes,
            dtype=self.dtype.name,
            empty_skipped=self.empty_skipped,
        )

    def __enter__(self) -> IndexedDatasetWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            if not self.closed:
                self.close()
        else:
            self.abort()


@dataclass(frozen=True)
class ShardInfo:
    """Summary of one finished shard (what blend files and stats need)."""

    prefix: str
    num_sequences: int
    num_documents: int  # documents D; the .idx stores D+1 document indices
    num_tokens: int
    num_bytes: int
    dtype: str
    empty_skipped: int = 0

    @property
    def sequences_entry(self) -> list[int]:
        """The ``[sequence_count, document_count]`` pair ``--per-dataset-sequences-path`` wants
        (document_count is the .idx's ``len(document_indices)`` = D+1)."""
        return [self.num_sequences, self.num_documents + 1]

    def to_dict(self) -> dict:
        return asdict(self)


class ShardedIndexedDatasetWriter:
    """A sequence of shards ``<directory>/<name>_<NNNNN>_text_document.{bin,idx}``.

    A new shard starts when adding the next document would take the current one over
    ``max_shard_tokens`` or ``max_shard_bytes`` (a document is never split; a single document over
    the budget gets a shard of its own). Shard boundaries depend only on the document order and
    token counts, so the same input always gives the same shards. ``temporary``: as for
    :class:`IndexedDatasetWriter` (the caller commits every shard's files).
    """

    def __init__(
        self,
        directory: str,
        name: str,
        *,
        vocab_size: int,
        eod_id: int | None = None,
        max_shard_tokens: int | None = None,
        max_shard_bytes: int | None = None,
        dtype: np.dtype | type | None = None,
        keep_empty: bool = False,
        fsync: bool = True,
        temporary: Callable[[str], str] | None = None,
        shuffle_seed: Sequence[int] | None = None,
    ) -> None:
        self.temporary = temporary
        self.shuffle_seed = shuffle_seed
        self.directory = os.fspath(directory)
        self.name = name
        self.vocab_size = int(vocab_size)
        self.eod_id = eod_id
        self.dtype = np.dtype(dtype) if dtype is not None else optimal_dtype(self.vocab_size)
        budgets = []
        if max_shard_tokens is not None:
            budgets.append(int(max_shard_tokens))
        if max_shard_bytes is not None:
            budgets.append(int(max_shard_bytes) // self.dtype.itemsize)
        if any(b <= 0 for b in budgets):
            raise ValueError("shard budgets must be positive")
        self.max_tokens = min(budgets) if budgets else None
        self.keep_empty = keep_empty
        self.fsync = fsync
        self.shards: list[ShardInfo] = []
        self._current: IndexedDatasetWriter | None = None
        self.empty_skipped = 0
        self.closed = False

    def shard_prefix(self, index: int) -> str:
        return os.path.join(self.directory, f"{self.name}_{index:05d}_text_document")

    def _open_next(self) -> IndexedDatasetWriter:
        self._current = IndexedDatasetWriter(
            self.shard_prefix(len(self.shards)),
            vocab_size=self.vocab_size,
            eod_id=self.eod_id,
            dtype=self.dtype,
            keep_empty=self.keep_empty,
            fsync=self.fsync,
            temporary=self.temporary,
            shuffle_seed=None if self.shuffle_seed is None
            else [*self.shuffle_seed, len(self.shards)],
        )
        return self._current

    def _roll(self) -> None:
        assert self._current is not None
        self.shards.append(self._current.close())
        self._current = None

    def add_batch(self, docs: Sequence[Sequence[int]]) -> int:
        flat, lengths = _flatten(docs)
        return self.add_flat(flat, lengths)

    def add_flat(self, flat: np.ndarray, lengths: np.ndarray) -> int:
        if self.closed:
            raise ValueError("writer is closed")
        flat = np.asarray(flat)
        lengths = np.asarray(lengths, dtype=np.int64)
        if self.max_tokens is None:
            w = self._current or self._open_next()
            before = w.empty_skipped
            n = w.add_flat(flat, lengths)
            self.empty_skipped += w.empty_skipped - before
            return n
        # Written size of each document (empty ones are skipped or become a lone EOD).
        written = lengths + (1 if self.eod_id is not None else 0)
        if not self.keep_empty:
            written = np.where(lengths == 0, 0, written)
        starts = np.concatenate(([0], np.cumsum(lengths)))
        n_written = 0
        i, n = 0, lengths.size
        while i < n:
            w = self._current or self._open_next()
            room = self.max_tokens - w.num_tokens
            # Largest j such that docs [i, j) fit into the room left.
            cum = np.cumsum(written[i:])
            j = i + int(np.searchsorted(cum, room, side="right"))
            if j == i:
                if w.num_tokens == 0:
                    j = i + 1  # an oversize document gets a shard of its own
                else:
                    self._roll()
                    continue
            before = w.empty_skipped
            n_written += w.add_flat(flat[starts[i] : starts[j]], lengths[i:j])
            self.empty_skipped += w.empty_skipped - before
            i = j
            if w.num_tokens >= self.max_tokens and i < n:
                self._roll()
        return n_written

    def close(self) -> list[ShardInfo]:
        """Finish the last shard; returns all shards in order."""
        if not self.closed:
            if self._current is not None:
                if self._current.num_documents or not self.shards:
                    self._roll()
                else:
                    self._current.abort()
                    self._current = None
            self.closed = True
        return list(self.shards)

    def abort(self) -> None:
        if self._current is not None:
            self._current.abort()
            self._current = None
        self.closed = True

    @property
    def num_tokens(self) -> int:
        return sum(s.num_tokens for s in self.shards) + (
            self._current.num_tokens if self._current else 0
        )

    @property
    def num_documents(self) -> int:
        return sum(s.num_documents for s in self.shards) + (
            self._current.num_documents if self._current else 0
        )

    def __enter__(self) -> ShardedIndexedDatasetWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def read_index(prefix: str) -> dict:
    """Parse a ``.idx`` with NumPy alone (no torch): dtype, lengths, pointers, document indices."""
    with open(prefix + ".idx", "rb") as f:
        buf = f.read()
    if buf[:9] != INDEX_HEADER:
        raise ValueError(f"{prefix}.idx is not an MMIDIDX index (header {buf[:9]!r})")
    (version,) = struct.unpack_from("<Q", buf, 9)
    if version != 1:
        raise ValueError(f"{prefix}.idx has version {version}, expected 1")
    (code,) = struct.unpack_from("<B", buf, 17)
    n, d = struct.unpack_from("<QQ", buf, 18)
    off = 34
    lengths = np.frombuffer(buf, "<i4", n, off)
    off += 4 * n
    pointers = np.frombuffer(buf, "<i8", n, off)
    off += 8 * n
    doc_idx = np.frombuffer(buf, "<i8", d, off)
    off += 8 * d
    return {
        "dtype": CODE_DTYPES[code],
        "sequence_lengths": lengths,
        "sequence_pointers": pointers,
        "document_indices": doc_idx,
        "trailing_bytes": len(buf) - off,
    }
