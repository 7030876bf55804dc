"""Pack fine-tuning sequences into bins and write Megatron-Bridge packed Parquet.

Each pack is one Parquet row (``GPTSFTPackedParquetDataset``, files named ``*.idx.parquet``)::

    input_ids:    list<int32>  the sequences of the pack, concatenated (no padding: the
                               collate function pads each batch itself)
    loss_mask:    list<int8>   one 0/1 per token, same length as input_ids, aligned with the
                               labels: 1 at position j when the prediction of token j + 1
                               (of the same sequence) counts; 0 at each sequence's last token
    seq_start_id: list<int32>  start offset of each sequence in the pack; the first is 0

Sizes follow Bridge's packer (``packing/algorithms.py``): the trainer turns a sequence of L stored
tokens into L - 1 inputs and L - 1 labels, so a sequence takes L - 1 of ``pack_size`` (Bridge's
``packed_sequence_size``, the trainer's sequence length) and a row stores at most ``pack_size``
plus one token per sequence in it.

Bins are filled first-fit-decreasing: sequences sorted by length, longest first (ties by input
order), each placed in the first pack with room. The search for "first pack with room" uses a
max-segment tree over remaining capacities, O(n log n) overall. The result depends only on the
lengths and their order, so it is deterministic. Sequences live in flat NumPy arrays (tokens and
lengths), never as per-token Python objects.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pyarrow as pa

__all__ = [
    "PACKED_SCHEMA",
    "PackingStats",
    "Packs",
    "SequenceTooLongError",
    "check_packed",
    "first_fit_decreasing",
    "pack",
    "write_packed_parquet",
]

PACKED_SCHEMA = pa.schema([
    ("input_ids", pa.list_(pa.int32())),
    ("loss_mask", pa.list_(pa.int8())),
    ("seq_start_id", pa.list_(pa.int32())),
])


class SequenceTooLongError(ValueError):
    """A sequence is longer than the pack size."""


def first_fit_decreasing(lengths: Sequence[int] | np.ndarray, pack_size: int) -> list[list[int]]:
    """Indices of ``lengths`` per bin; every bin's total is at most ``pack_size``.

    Within a bin, indices are in placement order (longest first)."""
    if pack_size <= 0:
        raise ValueError(f"pack_size must be positive, got {pack_size}")
    lens = np.asarray(lengths, dtype=np.int64)
    if lens.size == 0:
        return []
    too_long = np.flatnonzero(lens > pack_size)
    if too_long.size:
        i = int(too_long[0])
        raise SequenceTooLongError(
            f"sequence {i} has {int(lens[i])} tokens, more than pack_size {pack_size} "
            f"({too_long.size} sequence(s) too long); truncate them or raise pack_size"
        )
    if (lens < 0).any():
        raise ValueError("lengths must be non-negative")
    order = np.argsort(-lens, kind="stable")
    n = lens.size  # at most n bins
    size = 1
    while size < n:
        size *= 2
    # tree[size + b] = remaining capacity of bin b (bins not yet opened have full capacity)
    tree = np.zeros(2 * size, dtype=np.int64)
    tree[size : size + n] = pack_size
    for k in range(size - 1, 0, -1):
        tree[k] = max(tree[2 * k], tree[2 * k + 1])
    bins: list[list[int]] = []
    t = tree.tolist()  # Python list: faster scalar access than NumPy in this loop
    for idx in order.tolist():
        need = int(lens[idx])
        k = 1
        while k < size:
            k = 2 * k if t[2 * k] >= need else 2 * k + 1
        b = k - size
        if b == len(bins):
            bins.append([])
        bins[b].append(idx)
        t[k] -= need
        k //= 2
        while k:
            t[k] = t[2 * k] if t[2 * k] >= t[2 * k + 1] else t[2 * k + 1]
            k //= 2
    return bins


@dataclass(frozen=True)
class PackingStats:
    """Facts about a set of packs. Lengths are in the trainer's terms (L - 1 per sequence);
    ``num_tokens`` counts stored tokens (L per sequence)."""

    pack_size: int
    num_sequences: int = 0
    num_packs: int = 0
    num_tokens: int = 0
    num_loss_tokens: int = 0
    max_sequence_length: int = 0
    max_sequences_per_pack: int = 0
    min_pack_length: int = 0

    @property
    def packed_tokens(self) -> int:
        """Tokens the trainer sees: L - 1 per sequence."""
        return self.num_tokens - self.num_sequences

    @property
    def packing_efficiency(self) -> float:
        """Share of the packs' capacity filled with tokens."""
        return self.packed_tokens / (self.num_packs * self.pack_size) if self.num_packs else 0.0

    @property
    def packing_factor(self) -> float:
        """Sequences per pack."""
        return self.num_sequences / self.num_packs if self.num_packs else 0.0

    def merge(self, other: PackingStats) -> PackingStats:
        """The statistics of both sets of packs together."""
        if other.pack_size != self.pack_size:
            raise ValueError(f"pack sizes differ: {self.pack_size} and {other.pack_size}")
        if not other.num_packs:
            return self
        if not self.num_packs:
            return other
        return PackingStats(
            pack_size=self.pack_size,
            num_sequences=self.num_sequences + other.num_sequences,
            num_packs=self.num_packs + other.num_packs,
            num_tokens=self.num_tokens + other.num_tokens,
            num_loss_tokens=self.num_loss_tokens + other.num_loss_tokens,
            max_sequence_length=max(self.max_sequence_length, other.max_sequence_length),
            max_sequences_per_pack=max(self.max_sequences_per_pack, other.max_sequences_per_pack),
            min_pack_length=min(self.min_pack_length, other.min_pack_length),
        )

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    def bridge_metadata(self) -> dict[str, float | int]:
        """The entry Bridge's ``pack_metadata_file_path`` JSON list holds for one dataset
        (read when ``pad_cu_seqlens`` is on)."""
        return {
            "dataset_max_seqlen": self.max_sequence_length,
            "max_samples_per_bin": self.max_sequences_per_pack,
            "packing_factor": round(self.packing_factor, 2),
            "packing_efficiency": round(100 * self.packing_efficiency, 2),
            "pack_size": self.pack_size,
            "min_packed_seqlen": self.min_pack_length,
        }


@dataclass(frozen=True)
class Packs:
    """Packs as flat arrays: pack ``i`` holds ``tokens[pack_offsets[i]:pack_offsets[i + 1]]``
    (and the same slice of ``loss_mask``) and the starts
    ``seq_starts[seq_offsets[i]:seq_offsets[i + 1]]``, relative to the pack."""

    tokens: np.ndarray  # int32
    loss_mask: np.ndarray  # int8
    pack_offsets: np.ndarray  # int64, len = packs + 1
    seq_starts: np.ndarray  # int32
    seq_offsets: np.ndarray  # int64, len = packs + 1

    def __len__(self) -> int:
        return len(self.pack_offsets) - 1

    def batches(self, rows: int) -> Iterator[pa.RecordBatch]:
        """Record batches of up to ``rows`` packs in the Bridge schema (list offsets are per
        batch, so no batch overflows int32 however many tokens the packs hold)."""
        for first in range(0, len(self), rows):
            last = min(first + rows, len(self))
            tok = self.pack_offsets[first : last + 1]
            seq = self.seq_offsets[first : last + 1]
            tok_offsets = pa.array(tok - tok[0], pa.int32())
            seq_offsets = pa.array(seq - seq[0], pa.int32())
            yield pa.RecordBatch.from_arrays([
                pa.ListArray.from_arrays(tok_offsets, self.tokens[tok[0] : tok[-1]]),
                pa.ListArray.from_arrays(tok_offsets, self.loss_mask[tok[0] : tok[-1]]),
                pa.ListArray.from_arrays(seq_offsets, self.seq_starts[seq[0] : seq[-1]]),
            ], schema=PACKED_SCHEMA)


def label_aligned(mask: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Bridge's loss mask from a per-token one (1 = train on this token): position j takes the
    flag of token j + 1 of the same sequence, each sequence's last position gets 0."""
    out = np.zeros(len(mask), dtype=np.int8)
    out[:-1] = mask[1:] != 0
    ends = np.cumsum(lengths)
    out[ends[lengths > 0] - 1] = 0
    return out


def pack(tokens: np.ndarray, lengths: np.ndarray, pack_size: int,
         token_mask: np.ndarray | None = None) -> tuple[Packs, PackingStats]:
    """First-fit-decreasing packing of the sequences ``tokens`` holds back to back.

    ``token_mask`` (one 0/1 per token, default all 1) says which tokens the model is trained
    to predict (SFT: the answer and its end-of-document token, not the prompt); the packs carry
    it label-aligned (:func:`label_aligned`). A sequence of L tokens needs L - 1 ≤ ``pack_size``.
    """
    tokens = np.asarray(tokens, dtype=np.int32)
    lengths = np.asarray(lengths, dtype=np.int64)
    mask = np.ones(len(tokens), np.int8) if token_mask is None else np.asarray(token_mask)
    if len(mask) != len(tokens) or int(lengths.sum()) != len(tokens):
        raise ValueError(f"{len(tokens)} tokens, {len(mask)} mask entries and lengths summing "
                         f"to {int(lengths.sum())} do not match")
    if (lengths <= 0).any():
        raise ValueError(f"{int((lengths <= 0).sum())} empty sequence(s), first at index "
                         f"{int(np.flatnonzero(lengths <= 0)[0])}")
    too_long = np.flatnonzero(lengths - 1 > pack_size)
    if too_long.size:
        i = int(too_long[0])
        raise SequenceTooLongError(
            f"sequence {i} has {int(lengths[i])} tokens; packs of {pack_size} hold sequences of "
            f"at most {pack_size + 1} (the trainer sees L - 1 of them) ({too_long.size} too long)")
    bins = first_fit_decreasing(lengths - 1, pack_size)
    order = np.fromiter((i for b in bins for i in b), dtype=np.int64, count=len(lengths))
    seqs_per_pack = np.fromiter(map(len, bins), dtype=np.int64, count=len(bins))
    packs = _gather(tokens, label_aligned(mask, lengths), lengths, order, seqs_per_pack)
    pack_lengths = np.diff(packs.pack_offsets) - seqs_per_pack
    stats = PackingStats(
        pack_size=pack_size,
        num_sequences=len(lengths),
        num_packs=len(bins),
        num_tokens=len(tokens),
        num_loss_tokens=int(packs.loss_mask.sum(dtype=np.int64)),
        max_sequence_length=int(lengths.max(initial=1)) - 1,
        max_sequences_per_pack=int(seqs_per_pack.max(initial=0)),
        min_pack_length=int(pack_lengths.min()) if len(bins) else 0,
    )
    return packs, stats


def _gather(tokens: np.ndarray, loss_mask: np.ndarray, lengths: np.ndarray, order: np.ndarray,
            seqs_per_pack: np.ndarray) -> Packs:
    """Lay the sequences out in ``order`` (pack after pack) as :class:`Packs`."""
    starts = np.cumsum(lengths) - lengths
    out_lengths = lengths[order]
    out_starts = np.cumsum(out_lengths) - out_lengths
    source = np.arange(len(tokens), dtype=np.int64) + np.repeat(starts[order] - out_starts,
                                                               out_lengths)
    seq_offsets = np.concatenate(([0], np.cumsum(seqs_per_pack))).astype(np.int64)
    pack_offsets = np.concatenate(([0], np.cumsum(out_lengths)))[seq_offsets]
    first_of_pack = np.repeat(pack_offsets[:-1], seqs_per_pack)
    return Packs(tokens=tokens[source], loss_mask=loss_mask[source],
                 pack_offsets=pack_offsets.astype(np.int64),
                 seq_starts=(out_starts - first_of_pack).astype(np.int32),
                 seq_offsets=seq_offsets)


def check_packed(batch: pa.RecordBatch | pa.Table) -> None:
    """Raise ``ValueError`` unless every row keeps Bridge's packed-row invariants
    (``GPTSFTPackedParquetDataset.validate_row``) and the loss mask is 0/1."""
    ids, mask, starts = (batch.column(n) for n in ("input_ids", "loss_mask", "seq_start_id"))
    if isinstance(ids, pa.ChunkedArray):
        ids, mask, starts = (c.combine_chunks() for c in (ids, mask, starts))
    n_ids = np.diff(ids.offsets.to_numpy())
    n_starts = np.diff(starts.offsets.to_numpy())
    values = starts.values.to_numpy()
    first = starts.offsets.to_numpy()[:-1]
    bad = (n_ids != np.diff(mask.offsets.to_numpy())) | (n_starts == 0)
    ok = ~bad
    bad[ok] |= values[first[ok]] != 0
    row_of = np.repeat(np.arange(len(n_ids)), n_starts)
    bad[row_of[values >= n_ids[row_of]]] = True
    decreasing = np.flatnonzero(np.diff(values) < 0) + 1
    bad[row_of[decreasing[decreasing != first[row_of[decreasing]]]]] = True
    if bad.any():
        raise ValueError(f"{int(bad.sum())} pack(s) break the packed-Parquet invariants, first "
                         f"row {int(np.flatnonzero(bad)[0])}")
    flags = mask.values.to_numpy()
    if ((flags != 0) & (flags != 1)).any():
        raise ValueError("loss_mask holds values other than 0 and 1")


def write_packed_parquet(packs: Packs, path: str | os.PathLike[str],
                         row_group_size: int = 500) -> int:
    """Write ``packs`` to ``path`` as Megatron-Bridge packed Parquet (zstd, row groups of
    ``row_group_size`` packs, Bridge's default); returns the row count.

    Name the file ``*.idx.parquet`` so Bridge's path resolution finds it. The file is written
    in place: a caller that needs it atomic writes to a temporary name and renames."""
    import pyarrow.parquet as pq

    with pq.ParquetWriter(os.fspath(path), PACKED_SCHEMA, compression="zstd") as writer:
        for batch in packs.batches(row_group_size):
            check_packed(batch)
            writer.write_batch(batch, row_group_size=row_group_size)
    return len(packs)
