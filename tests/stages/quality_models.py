"""Tiny quality models with the published architectures, saved as their authors save them
(random weights, seeded; nothing downloaded), and each one's reference computation as its own
code does it:

- FineWeb-Edu: ``BertForSequenceClassification`` with one regression output and a WordPiece
  tokenizer (vocab built here); scored as the model card's code scores (no activation,
  ``int_score = int(round(max(0, min(score, 5))))``).
- NeMo Curator: a DeBERTa-v2 encoder with dropout and a linear ``fc`` over its hidden states,
  saved through ``PyTorchModelHubMixin`` with ``base_model`` naming the encoder as published;
  NeMo's module re-implemented in plain torch, tokenized and pooled as NeMo's stages do.
- fastText: supervised models with word bigrams, trained here; fastText's own ``predict``.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
NEMO_LABELS = {0: "High", 1: "Low", 2: "Medium"}
#: What a published NeMo checkpoint's config.json names; resolved here by ``backbone:``.
NEMO_BASE_MODEL = "microsoft/deberta-v3-base"


def wordpiece_vocab(texts: list[str], words: int = 400) -> dict[str, int]:
    """Special tokens, every character alone and as a ``##`` piece, and the most frequent
    lower-cased words: every text tokenizes, long words into pieces."""
    counts = Counter(w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower()))
    chars = sorted({c for w in counts for c in w})
    vocab = [*SPECIALS, *chars, *(f"##{c}" for c in chars),
             *(w for w, _ in counts.most_common(words) if len(w) > 1)]
    return {token: i for i, token in enumerate(dict.fromkeys(vocab))}


def bert_tokenizer(texts: list[str], max_length: int):
    from transformers import BertTokenizer

    return BertTokenizer(vocab=wordpiece_vocab(texts), model_max_length=max_length)


def fineweb_edu_model(folder: Path, texts: list[str]) -> Path:
    """A 2-layer, 32-wide FineWeb-Edu classifier (one regression output, 128 positions: long
    texts are cut), its head scaled so that the texts' scores spread over the 0-5 scale
    (mean 2.5, deviation 1.2)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    tokenizer = bert_tokenizer(texts, 128)
    config = BertConfig(vocab_size=len(tokenizer.get_vocab()), hidden_size=32,
                        num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=128, initializer_range=0.3, num_labels=1,
                        problem_type="regression",
                        id2label={0: "LABEL_0"}, label2id={"LABEL_0": 0})
    torch.manual_seed(0)
    model = BertForSequenceClassification(config).eval()
    with torch.no_grad():
        inputs = tokenizer(texts, return_tensors="pt", padding=True, truncation=True)
        raw = model(**inputs).logits[:, 0] - model.classifier.bias
        scale = 1.2 / float(raw.std())
        model.classifier.weight.mul_(scale)
        model.classifier.bias.fill_(2.5 - float(raw.mean()) * scale)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def fineweb_edu_reference(folder: Path, texts: list[str]) -> tuple[np.ndarray, list[int]]:
    """(score, int_score) per text, as the FineWeb-Edu model card's code computes them."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    scores = []
    for text in texts:
        inputs = tokenizer(text, return_tensors="pt", padding="longest", truncation=True)
        with torch.no_grad():
            logits = model(**inputs).logits.squeeze(-1).float().detach().numpy()
        scores.append(logits.item())
    # FineWeb-Edu's code, verbatim
    return np.array(scores), [int(round(max(0, min(s, 5)))) for s in scores]  # noqa: RUF046


def nemo_checkpoint(folder: Path, backbone: Path, texts: list[str]):
    """A NeMo Curator quality-classifier-style checkpoint in ``folder`` (config.json and
    model.safetensors by the mixin, tokenizer files beside them), the encoder's config.json in
    ``backbone``; returns the module, NeMo's own class re-implemented."""
    import torch
    from huggingface_hub import PyTorchModelHubMixin
    from torch import nn
    from transformers import AutoModel, DebertaV2Config

    tokenizer = bert_tokenizer(texts, 512)
    encoder = DebertaV2Config(
        vocab_size=len(tokenizer.get_vocab()), hidden_size=32, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=64, max_position_embeddings=512,
        relative_attention=True, position_buckets=256, norm_rel_ebd="layer_norm",
        share_att_key=True, pos_att_type=["p2c", "c2p"], position_biased_input=False,
        type_vocab_size=0, pad_token_id=0, initializer_range=0.3)  # v3's layout, 2 x 32
    encoder.save_pretrained(backbone)

    class NemoQualityModel(nn.Module, PyTorchModelHubMixin):
        """NeMo Curator's ``Deberta`` classifier module (``AutoModel.from_pretrained(
        config["base_model"])`` there: the encoder's config here, nothing downloaded)."""

        def __init__(self, config: dict):
            super().__init__()
            self.model = AutoModel.from_config(encoder)
            self.dropout = nn.Dropout(config["fc_dropout"])
            self.fc = nn.Linear(self.model.config.hidden_size, len(config["id2label"]))

        def forward(self, input_ids, attention_mask):
            features = self.model(input_ids, attention_mask).last_hidden_state
            dropped = self.dropout(features)
            outputs = self.fc(dropped)
            return torch.softmax(outputs[:, 0, :], dim=1)

    torch.manual_seed(1)
    module = NemoQualityModel({
        "base_model": NEMO_BASE_MODEL, "fc_dropout": 0.2,
        "id2label": {str(k): v for k, v in NEMO_LABELS.items()},
        "label2id": {v: k for k, v in NEMO_LABELS.items()}})
    module.eval()
    with torch.no_grad():  # each label's logit centred over the texts, deviation 2: all predicted
        tokens = tokenizer(texts, padding=True, truncation=True, max_length=64,
                           return_tensors="pt")
        first = module.model(tokens["input_ids"], tokens["attention_mask"]).last_hidden_state[:, 0]
        logits = module.fc(first) - module.fc.bias
        scale = 2.0 / logits.std(dim=0)
        module.fc.weight.mul_(scale[:, None])
        module.fc.bias.copy_(-logits.mean(dim=0) * scale)
    module.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return module


def nemo_reference(module, folder: Path, texts: list[str], max_chars: int, max_length: int
                   ) -> np.ndarray:
    """Probabilities ``[n, labels]`` as NeMo's stages compute them: text cut at ``max_chars``,
    tokenized padded to ``max_length`` without token type ids, the module's forward."""
    import torch
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder, padding_side="right")
    tokens = tokenizer([t[:max_chars] for t in texts], max_length=max_length,
                       padding="max_length", return_tensors="pt", truncation=True,
                       add_special_tokens=True, return_token_type_ids=False)
    with torch.no_grad():
        return module(tokens["input_ids"], tokens["attention_mask"]).numpy()


def fasttext_model(path: Path, labelled: list[tuple[str, str]]) -> Path:
    """A supervised fastText model with word bigrams over (label, text) pairs, trained as
    curator trains (``train_in_fresh_process``: fastText keeps state between trainings in one
    process)."""
    from curator.stages.filters.classifier_training import train_in_fresh_process

    train = path.with_suffix(".txt")
    train.write_text("".join(f"__label__{label} {' '.join(text.split())}\n"
                             for label, text in labelled), encoding="utf-8")
    train_in_fresh_process(train, path, {"wordNgrams": 2, "dim": 16, "epoch": 5, "lr": 0.1,
                                         "bucket": 20000, "minCount": 1, "seed": 0,
                                         "thread": 1, "verbose": 0})
    return path


def fasttext_reference(path: Path, texts: list[str]) -> list[dict[str, float]]:
    """fastText's own ``predict`` of every label per text (newlines made spaces: one line)."""
    import fasttext

    model = fasttext.load_model(str(path))
    out = []
    for text in texts:
        labels, probs = model.predict(text.replace("\n", " "), k=-1)
        out.append(dict(zip(labels, (float(p) for p in probs), strict=True)))
    return out
