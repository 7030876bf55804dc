"""Our Megatron indexed-dataset writer, checked with megatron-core itself.

Real parts only: a byte-level BPE trained here on real English and Japanese text
(tests/data/tokenize_{en,ja}.jsonl.gz), megatron-core 0.16's IndexedDataset / IndexedDatasetBuilder
/ GPTDataset / BlendedMegatronDatasetBuilder (its prebuilt C++ helpers run on the CPU).
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
indexed_dataset = pytest.importorskip("megatron.core.datasets.indexed_dataset")

from curator.formats.blend import Blend  # noqa: E402
from curator.formats.megatron import (  # noqa: E402
    IndexedDatasetWriter,
    ShardedIndexedDatasetWriter,
    TokenOutOfVocabError,
    is_complete,
    optimal_dtype,
    read_index,
)
from curator.tokenization.loading import load_tokenizer  # noqa: E402
from curator.tokenization.training import train_bpe  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data"
REPO = Path(__file__).resolve().parents[2]


def _read_docs(name: str) -> list[dict]:
    with gzip.open(DATA / name, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.fixture(scope="module")
def docs() -> dict[str, list[str]]:
    return {
        "en": [d["text"] for d in _read_docs("tokenize_en.jsonl.gz")],
        "ja": [d["text"] for d in _read_docs("tokenize_ja.jsonl.gz")],
    }


@pytest.fixture(scope="module")
def tok(tmp_path_factory, docs):
    out = tmp_path_factory.mktemp("tok")
    train_bpe(3000, texts=docs["en"] + docs["ja"], output=out)
    t = load_tokenizer(out)
    assert t.vocab_size == 3072 and t.eod_id == 0
    return t


def _write_sharded(directory, name, tok, texts, *, batch=64, **budget):
    with ShardedIndexedDatasetWriter(
        directory, name, vocab_size=tok.vocab_size, eod_id=tok.eod_id, **budget
    ) as w:
        for i in range(0, len(texts), batch):
            w.add_batch(tok.encode_batch(texts[i : i + batch]))
    return w.shards


def test_dtype_rule_matches_megatron():
    for v in (1, 3072, 32000, 65499, 65500, 65536, 128256):
        assert optimal_dtype(v) == np.dtype(indexed_dataset.DType.optimal_dtype(v)), v
    assert optimal_dtype(65499) == np.uint16 and optimal_dtype(65500) == np.int32


def test_megatron_reads_every_shard_exactly(tmp_path, tok, docs):
    texts = docs["en"] + docs["ja"]
    shards = _write_sharded(tmp_path, "mix", tok, texts, max_shard_tokens=60_000)
    assert len(shards) >= 4, shards  # the budget really cut the stream
    expected = [[*ids, tok.eod_id] for ids in tok.encode_batch(texts)]
    got: list[list[int]] = []
    for sh in shards:
        assert is_complete(sh.prefix)
        assert sh.num_tokens <= 60_000
        ds = indexed_dataset.IndexedDataset(sh.prefix)
        assert ds.index.dtype == np.uint16
        assert len(ds) == sh.num_documents
        assert list(ds.document_indices) == list(range(sh.num_documents + 1))
        got += [ds[i].tolist() for i in range(len(ds))]
        # the NumPy-only reader agrees with megatron-core's
        idx = read_index(sh.prefix)
        assert np.array_equal(idx["sequence_lengths"], ds.sequence_lengths)
        assert np.array_equal(idx["sequence_pointers"], ds.index.sequence_pointers)
        assert idx["trailing_bytes"] == 0
        assert os.path.getsize(sh.prefix + ".bin") == sh.num_tokens * 2
    assert got == expected  # same ids, same order, EOD at the end of every document
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("vocab_size", [None, 70_000])  # uint16 and int32 files
def test_byte_identical_to_megatron_builder(tmp_path, tok, docs, vocab_size):
    texts = docs["ja"][:300] + docs["en"][:40]
    ids = [[*x, tok.eod_id] for x in tok.encode_batch(texts)]
    v = vocab_size or tok.vocab_size
    dtype = optimal_dtype(v)
    ours = tmp_path / "ours_text_document"
    with IndexedDatasetWriter(str(ours), vocab_size=v, eod_id=tok.eod_id) as w:
        for i in range(0, len(texts), 37):
            w.add_batch(tok.encode_batch(texts[i : i + 37]))
    theirs = tmp_path / "theirs_text_document"
    builder = indexed_dataset.IndexedDatasetBuilder(str(theirs) + ".bin", dtype=dtype.type)
    for doc in ids:  # what Megatron-LM's preprocess_data.py does per document
        builder.add_document(torch.tensor(doc), [len(doc)])
    builder.finalize(str(theirs) + ".idx")
    for ext in (".bin", ".idx"):
        a = (tmp_path / ("ours_text_document" + ext)).read_bytes()
        b = (tmp_path / ("theirs_text_document" + ext)).read_bytes()
        assert a == b, ext
    assert (tmp_path / "ours_text_document.idx").read_bytes()[17] == (
        8 if vocab_size is None else 4
    )


def test_shards_do_not_depend_on_batch_size(tmp_path, tok, docs):
    texts = docs["en"][:60] + docs["ja"][:200]
    runs = []
    for batch in (1, 13, 1000):
        d = tmp_path / f"b{batch}"
        shards = _write_sharded(d, "x", tok, texts, batch=batch, max_shard_bytes=40_000)
        runs.append(
            [
                (
                    Path(s.prefix).name,
                    (d / (Path(s.prefix).name + ".bin")).read_bytes(),
                    (d / (Path(s.prefix).name + ".idx")).read_bytes(),
                )
                for s in shards
            ]
        )
        for s in shards:
            assert s.num_bytes <= 40_000 or s.num_documents == 1
    assert len(runs[0]) >= 3
    assert runs[0] == runs[1] == runs[2]


def test_token_outside_vocab_raises_and_leaves_nothing(tmp_path, tok):
    prefix = tmp_path / "bad_text_document"
    with (
        pytest.raises(TokenOutOfVocabError, match=r"token id 3072 in document 1.*\[0, 3072\)"),
        IndexedDatasetWriter(str(prefix), vocab_size=tok.vocab_size, eod_id=tok.eod_id) as w,
    ):
        w.add_batch([[5, 6, 7]])
        w.add_batch([[1, 2], [3, tok.vocab_size]])
    with pytest.raises(TokenOutOfVocabError):
        IndexedDatasetWriter(str(prefix), vocab_size=tok.vocab_size).add_batch([[-1]])
    assert not [
        p
        for p in tmp_path.iterdir()
        if p.name.startswith("bad_text_document.") and not p.name.endswith(".tmp")
    ]
    assert not is_complete(str(prefix))


def test_empty_document_is_counted_and_skipped(tmp_path, tok, docs):
    texts = [docs["en"][0], "", docs["ja"][0], "", docs["ja"][1]]
    enc = tok.encode_batch(texts)
    assert [len(e) == 0 for e in enc] == [False, True, False, True, False]
    prefix = str(tmp_path / "e_text_document")
    with IndexedDatasetWriter(prefix, vocab_size=tok.vocab_size, eod_id=tok.eod_id) as w:
        assert w.add_batch(enc) == 3
    assert w.empty_skipped == 2 and w.num_documents == 3
    ds = indexed_dataset.IndexedDataset(prefix)
    assert [ds[i].tolist() for i in range(len(ds))] == [[*e, tok.eod_id] for e in enc if e]
    # configured to keep them: a lone EOD marks the empty document
    prefix2 = str(tmp_path / "k_text_document")
    with IndexedDatasetWriter(
        prefix2, vocab_size=tok.vocab_size, eod_id=tok.eod_id, keep_empty=True
    ) as w2:
        w2.add_batch(enc)
    ds2 = indexed_dataset.IndexedDataset(prefix2)
    assert len(ds2) == 5 and ds2[1].tolist() == [tok.eod_id]


_KILL_SCRIPT = textwrap.dedent(
    """
    import gzip, json, sys, time
    from curator.formats.megatron import ShardedIndexedDatasetWriter
    from curator.tokenization.loading import load_tokenizer
    out, tokdir, slow = sys.argv[1], sys.argv[2], sys.argv[3] == "slow"
    tok = load_tokenizer(tokdir)
    texts = [json.loads(l)["text"] for name in ("tokenize_en", "tokenize_ja")
             for l in gzip.open(f"{sys.argv[4]}/{name}.jsonl.gz", "rt", encoding="utf-8")]
    with ShardedIndexedDatasetWriter(out, "k", vocab_size=tok.vocab_size, eod_id=tok.eod_id,
                                     max_shard_tokens=50_000) as w:
        for i in range(0, len(texts), 16):
            w.add_batch(tok.encode_batch(texts[i:i + 16]))
            if slow and len(w.shards) >= 2:
                print("two-shards-done", flush=True)
                time.sleep(60)
    print("done", flush=True)
    """
)


def test_killed_mid_write_then_rerun_is_byte_identical(tmp_path, tok):
    script = tmp_path / "w.py"
    script.write_text(_KILL_SCRIPT)
    tokdir = str(Path(tok.path).parent)
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    subprocess.run(
        [sys.executable, str(script), str(clean), tokdir, "fast", str(DATA)], env=env, check=True
    )
    p = subprocess.Popen(
        [sys.executable, str(script), str(killed), tokdir, "slow", str(DATA)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout.readline().strip() == "two-shards-done"
    p.send_signal(signal.SIGKILL)
    p.wait()
    # the kill left a half-written shard (temporary names only) and no index for it
    assert list(killed.glob("*.bin.tmp")), sorted(x.name for x in killed.iterdir())
    half = sorted(killed.glob("*.bin.tmp"))[0].name[: -len(".bin.tmp")]
    assert not (killed / (half + ".idx")).exists()
    subprocess.run(
        [sys.executable, str(script), str(killed), tokdir, "fast", str(DATA)], env=env, check=True
    )
    names = sorted(x.name for x in clean.iterdir())
    assert len(names) >= 6 and all(n.endswith((".bin", ".idx")) for n in names)
    assert sorted(x.name for x in killed.iterdir()) == names
    for n in names:
        assert (clean / n).read_bytes() == (killed / n).read_bytes(), n


class _MegatronTok:
    """The tokenizer facts GPTDataset needs (vocab size, EOD), over our tokenizer."""

    def __init__(self, tok):
        from megatron.core.tokenizers import MegatronTokenizerBase

        class _T(MegatronTokenizerBase):
            def __init__(self, t):
                super().__init__(t.path, {})
                self._t = t
                self.unique_identifiers = {"path": t.path, "kind": t.kind}

            def tokenize(self, text):
                return self._t.encode(text)

            def detokenize(self, ids):
                return self._t.decode(ids)

            def vocab(self):
                raise NotImplementedError

            @property
            def vocab_size(self):
                return self._t.vocab_size

            @property
            def eod(self):
                return self._t.eod_id

            def apply_chat_template(self):
                raise NotImplementedError

        self.tok = _T(tok)


def test_gpt_dataset_builds_samples_from_our_blend(tmp_path, tok, docs):
    from megatron.core.datasets.blended_dataset import BlendedDataset
    from megatron.core.datasets.blended_megatron_dataset_builder import (
        BlendedMegatronDatasetBuilder,
    )
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.utils import get_blend_from_list

    tokens_dir = tmp_path / "tokens"
    blend = Blend()
    en = _write_sharded(tokens_dir, "en", tok, docs["en"], max_shard_tokens=80_000)
    ja = _write_sharded(tokens_dir, "ja", tok, docs["ja"], max_shard_tokens=80_000)
    assert len(en) >= 2 and len(ja) >= 2
    blend.add("en", en, weight=3)
    blend.add("ja", ja, weight=7)
    doc = blend.write(str(tokens_dir))

    on_disk = json.loads((tokens_dir / "blend.json").read_text())
    assert on_disk == json.loads(json.dumps(doc))
    data_path = on_disk["splits"]["train"]["data_path"]
    assert on_disk["megatron_lm"].split()[1:] == data_path  # paths have no spaces here
    assert json.loads(on_disk["nemo2"][len("paths=") :]) == data_path
    shares = {k: v["share"] for k, v in on_disk["splits"]["train"]["sources"].items()}
    assert shares == pytest.approx({"en": 0.3, "ja": 0.7})
    seqs = json.loads(Path(on_disk["per_dataset_sequences_path"]).read_text())

    seq_length = 128
    n_samples = 400
    config = GPTDatasetConfig(
        random_seed=1234,
        sequence_length=seq_length,
        blend=get_blend_from_list(data_path),  # the exact --data-path list, parsed by megatron-core
        split="100,0,0",
        # no shared cache dir: BlendedDataset's cache path calls torch.distributed.get_rank(), which
        # needs a process group; GPTDataset then caches its indices beside each prefix
        path_to_cache=None,
        tokenizer=_MegatronTok(tok).tok,
        reset_position_ids=False,
        reset_attention_mask=False,
        eod_mask_loss=False,
        create_attention_mask=False,
        sequences_per_dataset={
            k: tuple(v) for k, v in seqs.items()
        },  # --per-dataset-sequences-path
    )
    train, valid, test = BlendedMegatronDatasetBuilder(
        GPTDataset, [n_samples, 0, 0], lambda: True, config
    ).build()
    assert isinstance(train, BlendedDataset) and valid is None and test is None
    assert n_samples <= len(train) <= n_samples * 1.01  # megatron-core adds a small surplus

    # every document between two EODs in a sample is one of our documents, re-encoded
    whole_docs = {tuple(ids) for ids in tok.encode_batch(docs["en"] + docs["ja"])}
    from_source = {"en": 0, "ja": 0}
    interior = 0
    en_prefixes = {os.path.abspath(s.prefix) for s in en}
    for i in range(n_samples):
        ds_id, sample_id = train.dataset_index[i], train.dataset_sample_index[i]
        gpt = train.datasets[ds_id]
        text, _ = gpt._query_document_sample_shuffle_indices(sample_id)
        assert text.shape == (seq_length + 1,)
        item = train[i]
        assert torch.equal(item["tokens"], torch.from_numpy(text[:-1]).long())
        assert torch.equal(item["labels"], torch.from_numpy(text[1:]).long())
        assert int(text.max()) < tok.vocab_size
        cuts = np.flatnonzero(text == tok.eod_id)
        for a, b in itertools.pairwise(cuts):
            if b - a > 1:
                assert tuple(text[a + 1 : b].tolist()) in whole_docs
                interior += 1
        from_source["en" if gpt.dataset_path in en_prefixes else "ja"] += 1
    assert interior > 20  # the check above really ran on whole documents
    assert abs(from_source["en"] / n_samples - 0.3) < 0.02, from_source
