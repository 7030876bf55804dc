"""Pack fine-tuning sequences into fixed-size bins and write Megatron-Bridge packed Parquet.

Each pack is one Parquet row (``GPTSFTPackedParquetDataset``, files named ``*.idx.parquet``)::

    input_ids:    list<int32>  the sequences of the pack, concatenated (no padding: the
                               collate function pads each batch itself)
    loss_mask:    list<int8>   one 0/1 per token, same length as input_ids
    seq_start_id: list<int32>  start offset of each sequence in the pack; the first is 0

Bins are filled first-fit-decreasing: sequences sorted by length, longest first (ties by input
order), each placed in the first pack with room. The search for "first pack with room" uses a
max-segment tree over remaining capacities, O(n log n) overall. The result depends only on the
lengths and their order, so it is deterministic.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "PackingStats",
    "SequenceTooLongError",
    "first_fit_decreasing",
    "pack_sequences",
    "write_packed_parquet",
]


class SequenceTooLongError(ValueError):
    """A sequence is longer than the pack size."""


def first_fit_decreasing(lengths: Sequence[int], pack_size: int) -> list[list[int]]:
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
    num_sequences: int
    num_packs: int
    pack_size: int
    num_tokens: int
    max_sequence_length: int
    max_sequences_per_pack: int

    @property
    def packing_efficiency(self) -> float:
        """Share of the packs' capacity filled with tokens."""
        return self.num_tokens / (self.num_packs * self.pack_size) if self.num_packs else 0.0

    @property
    def packing_factor(self) -> float:
        return self.num_sequences / self.num_packs if self.num_packs else 0.0

    def to_dict(self) -> dict:
        return {
            "num_sequences": self.num_sequences,
            "num_packs": self.num_packs,
            "pack_size": self.pack_size,
            "num_tokens": self.num_tokens,
            "dataset_max_seqlen": self.max_sequence_length,
            "max_samples_per_bin": self.max_sequences_per_pack,
            "packing_factor": round(self.packing_factor, 4),
            "packing_efficiency": round(100 * self.packing_efficiency, 4),
        }


def pack_sequences(
    input_ids: Sequence[Sequence[int]],
    pack_size: int,
    loss_masks: Sequence[Sequence[int]] | None = None,
) -> tuple[list[dict], PackingStats]:
    """First-fit-decreasing packing; returns Bridge rows ``{input_ids, loss_mask, seq_start_id}``
    and statistics. ``loss_masks`` default to all ones."""
    lens = [len(s) for s in input_ids]
    if loss_masks is not None:
        if len(loss_masks) != len(input_ids):
            raise ValueError(f"{len(loss_masks)} loss masks for {len(input_ids)} sequences")
        for i, (s, m) in enumerate(zip(input_ids, loss_masks, strict=True)):
            if len(s) != len(m):
                raise ValueError(
                    f"sequence {i}: loss_mask has {len(m)} entries, input_ids {len(s)}"
                )
    empty = [i for i, n in enumerate(lens) if n == 0]
    if empty:
        raise ValueError(f"{len(empty)} empty sequence(s), first at index {empty[0]}")
    bins = first_fit_decreasing(lens, pack_size)
    rows = []
    for members in bins:
        ids: list[int] = []
        mask: list[int] = []
        starts: list[int] = []
        for i in members:
            starts.append(len(ids))
            ids.extend(int(t) for t in input_ids[i])
            mask.extend(
                (int(bool(v)) for v in loss_masks[i]) if loss_masks is not None else [1] * lens[i]
            )
        rows.append({"input_ids": ids, "loss_mask": mask, "seq_start_id": starts})
    stats = PackingStats(
        num_sequences=len(lens),
        num_packs=len(bins),
        pack_size=pack_size,
        num_tokens=int(sum(lens)),
        max_sequence_length=max(lens, default=0),
        max_sequences_per_pack=max((len(b) for b in bins), default=0),
    )
    return rows, stats


def write_packed_parquet(
    rows: Iterable[dict], path: str | os.PathLike[str], row_group_size: int = 500
) -> int:
    """Write packs as Megatron-Bridge packed Parquet (atomically: temp name, then rename).

    Name the file ``*.idx.parquet`` so Bridge's path resolution finds it. Returns the row count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = os.fspath(path)
    schema = pa.schema(
        [
            ("input_ids", pa.list_(pa.int32())),
            ("loss_mask", pa.list_(pa.int8())),
            ("seq_start_id", pa.list_(pa.int32())),
        ]
    )
    tmp = path + ".tmp"
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    count = 0
    buf: list[dict] = []
    try:
        with pq.ParquetWriter(tmp, schema, compression="zstd") as w:

            def flush() -> None:
                if buf:
                    w.write_table(
                        pa.Table.from_pylist(buf, schema=schema), row_group_size=row_group_size
                    )
                    buf.clear()

            for r in rows:
                ids, mask, starts = r["input_ids"], r["loss_mask"], r["seq_start_id"]
                if (
                    len(mask) != len(ids)
                    or not starts
                    or starts[0] != 0
                    or starts[-1] >= len(ids)
                    or any(b < a for a, b in itertools.pairwise(starts))
                ):
                    raise ValueError(f"pack {count} breaks the packed-Parquet invariants")
                buf.append({"input_ids": ids, "loss_mask": mask, "seq_start_id": starts})
                count += 1
                if len(buf) >= row_group_size:
                    flush()
            flush()
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return count
