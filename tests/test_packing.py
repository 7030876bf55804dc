"""First-fit-decreasing packing and the Megatron-Bridge packed Parquet it writes."""

from __future__ import annotations

import gzip
import itertools
import json
import random
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from curator.packing import (
    SequenceTooLongError,
    first_fit_decreasing,
    pack_sequences,
    write_packed_parquet,
)
from curator.tokenizer_train import train_bpe
from curator.tokenizers import load_tokenizer

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
    """Real short Japanese documents as SFT examples: prompt = first line, answer = the rest."""
    with gzip.open(DATA / "tokenize_ja.jsonl.gz", "rt", encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    out = tmp_path_factory.mktemp("tok")
    train_bpe(2000, texts=texts, output=out)
    tok = load_tokenizer(out)
    seqs, masks = [], []
    for t in texts:
        if "\n" not in t or len(t) > 2000:
            continue
        prompt, answer = t.split("\n", 1)
        p, a = tok.encode_batch([prompt, answer])
        ids = p + a + [tok.eod_id]
        if len(ids) > 512:
            continue
        seqs.append(ids)
        masks.append([0] * len(p) + [1] * (len(a) + 1))
    assert len(seqs) > 300
    return seqs, masks


def test_pack_and_write_bridge_parquet(tmp_path, sft_sequences):
    seqs, masks = sft_sequences
    rows, stats = pack_sequences(seqs, 512, loss_masks=masks)
    assert stats.num_sequences == len(seqs) and stats.num_packs == len(rows)
    assert stats.packing_efficiency > 0.9  # many short real documents pack tightly
    path = tmp_path / "packed" / "training_512.idx.parquet"
    assert write_packed_parquet(rows, path, row_group_size=50) == len(rows)
    assert not list(path.parent.glob("*.tmp"))

    f = pq.ParquetFile(path)
    schema = f.schema_arrow
    assert schema.field("input_ids").type == pa.list_(pa.int32())
    assert schema.field("loss_mask").type == pa.list_(pa.int8())
    assert schema.field("seq_start_id").type == pa.list_(pa.int32())
    assert f.metadata.num_row_groups == -(-len(rows) // 50)
    table = f.read().to_pylist()

    # Bridge's row invariants (GPTSFTPackedParquetDataset.validate_row) and a round trip:
    # cutting every pack at seq_start_id gives back exactly the input sequences and masks.
    back = Counter()
    for r in table:
        ids, mask, starts = r["input_ids"], r["loss_mask"], r["seq_start_id"]
        assert len(ids) <= 512 and len(mask) == len(ids)
        assert (
            starts[0] == 0
            and all(a < b for a, b in itertools.pairwise(starts))
            and starts[-1] < len(ids)
        )
        bounds = [*starts, len(ids)]
        for a, b in itertools.pairwise(bounds):
            back[(tuple(ids[a:b]), tuple(mask[a:b]))] += 1
    assert back == Counter((tuple(s), tuple(m)) for s, m in zip(seqs, masks, strict=True))


def test_pack_rejects_inconsistent_input():
    with pytest.raises(ValueError, match="loss_mask has 2 entries, input_ids 3"):
        pack_sequences([[1, 2, 3]], 8, loss_masks=[[1, 1]])
    with pytest.raises(ValueError, match="empty sequence"):
        pack_sequences([[1], []], 8)
    with pytest.raises(SequenceTooLongError):
        pack_sequences([[1] * 9], 8)
