"""What a classifier model path holds, read from its files alone (no torch, nothing loaded): a
fastText model, a Hugging Face sequence-classification directory, or a NeMo Curator checkpoint
(a backbone with a linear head saved through ``PyTorchModelHubMixin``); its head (classifier
or regression) and labels; and the one-line errors a configuration gets."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

WEIGHTS = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
           "pytorch_model.bin.index.json")
TOKENIZER = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "spiece.model", "spm.model")


@dataclass(frozen=True)
class ModelInfo:
    """A model's format, whether its head is a regression (one raw output) or a classifier
    (softmax over labels), and its labels (index -> name; None where the config names none)."""

    format: Literal["fasttext", "hf", "nemo"]
    regression: bool
    id2label: dict[int, str] | None


def is_dir(path: str | Path) -> bool:
    return Path(path).expanduser().is_dir()


def read_config(path: str | Path) -> dict[str, Any]:
    """``config.json`` of a model directory; a one-line ValueError when it is missing or bad."""
    path = Path(path).expanduser()
    config = path / "config.json"
    if not config.is_file():
        raise ValueError(f"{str(path)!r} is a directory without config.json: not a Hugging Face "
                         "model directory")
    try:
        body = json.loads(config.read_text(encoding="utf-8"))
    except ValueError as err:
        raise ValueError(f"{config}: not a JSON model config ({err})") from None
    if not isinstance(body, dict):
        raise ValueError(f"{config}: not a JSON model config (not an object)")
    return body


def is_nemo(config: dict[str, Any]) -> bool:
    """NeMo Curator's checkpoints keep the mixin's own config: the backbone's name in
    ``base_model``, no ``model_type``."""
    return "base_model" in config and "model_type" not in config


def check_dir(path: str | Path) -> Path:
    """The directory, if it holds a config, weights and a tokenizer; else a one-line
    ValueError."""
    path = Path(path).expanduser()
    read_config(path)
    if not any((path / name).is_file() for name in WEIGHTS):
        raise ValueError(f"{str(path)!r} has no model weights (one of {', '.join(WEIGHTS)})")
    if not any((path / name).is_file() for name in TOKENIZER):
        raise ValueError(f"{str(path)!r} has no tokenizer (one of {', '.join(TOKENIZER)})")
    return path


def _labels(config: dict[str, Any]) -> dict[int, str] | None:
    labels = config.get("id2label")
    if not isinstance(labels, dict) or not all(str(i).isdigit() for i in labels):
        return None  # transformers' own defaults, or its own error when it loads
    return {int(i): str(name) for i, name in labels.items()}


def inspect_dir(path: str | Path) -> ModelInfo:
    """Format, head and labels of a model directory, from its config.json."""
    config = read_config(path)
    labels = _labels(config)
    if is_nemo(config):
        if not labels:
            raise ValueError(f"{Path(path) / 'config.json'}: a NeMo Curator checkpoint without "
                             "id2label")
        return ModelInfo("nemo", False, labels)
    n = config.get("num_labels") or (len(labels) if labels else 2)
    return ModelInfo("hf", config.get("problem_type") == "regression" or n == 1, labels)


def label_index(label: str | int | None, id2label: dict[int, str], path: Path) -> int | None:
    """The index of ``label`` (an index or an ``id2label`` name); unset: 1 of 2 labels, else
    None (the score is then the predicted label's probability)."""
    n = len(id2label)
    if label is None:
        return 1 if n == 2 else None
    if isinstance(label, int) or str(label).isdigit():
        index = int(label)
        if not 0 <= index < n:
            raise ValueError(f"{path}: label index {index} outside 0..{n - 1}")
        return index
    names = {name: int(i) for i, name in id2label.items()}
    if label not in names:
        raise ValueError(f"{path}: label {label!r} is not one of {sorted(names)}")
    return names[label]
