"""Blend files: weights, and the exact strings for Megatron-LM, NeMo 2 and megatron-core."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from curator.formats.blend import Blend, BlendError, format_weight
from curator.formats.megatron import ShardedIndexedDatasetWriter


def _shards(directory, name, doc_lengths, budget):
    with ShardedIndexedDatasetWriter(
        directory, name, vocab_size=1000, eod_id=0, max_shard_tokens=budget, fsync=False
    ) as w:
        w.add_batch([[(i % 999) + 1] * n for i, n in enumerate(doc_lengths)])
    return w.shards


def test_weights_per_source_spread_over_shards_by_tokens(tmp_path):
    a = _shards(tmp_path, "a", [99] * 30, 1000)  # 3000 tokens in 3 shards of 1000
    b = _shards(tmp_path, "b", [9] * 50, 250)  # 500 tokens in 2 shards of 250
    assert [s.num_tokens for s in a] == [1000] * 3 and [s.num_tokens for s in b] == [250] * 2
    bl = Blend()
    bl.add("a", a, weight=1)
    bl.add("b", b, weight=3)
    prefixes, weights = bl.weighted_prefixes("train")
    assert weights == pytest.approx([0.25 / 3] * 3 + [0.375] * 2)
    assert prefixes == [s.prefix for s in a + b]  # tmp_path is absolute already
    dp = bl.data_path_list()
    assert dp[0::2] == [format_weight(w) for w in weights] and dp[1::2] == prefixes

    doc = bl.write(str(tmp_path))
    assert doc["megatron_lm"] == "--data-path " + " ".join(shlex.quote(x) for x in dp)
    assert doc["nemo2"] == "paths=" + json.dumps(dp)
    assert doc["splits"]["train"]["megatron_core_blend"] == [prefixes, weights]
    assert doc["splits"]["train"]["sources"]["b"]["share"] == pytest.approx(0.75)
    assert doc["splits"]["train"]["tokens"] == 3500
    assert doc["token_dtype"] == "uint16"
    seqs = json.loads((tmp_path / "per_dataset_sequences.json").read_text())
    assert seqs == {s.prefix: [s.num_documents, s.num_documents + 1] for s in a + b}
    assert doc["megatron_lm_per_dataset_sequences"] == (
        "--per-dataset-sequences-path " + str(tmp_path / "per_dataset_sequences.json")
    )


def test_megatron_parses_our_strings_back(tmp_path):
    pytest.importorskip("torch")
    from megatron.core.datasets.indexed_dataset import IndexedDataset
    from megatron.core.datasets.utils import get_blend_from_list

    bl = Blend()
    bl.add("x", _shards(tmp_path, "x", [7, 0, 11, 5], 100), weight=0.2)
    bl.add("y", _shards(tmp_path / "with space", "y", [3] * 4, 100), weight=0.8)
    doc = bl.write(str(tmp_path))
    prefixes, weights = get_blend_from_list(shlex.split(doc["megatron_lm"])[1:])
    assert (prefixes, weights) == tuple(doc["splits"]["train"]["megatron_core_blend"])
    assert weights == pytest.approx([0.2, 0.8])
    seqs = json.loads(Path(doc["per_dataset_sequences_path"]).read_text())
    for p, (n, d) in seqs.items():
        ds = IndexedDataset(p)
        assert (len(ds), len(ds.document_indices)) == (n, d)
    assert len(IndexedDataset(prefixes[0])) == 3  # the empty document was skipped


def test_default_weights_are_token_counts_and_mixing_is_refused(tmp_path):
    bl = Blend()
    bl.add("a", _shards(tmp_path, "a", [10] * 3, 1000))
    bl.add("b", _shards(tmp_path, "b", [10] * 9, 1000))
    _, w = bl.weighted_prefixes()
    assert w == pytest.approx([0.25, 0.75])
    bl.add("c", _shards(tmp_path, "c", [10], 1000), weight=1.0)
    with pytest.raises(
        BlendError, match=r"give a weight to every source or to none; missing for \['a', 'b'\]"
    ):
        bl.weighted_prefixes()


def test_splits_give_per_split_flags(tmp_path):
    bl = Blend()
    bl.add("a", _shards(tmp_path / "tr", "a", [5] * 4, 100), weight=1)
    bl.add("a", _shards(tmp_path / "va", "a", [5] * 2, 100), weight=1, split="valid")
    bl.add("a", _shards(tmp_path / "te", "a", [5] * 2, 100), weight=1, split="test")
    doc = bl.to_dict()
    args = shlex.split(doc["megatron_lm"])
    assert [x for x in args if x.startswith("--")] == [
        "--train-data-path",
        "--valid-data-path",
        "--test-data-path",
    ]
    nemo = json.loads(doc["nemo2"][len("paths=") :])
    assert sorted(nemo) == ["test", "train", "validation"]
    assert nemo["validation"] == doc["splits"]["valid"]["data_path"]
    with pytest.raises(BlendError, match="split must be one of"):
        bl.add("a", [], split="validation")


def test_format_weight_round_trips():
    for w in (0.1, 1 / 3, 0.7, 1e-9, 1.0):
        assert float(format_weight(w)) == w
        assert "e" not in format_weight(w)
    with pytest.raises(BlendError):
        format_weight(float("nan"))
