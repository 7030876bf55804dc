"""FP8 guard rails: sequence length rule, padded vocabulary, vocabulary warning."""

from __future__ import annotations

import warnings

import pytest

from curator.formats.fp8 import (
    FP8ConfigError,
    FP8VocabWarning,
    check_seq_length,
    padded_vocab_size,
    vocab_report,
)


def test_seq_length_1000_is_refused_with_the_rule():
    with pytest.raises(FP8ConfigError) as e:
        check_seq_length(1000)
    msg = str(e.value)
    assert "seq_length 1000 is not a multiple of 128" in msg
    assert "FP8" in msg and "use 896 or 1024" in msg


@pytest.mark.parametrize("bad", [0, -128, 100, 4095, 4097, 1.5 * 128, True])
def test_other_bad_seq_lengths(bad):
    with pytest.raises(FP8ConfigError):
        check_seq_length(bad)


@pytest.mark.parametrize("good", [128, 2048, 4096, 8192, 131072])
def test_good_seq_lengths(good):
    assert check_seq_length(good) == good


@pytest.mark.parametrize(
    "vocab, tp, padded",
    [
        (128256, 4, 128512),  # Llama-3 at TP4 (megatron_format.md §2.5)
        (128256, 1, 128256),
        (50257, 1, 50304),  # GPT-2: Megatron's well-known padded size
        (50257, 2, 50432),
        (3072, 1, 3072),
        (3072, 8, 3072),
        (3073, 8, 4096),
    ],
)
def test_padded_vocab(vocab, tp, padded):
    assert padded_vocab_size(vocab, tp) == padded
    assert padded % (128 * tp) == 0 and padded >= vocab


def test_warning_only_when_raw_vocab_not_multiple_of_16():
    with pytest.warns(FP8VocabWarning, match="50257 is not a multiple of 16"):
        r = vocab_report(50257, 2)
    assert r["padded_vocab_size"] == 50432 and len(r["warnings"]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = vocab_report(32000, 4)
    assert r == {
        "vocab_size": 32000,
        "tensor_parallel_size": 4,
        "padded_vocab_size": 32256,
        "warnings": [],
    }
