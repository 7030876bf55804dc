"""A local Hugging Face sequence-classification model directory: batched torch inference on
CPU or GPU, the softmax probability of one label per document. Nothing is downloaded."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

_WEIGHTS = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
            "pytorch_model.bin.index.json")
_TOKENIZER = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "spiece.model")


def is_hf_dir(path: str | Path) -> bool:
    return Path(path).expanduser().is_dir()


def check_hf_dir(path: str | Path) -> Path:
    """The directory, if it holds a config, weights and a tokenizer; else a one-line ValueError."""
    path = Path(path).expanduser()
    config = path / "config.json"
    if not config.is_file():
        raise ValueError(f"{str(path)!r} is a directory without config.json: not a Hugging Face "
                         "model directory")
    try:
        json.loads(config.read_text(encoding="utf-8"))
    except ValueError as err:
        raise ValueError(f"{config}: not a JSON model config ({err})") from None
    if not any((path / name).is_file() for name in _WEIGHTS):
        raise ValueError(f"{str(path)!r} has no model weights (one of {', '.join(_WEIGHTS)})")
    if not any((path / name).is_file() for name in _TOKENIZER):
        raise ValueError(f"{str(path)!r} has no tokenizer (one of {', '.join(_TOKENIZER)})")
    return path


def label_index(label: str | int | None, id2label: dict[int, str], path: Path) -> int:
    """The index of ``label`` (an index or an ``id2label`` name; None: 1 of 2 labels)."""
    n = len(id2label)
    if label is None:
        if n != 2:
            raise ValueError(f"{path}: {n} labels; set label: (an index or a name)")
        return 1
    if isinstance(label, int) or str(label).isdigit():
        index = int(label)
        if not 0 <= index < n:
            raise ValueError(f"{path}: label index {index} outside 0..{n - 1}")
        return index
    names = {name: int(i) for i, name in id2label.items()}
    if label not in names:
        raise ValueError(f"{path}: label {label!r} is not one of {sorted(names)}")
    return names[label]


def configured_labels(path: str | Path) -> dict[int, str] | None:
    """``id2label`` of a model directory's config.json; None where it sets none."""
    config = json.loads((Path(path).expanduser() / "config.json").read_text(encoding="utf-8"))
    labels = config.get("id2label") if isinstance(config, dict) else None
    if not isinstance(labels, dict) or not all(str(i).isdigit() for i in labels):
        return None  # transformers' own defaults, or its own error when it loads
    return {int(i): str(name) for i, name in labels.items()}


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


class HFScorer:
    """Softmax probability of ``label`` (index, or a name from ``config.id2label``)."""

    def __init__(self, path: str | Path, label: str | int | None, device: str, batch_size: int,
                 max_length: int):
        from transformers import AutoModelForSequenceClassification, AutoTokenizer
        from transformers.utils import logging

        logging.disable_progress_bar()
        path = check_hf_dir(path)
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
            model = AutoModelForSequenceClassification.from_pretrained(str(path),
                                                                       local_files_only=True)
        except (OSError, ValueError, KeyError) as err:
            raise ValueError(f"{path}: cannot load the model: {err}".splitlines()[0]) from None
        self.device = torch_device(device)
        self.model = model.to(self.device).eval()
        self.index = label_index(label, model.config.id2label, path)
        self.batch_size = batch_size
        # never more tokens than the model has positions for
        limits = [max_length, getattr(model.config, "max_position_embeddings", None),
                  getattr(self.tokenizer, "model_max_length", None)]
        self.max_length = min(n for n in limits if isinstance(n, int) and n > 0)

    def score(self, texts: list[str | None]) -> np.ndarray:
        import torch

        scores = np.zeros(len(texts))
        todo = [i for i, t in enumerate(texts) if t and t.strip()]  # empty text: score 0
        with torch.inference_mode():
            for start in range(0, len(todo), self.batch_size):
                rows = todo[start:start + self.batch_size]
                # cut far beyond max_length tokens first: a 10 MB text is not tokenised whole
                batch = [texts[i][:self.max_length * 32] for i in rows]
                encoded = self.tokenizer(batch, padding=True, truncation=True,
                                         max_length=self.max_length, return_tensors="pt")
                encoded = {k: v.to(self.device) for k, v in encoded.items()}
                logits = self.model(**encoded).logits.float()
                probs = torch.softmax(logits, dim=-1)[:, self.index]
                scores[rows] = probs.cpu().numpy().astype(np.float64)
        return scores
