"""The tiktoken twin of a byte-level BPE: same ids as the `tokenizers` library, or declined."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer as HF

from curator.tokenization.loading import load_tokenizer
from curator.tokenization.tiktoken_twin import byte_symbols, tiktoken_twin
from curator.tokenization.training import train_bpe

DATA = Path(__file__).resolve().parent / "data"
AWKWARD = [
    "see <|endoftext|> here",  # special-token text stays text
    "  leading spaces\n\n\ttabs\r\nand CRLF   ",
    "emoji 👩‍👩‍👧 and combining é (e\u0301), NBSP\u00a0and ZWSP\u200b",
    "全角　スペースと半角 ｶﾀｶﾅ、絵文字🍣、記号【】…",
    "numbers 1234567890 3.14159 1e-9 and don't we'll I'M",
    "",
]


def _texts(name: str) -> list[str]:
    with gzip.open(DATA / name, "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return _texts("tokenize_en.jsonl.gz") + _texts("tokenize_ja.jsonl.gz") + AWKWARD


@pytest.fixture(scope="module")
def tokenizer_json(tmp_path_factory, texts) -> Path:
    out = tmp_path_factory.mktemp("bpe") / "tokenizer.json"
    train_bpe(4000, texts=texts, output=out)
    return out


def _hf_ids(path: Path, texts: list[str]) -> list[list[int]]:
    hf = HF.from_file(str(path))
    hf.encode_special_tokens = True
    return [hf.encode(t, add_special_tokens=False).ids for t in texts]


def test_twin_encodes_real_english_and_japanese_exactly(tokenizer_json, texts):
    tok = load_tokenizer(tokenizer_json)
    tok._load()
    assert tok.encoder_note == "tiktoken twin of tokenizer.json"
    assert tok.encode_batch(texts, max_chars=5000) == _hf_ids(tokenizer_json, texts)
    flat, lengths = tok.encode_batch_flat(texts)
    assert flat.dtype == np.int32 and lengths.sum() == len(flat)


def _edited(path: Path, tmp_path: Path, edit) -> Path:
    spec = json.loads(path.read_text(encoding="utf-8"))
    edit(spec)
    out = tmp_path / "edited.json"
    out.write_text(json.dumps(spec), encoding="utf-8")
    return out


def _swap_two_merges(spec: dict) -> None:
    merges = spec["model"]["merges"]
    merges[10], merges[11] = merges[11], merges[10]


@pytest.mark.parametrize(("edit", "reason"), [
    (lambda s: s.update(normalizer={"type": "NFKC"}), "normalizer"),
    (lambda s: s.update(pre_tokenizer={"type": "Metaspace", "replacement": "▁",
                                       "prepend_scheme": "always", "split": True}),
     "not ByteLevel"),
    (lambda s: s["added_tokens"].append({
        "id": 0, "content": "hello", "single_word": False, "lstrip": False, "rstrip": False,
        "normalized": True, "special": False}), "non-special added token"),
    (_swap_two_merges, "out of id order"),
])
def test_twin_declined_when_it_could_differ(tokenizer_json, tmp_path, texts, edit, reason):
    path = _edited(tokenizer_json, tmp_path, edit)
    twin, why = tiktoken_twin(str(path), HF.from_file(str(path)))
    assert twin is None and reason in why
    tok = load_tokenizer(path)
    assert tok.encode_batch(texts[:20]) == _hf_ids(path, texts[:20])  # the library's ids


def test_unreachable_token_declines_the_twin(tmp_path):
    """Merges b+c, a+b, ab+c: the library turns "abc" into [a, bc] and never makes "abc",
    while a rank-based encoder would return the whole token."""
    vocab = {ch: i for i, ch in enumerate(sorted(byte_symbols()))}
    n = len(vocab)
    vocab.update({"bc": n, "ab": n + 1, "abc": n + 2})
    spec = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
            "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
                              "trim_offsets": True, "use_regex": True},
            "post_processor": None, "decoder": None,
            "model": {"type": "BPE", "dropout": None, "unk_token": None,
                      "continuing_subword_prefix": None, "end_of_word_suffix": None,
                      "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": vocab, "merges": [["b", "c"], ["a", "b"], ["ab", "c"]]}}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    twin, why = tiktoken_twin(str(path), HF.from_file(str(path)))
    assert twin is None and "'abc'" in why
    assert load_tokenizer(path).encode("abc") == [vocab["a"], vocab["bc"]]


def test_a_twin_that_differs_on_real_text_is_retired(tokenizer_json, tmp_path, texts, caplog):
    """The first slice is checked against the library: a twin of a different vocabulary (a
    real encoder that gives other ids) is caught there and never used again."""
    other = tmp_path / "other.json"
    train_bpe(3000, texts=texts[::2], output=other)
    tok = load_tokenizer(tokenizer_json)
    tok._load()
    tok._twin, _ = tiktoken_twin(str(other), HF.from_file(str(other)))
    assert tok._twin is not None
    expected = _hf_ids(tokenizer_json, texts)
    with caplog.at_level(logging.WARNING, logger="curator.tokenization.loading"):
        assert tok.encode_batch(texts[:50]) == expected[:50]
    assert tok._twin is None and "differed" in tok.encoder_note
    assert "differently" in caplog.text
    assert tok.encode_batch(texts) == expected


def test_native_encoder_can_be_chosen(tokenizer_json, texts):
    tok = load_tokenizer({"path": tokenizer_json, "encoder": "native"})
    assert tok.encode_batch(texts[:30]) == _hf_ids(tokenizer_json, texts[:30])
    assert tok._twin is None and "native" in tok.encoder_note
