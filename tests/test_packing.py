"""First-fit-decreasing packing and the Megatron-Bridge packed Parquet it writes."""

from __future__ import annotations

import gzip
import itertools
import json
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator.formats.bridge import (
    PACKED_SCHEMA,
    PackingStats,
    SequenceTooLongError,
    check_packed,
    first_fit_decreasing,
    label_aligned,
    pack,
    write_packed_parquet,
)
from curator.tokenization.loading import load_tokenizer
from curator.tokenization.training import train_bpe

DATA = Path(__file__).resolve().parent / "data"


def _naive_ffd(lengths, cap):
    """Textbook FFD: scan the open bins left to right for each sequence, longest first."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    bins, room = [], []
    for i in order:
        for b, r in enumerate(room):
            if r >= lengths[i]:
                bins[b].append(i)
                room[b] -= lengths[i]
                break
        else:
            bins.append([i])
            room.append(cap - lengths[i])
    return bins


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ffd_equals_textbook_ffd(seed):
    rng = random.Random(seed)
    lengths = [rng.choice([rng.randint(1, 60), rng.randint(200, 1000)]) for _ in range(700)]
    bins = first_fit_decreasing(lengths, 1024)
    assert bins == _naive_ffd(lengths, 1024)
    assert sorted(i for b in bins for i in b) == list(range(700))
    assert all(sum(lengths[i] for i in b) <= 1024 for b in bins)


def test_ffd_known_case_and_errors():
    # 6+4 | 5+5 | 3+3+2+... : FFD fills exactly
    assert first_fit_decreasing([4, 5, 6, 5, 3, 3, 2, 2], 10) == [[2, 0], [1, 3], [4, 5, 6, 7]]
    assert first_fit_decreasing([], 8) == []
    with pytest.raises(
        SequenceTooLongError, match=r"sequence 1 has 9 tokens, more than pack_size 8"
    ):
        first_fit_decreasing([3, 9, 2], 8)



@pytest.fixture(scope="module")
def sft_sequences(tmp_path_factory):
    """Real short Japanese documents as SFT examples: prompt = first line, answer = the rest.
    Each: (token ids, prompt length); the ids end with the EOD."""
    with gzip.open(DATA / "tokenize_ja.jsonl.gz", "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    out = tmp_path_factory.mktemp("tok")
    train_bpe(2000, texts=texts, output=out)
    tok = load_tokenizer(out)
    seqs = []
    for t in texts:
        if "\n" not in t or len(t) > 2000:
            continue
        prompt, answer = t.split("\n", 1)
        p, a = tok.encode_batch([prompt, answer])
        if p and len(p) + len(a) < 512:
            seqs.append((p + a + [tok.eod_id], len(p)))
    assert len(seqs) > 300
    return seqs


def _flat(seqs):
    tokens = np.array([t for ids, _ in seqs for t in ids], dtype=np.int32)
    lengths = np.array([len(ids) for ids, _ in seqs])
    mask = np.array([int(j >= p) for ids, p in seqs for j in range(len(ids))], dtype=np.int8)
    return tokens, lengths, mask


def test_pack_and_write_bridge_parquet(tmp_path, sft_sequences):
    pack_size = 512
    tokens, lengths, mask = _flat(sft_sequences)
    packs, stats = pack(tokens, lengths, pack_size, mask)
    assert stats.num_sequences == len(sft_sequences) and stats.num_packs == len(packs)
    assert stats.packing_efficiency > 0.9  # many short real documents pack tightly
    path = tmp_path / "training_512.idx.parquet"
    assert write_packed_parquet(packs, path, row_group_size=50) == len(packs)

    f = pq.ParquetFile(path)
    schema = f.schema_arrow
    assert schema.field("input_ids").type == pa.list_(pa.int32())
    assert schema.field("loss_mask").type == pa.list_(pa.int8())
    assert schema.field("seq_start_id").type == pa.list_(pa.int32())
    assert f.metadata.num_row_groups == -(-len(packs) // 50)
    table = f.read().to_pylist()

    # Bridge's row invariants (GPTSFTPackedParquetDataset.validate_row), its budget (a sequence
    # of L tokens gives the trainer L - 1), and a round trip: cutting every pack at seq_start_id
    # gives back exactly the input sequences. The loss mask is label-aligned: Bridge's collate
    # takes labels input_ids[b + 1:e] and loss_mask[b:e - 1], and exactly the answer tokens and
    # the EOD must be trained.
    back = Counter()
    for r in table:
        ids, mask, starts = r["input_ids"], r["loss_mask"], r["seq_start_id"]
        assert len(ids) - len(starts) <= pack_size and len(mask) == len(ids)
        assert (
            starts[0] == 0
            and all(a < b for a, b in itertools.pairwise(starts))
            and starts[-1] < len(ids)
        )
        for b, e in itertools.pairwise([*starts, len(ids)]):
            labels, weights = ids[b + 1 : e], mask[b : e - 1]
            trained = [t for t, w in zip(labels, weights, strict=True) if w]
            back[(tuple(ids[b:e]), tuple(trained), mask[e - 1])] += 1
    assert back == Counter((tuple(ids), tuple(ids[p:]), 0) for ids, p in sft_sequences)
    assert stats.num_tokens == sum(len(r["input_ids"]) for r in table)
    assert stats.num_loss_tokens == sum(sum(r["loss_mask"]) for r in table)
    assert stats.bridge_metadata() == {
        "dataset_max_seqlen": max(len(ids) for ids, _ in sft_sequences) - 1,
        "max_samples_per_bin": max(len(r["seq_start_id"]) for r in table),
        "packing_factor": round(len(sft_sequences) / len(table), 2),
        "packing_efficiency": round(100 * stats.packing_efficiency, 2),
        "pack_size": pack_size,
        "min_packed_seqlen": min(len(r["input_ids"]) - len(r["seq_start_id"]) for r in table),
    }


def test_pack_budget_is_what_the_trainer_sees():
    # 5 + 4 tokens give the trainer 4 + 3 = 7 <= 8: one pack of 9 stored tokens
    packs, stats = pack(np.arange(9), np.array([5, 4]), 8)
    assert len(packs) == 1 and packs.pack_offsets.tolist() == [0, 9]
    assert packs.seq_starts.tolist() == [0, 5] and stats.min_pack_length == 7
    assert packs.loss_mask.tolist() == [1, 1, 1, 1, 0, 1, 1, 1, 0]
    assert len(pack(np.arange(9), np.array([9]), 8)[0]) == 1  # L = pack_size + 1 fits
    with pytest.raises(SequenceTooLongError, match=r"sequence 1 has 10 tokens; packs of 8 hold "
                       r"sequences of at most 9"):
        pack(np.arange(12), np.array([2, 10]), 8)


def test_label_aligned_mask():
    # two sequences: prompt of 2 then answer of 3; no prompt, 3 tokens
    mask = np.array([0, 0, 1, 1, 1, 1, 1, 1])
    assert label_aligned(mask, np.array([5, 3])).tolist() == [0, 1, 1, 1, 0, 1, 1, 0]


def test_pack_rejects_inconsistent_input():
    with pytest.raises(ValueError, match="3 tokens, 2 mask entries"):
        pack(np.arange(3), np.array([3]), 8, np.ones(2))
    with pytest.raises(ValueError, match="empty sequence"):
        pack(np.arange(1), np.array([1, 0]), 8)
    packs, stats = pack(np.zeros(0), np.zeros(0, np.int64), 8)
    assert len(packs) == 0 and stats == PackingStats(8)


def test_check_packed_catches_broken_rows():
    good = {"input_ids": [[1, 2, 3]], "loss_mask": [[1, 1, 0]], "seq_start_id": [[0, 2]]}
    check_packed(pa.Table.from_pydict(good, schema=PACKED_SCHEMA))
    for column, value, message in [
        ("loss_mask", [[1, 0]], "invariants"),
        ("seq_start_id", [[1]], "invariants"),
        ("seq_start_id", [[0, 3]], "invariants"),
        ("seq_start_id", [[0, 2, 1]], "invariants"),
        ("seq_start_id", [[]], "invariants"),
        ("loss_mask", [[1, 2, 0]], "other than 0 and 1"),
    ]:
        with pytest.raises(ValueError, match=message):
            check_packed(pa.Table.from_pydict({**good, column: value}, schema=PACKED_SCHEMA))


def test_stats_merge():
    a = pack(np.arange(10), np.array([4, 6]), 8)[1]
    b = pack(np.arange(3), np.array([3]), 8)[1]
    both = pack(np.arange(13), np.array([4, 6, 3]), 8)[1]
    merged = a.merge(b).merge(PackingStats(8))
    assert (merged.num_sequences, merged.num_tokens, merged.num_loss_tokens) == (
        both.num_sequences, both.num_tokens, both.num_loss_tokens)
    assert merged.min_pack_length == 2 and merged.max_sequence_length == 5
    with pytest.raises(ValueError, match="pack sizes differ"):
        a.merge(PackingStats(16))
