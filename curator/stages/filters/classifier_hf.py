"""A local Hugging Face sequence-classification directory loaded for inference, as its authors'
code loads it (``AutoModelForSequenceClassification``, ``AutoTokenizer``), in fp32 whatever
dtype it was saved in; and where torch runs. Nothing is downloaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from curator.stages.filters.classifier_attention import fuse_disentangled_attention
from curator.stages.filters.classifier_models import check_dir
from curator.stages.filters.classifier_torch import Encoder

#: ``model_max_length`` of a tokenizer that sets none (transformers' VERY_LARGE_INTEGER).
_UNSET = 10**5


def torch_device(device: str) -> str:
    """``cpu``, ``gpu`` or ``auto`` -> a torch device name."""
    import torch

    if device == "cpu":
        return "cpu"
    if torch.cuda.is_available():
        return "cuda"
    if device == "gpu":
        raise RuntimeError("classifier_filter: device 'gpu' but torch sees no CUDA device")
    return "cpu"


def gpu_usable() -> bool:
    import torch

    return torch.cuda.is_available()


def position_limit(config: Any) -> int | None:
    """The most positions the backbone has embeddings for; None for relative positions only
    (DeBERTa-v2/v3: ``position_biased_input`` false)."""
    if getattr(config, "position_biased_input", True) is False:
        return None
    return getattr(config, "max_position_embeddings", None)


def window(max_length: int, *limits: int | None) -> int:
    """``max_length``, never more than a limit that is set."""
    return min([max_length, *(n for n in limits if isinstance(n, int) and 0 < n < _UNSET)])


def load_tokenizer(path: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


def load_error(path: Path, err: Exception) -> ValueError:
    return ValueError(f"{path}: cannot load the model: {err}".splitlines()[0])


def load_hf(path: str | Path, max_length: int) -> Encoder:
    """The directory's tokenizer and model; its window never beyond the model's positions or
    the tokenizer's ``model_max_length``."""
    import torch
    from transformers import AutoModelForSequenceClassification
    from transformers.utils import logging

    logging.disable_progress_bar()
    path = check_dir(path)
    try:
        tokenizer = load_tokenizer(path)
        model = AutoModelForSequenceClassification.from_pretrained(
            str(path), local_files_only=True, dtype=torch.float32)
    except (OSError, ValueError, KeyError) as err:
        raise load_error(path, err) from None

    fuse_disentangled_attention(model, tokenizer.padding_side == "right")
    sdpa = getattr(model.config, "_attn_implementation", None) == "sdpa"

    def forward(ids: Any, mask: Any) -> Any:
        if sdpa and mask is not None:
            # the mask as transformers builds it for SDPA (padding keys masked, for every
            # query); from a 2D mask it first asks the GPU whether any token is padding, a
            # wait per batch that keeps the host from running batches ahead
            mask = mask.bool()[:, None, None, :]
        return model(input_ids=ids, attention_mask=mask).logits

    limit = window(max_length, position_limit(model.config), tokenizer.model_max_length)
    return Encoder(tokenizer, model, forward, limit, dict(model.config.id2label))
