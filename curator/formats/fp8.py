"""Guard rails for data that a Transformer Engine FP8 trainer will read.

Rules (../shared/reference/megatron_format.md §2.5):

* ``seq_length`` must be a multiple of 128. TE's FP8 GEMMs need the token dimension per TP/CP
  rank to be a multiple of 16 (8 for the forward pass); a sequence length that is a multiple of 128
  keeps that true for any power-of-two TP·CP up to 256, with or without sequence parallelism.
* The trainer pads the embedding table to ``ceil(V / (128·TP)) · 128 · TP`` rows
  (``--make-vocab-size-divisible-by 128``); we report that size so nobody is surprised.
* A raw vocabulary that is not a multiple of 16 is legal (the trainer pads it) but worth a warning:
  anything that uses the raw size as a GEMM dimension (an unpadded output layer) breaks FP8.
"""

from __future__ import annotations

import warnings

__all__ = [
    "SEQ_LENGTH_MULTIPLE",
    "FP8ConfigError",
    "FP8VocabWarning",
    "check_seq_length",
    "padded_vocab_size",
    "vocab_report",
]

SEQ_LENGTH_MULTIPLE = 128
VOCAB_DIVISIBLE_BY = 128
FP8_DIM_MULTIPLE = 16


class FP8ConfigError(ValueError):
    """A setting breaks a rule of FP8 training."""


class FP8VocabWarning(UserWarning):
    """The raw vocabulary size is not FP8-friendly (the trainer's padding will hide it)."""


def check_seq_length(seq_length: int, multiple: int = SEQ_LENGTH_MULTIPLE) -> int:
    """Return ``seq_length`` if it is a positive multiple of ``multiple`` (128), else raise."""
    if isinstance(seq_length, bool) or not isinstance(seq_length, int):
        raise FP8ConfigError(f"seq_length must be an integer, got {seq_length!r}")
    if seq_length <= 0 or seq_length % multiple:
        lower = (seq_length // multiple) * multiple
        upper = lower + multiple
        hint = f"{upper}" if lower <= 0 else f"{lower} or {upper}"
        raise FP8ConfigError(
            f"seq_length {seq_length} is not a multiple of {multiple}: FP8 training (Transformer "
            f"Engine) needs the tokens per micro-batch per tensor/context-parallel rank to be a "
            f"multiple of 16, which a seq_length that is a multiple of {multiple} guarantees; "
            f"use {hint}"
        )
    return seq_length


def padded_vocab_size(
    vocab_size: int, tensor_parallel_size: int = 1, divisible_by: int = VOCAB_DIVISIBLE_BY
) -> int:
    """The embedding rows Megatron will allocate: ``vocab_size`` rounded up to a multiple of
    ``divisible_by * tensor_parallel_size`` (``vocab_size_with_padding``)."""
    if vocab_size <= 0:
        raise ValueError(f"vocab_size must be positive, got {vocab_size}")
    if tensor_parallel_size <= 0:
        raise ValueError(f"tensor_parallel_size must be positive, got {tensor_parallel_size}")
    m = divisible_by * tensor_parallel_size
    return -(-vocab_size // m) * m


def vocab_report(vocab_size: int, tensor_parallel_size: int = 1, *, warn: bool = True) -> dict:
    """What stats.json records about the vocabulary; warns when the raw size is not a multiple
    of 16."""
    padded = padded_vocab_size(vocab_size, tensor_parallel_size)
    report = {
        "vocab_size": vocab_size,
        "tensor_parallel_size": tensor_parallel_size,
        "padded_vocab_size": padded,
        "warnings": [],
    }
    if vocab_size % FP8_DIM_MULTIPLE:
        msg = (
            f"vocabulary size {vocab_size} is not a multiple of {FP8_DIM_MULTIPLE}; FP8 GEMMs need "
            f"multiples of 16, so the trainer must pad it (Megatron pads to {padded} with "
            f"tensor_parallel_size={tensor_parallel_size}); never use the raw size as a layer width"
        )
        report["warnings"].append(msg)
        if warn:
            warnings.warn(msg, FP8VocabWarning, stacklevel=2)
    return report
