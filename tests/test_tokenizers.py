"""load_tokenizer over the three formats, and the BPE trainer, on real English and Japanese text."""

from __future__ import annotations

import gzip
import io
import json
import multiprocessing as mp
import pickle
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from curator.tokenization.loading import GPT2_PATTERN, Tokenizer, TokenizerSpecError, load_tokenizer
from curator.tokenization.training import export_tiktoken, round_vocab_size, train_bpe

DATA = Path(__file__).resolve().parent / "data"


def _texts(name: str) -> list[str]:
    with gzip.open(DATA / name, "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return _texts("tokenize_en.jsonl.gz") + _texts("tokenize_ja.jsonl.gz")


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory, texts) -> Path:
    out = tmp_path_factory.mktemp("hf")
    train_bpe(2000, texts=texts, output=out)
    return out


def test_train_bpe_rounds_vocab_and_puts_eod_first(hf_dir, tmp_path, texts):
    from tokenizers import Tokenizer as HF

    t = HF.from_file(str(hf_dir / "tokenizer.json"))
    assert t.get_vocab_size(with_added_tokens=True) == 2048 == round_vocab_size(2000)
    assert t.token_to_id("<|endoftext|>") == 0
    # a corpus too small for the requested merges is topped up with reserved specials
    small = train_bpe(1000, texts=texts[:3], output=tmp_path / "small.json", min_frequency=50)
    vocab = small.get_vocab(with_added_tokens=True)
    assert len(vocab) == 1024 and max(vocab.values()) == 1023
    assert any(k.startswith("<|reserved_") for k in vocab)
    # files= reads JSONL.gz the same as texts=
    from_files = train_bpe(
        2000, files=[DATA / "tokenize_en.jsonl.gz", DATA / "tokenize_ja.jsonl.gz"]
    )
    assert from_files.get_vocab() == t.get_vocab()


def test_hf_tokenizer_from_dir_and_file(hf_dir, texts):
    a = load_tokenizer(hf_dir)
    b = load_tokenizer(str(hf_dir / "tokenizer.json"))
    assert (a.kind, a.vocab_size, a.eod_id) == ("hf", 2048, 0)
    assert a == b
    ids = a.encode_batch(texts)
    from tokenizers import Tokenizer as HF

    raw = HF.from_file(str(hf_dir / "tokenizer.json"))
    assert ids == [raw.encode(t, add_special_tokens=False).ids for t in texts]
    # byte-level: lossless, ja included
    assert all(a.decode(i) == t for i, t in zip(ids, texts, strict=True))
    assert a.encode_batch([]) == [] and a.encode_batch([""]) == [[]]
    assert all(0 not in x for x in ids)  # no EOD inside documents: the writer appends it
    # a document that spells the EOD token gets text ids, never the EOD id (all three formats agree)
    spelled = a.encode("see <|endoftext|> here")
    assert 0 not in spelled and a.decode(spelled) == "see <|endoftext|> here"


def _encode_in_worker(t: Tokenizer, batch: list[str]) -> tuple[bool, list[list[int]]]:
    was_loaded = t._obj is not None
    return was_loaded, t.encode_batch(batch)


def test_tokenizer_is_lazy_and_picklable(hf_dir, texts):
    t = load_tokenizer(hf_dir)
    assert t._obj is None  # nothing loaded yet
    expected = t.encode_batch(texts[:50])
    assert t._obj is not None
    blob = pickle.dumps(t)
    assert len(blob) < 2000  # the spec travels, not the model
    with ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as ex:
        was_loaded, got = ex.submit(_encode_in_worker, t, texts[:50]).result()
    assert was_loaded is False and got == expected


def test_tiktoken_file_matches_hf(hf_dir, tmp_path, texts):
    specials = export_tiktoken(hf_dir / "tokenizer.json", tmp_path / "bpe.tiktoken")
    assert specials == {"<|endoftext|>": 0}
    tt = load_tokenizer(
        {"path": tmp_path / "bpe.tiktoken", "pattern": GPT2_PATTERN, "special_tokens": specials}
    )
    hf = load_tokenizer(hf_dir)
    assert tt.kind == "tiktoken"
    assert (tt.vocab_size, tt.eod_id) == (hf.vocab_size, hf.eod_id) == (2048, 0)
    assert tt.encode_batch(texts) == hf.encode_batch(texts)
    assert tt.encode("a <|endoftext|> b") == hf.encode("a <|endoftext|> b")
    assert load_tokenizer(tmp_path).kind == "tiktoken"  # a directory holding one .tiktoken file


def test_sentencepiece_model(tmp_path, texts):
    spm = pytest.importorskip("sentencepiece")
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(line for t in texts for line in t.splitlines() if line.strip()),
        model_writer=buf,
        vocab_size=3000,
        model_type="bpe",
        character_coverage=0.995,
        minloglevel=2,
        num_threads=2,
    )
    (tmp_path / "sp.model").write_bytes(buf.getvalue())
    t = load_tokenizer(tmp_path / "sp.model")
    raw = spm.SentencePieceProcessor(model_file=str(tmp_path / "sp.model"))
    assert t.kind == "sentencepiece" and t.vocab_size == 3000
    assert t.eod_id == raw.eos_id() == raw.piece_to_id("</s>")
    assert t.encode_batch(texts) == [raw.encode(x) for x in texts]
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "tokenizer.model").write_bytes(buf.getvalue())
    assert load_tokenizer(tmp_path / "dir").kind == "sentencepiece"


def test_bad_specs_say_what_was_expected(tmp_path, hf_dir):
    with pytest.raises(TokenizerSpecError, match="does not exist"):
        load_tokenizer(tmp_path / "nope.json")
    (tmp_path / "vocab.txt").write_text("a\n")
    with pytest.raises(TokenizerSpecError, match="cannot tell the tokenizer type"):
        load_tokenizer(tmp_path / "vocab.txt")
    with pytest.raises(TokenizerSpecError, match=r"holds no tokenizer\.json"):
        load_tokenizer(tmp_path)
    with pytest.raises(TokenizerSpecError, match="unknown tokenizer option"):
        load_tokenizer({"path": hf_dir, "eod": "x"})
    t = load_tokenizer({"path": hf_dir, "eod_token": "<|im_end|>"})
    with pytest.raises(TokenizerSpecError, match="not in the vocabulary"):
        _ = t.eod_id
