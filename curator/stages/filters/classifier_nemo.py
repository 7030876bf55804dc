"""NeMo Curator's classifier checkpoints (quality, domain, content type, FineWeb-*-Edu of the
0.x ``HFDeberta`` kind): an encoder named by ``base_model`` with a dropout and a linear layer
``fc`` over its last hidden states, saved through huggingface_hub's ``PyTorchModelHubMixin``
(``config.json`` holding ``base_model``, ``fc_dropout``, ``id2label``; ``model.safetensors``
holding ``model.*`` and ``fc.*``). Built as NeMo's module builds it and pooled as it pools: the
linear layer on the first token's last hidden state (dropout is off at inference), softmax over
the labels. NeMo applies ``fc`` to every position and keeps the first; the first alone gives
the same numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from curator.stages.filters.classifier_attention import fuse_disentangled_attention
from curator.stages.filters.classifier_hf import (
    load_error,
    load_tokenizer,
    position_limit,
    window,
)
from curator.stages.filters.classifier_models import check_dir, read_config
from curator.stages.filters.classifier_torch import Encoder

WEIGHTS = "model.safetensors"


def backbone_config(checkpoint: Path, base_model: str, backbone: str | None) -> Any:
    """The encoder's config: from ``backbone`` (a directory holding it) when set, else from
    ``base_model`` as a local directory or from the Hugging Face cache (never downloaded)."""
    from transformers import AutoConfig

    where = Path(backbone or base_model).expanduser()
    if backbone and not (where / "config.json").is_file():
        raise ValueError(f"backbone: {backbone!r} is not a directory holding config.json")
    try:
        return AutoConfig.from_pretrained(str(where) if where.is_dir() else base_model,
                                          local_files_only=True)
    except (OSError, ValueError) as err:
        raise ValueError(
            f"{checkpoint}: its encoder {base_model!r} is neither a local directory nor in the "
            f"Hugging Face cache ({str(err).splitlines()[0]}); fetch its config.json on a login "
            f"node (hf download {base_model} config.json) or set backbone: to a directory "
            "holding it") from None


def load_nemo(path: str | Path, max_length: int, backbone: str | None) -> Encoder:
    """The checkpoint's tokenizer and model, weights checked: every parameter of the encoder
    and head must be in the file (keys the module lacks are ignored, as the mixin does)."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModel

    path = check_dir(path)
    config = read_config(path)
    encoder_config = backbone_config(path, str(config["base_model"]), backbone)
    id2label = {int(i): str(name) for i, name in config["id2label"].items()}
    if not (path / WEIGHTS).is_file():
        raise ValueError(f"{path}: a NeMo Curator checkpoint without {WEIGHTS}")
    try:
        tokenizer = load_tokenizer(path)
        encoder = AutoModel.from_config(encoder_config).float()
        fc = torch.nn.Linear(encoder.config.hidden_size, len(id2label))
        module = torch.nn.ModuleDict({"model": encoder, "fc": fc})
        missing, _ = module.load_state_dict(load_file(str(path / WEIGHTS)), strict=False)
    except (OSError, ValueError, KeyError, RuntimeError) as err:
        raise load_error(path, err) from None
    if missing:
        raise ValueError(f"{path}: {WEIGHTS} lacks {len(missing)} of the model's weights "
                         f"({', '.join(missing[:3])}, ...): not a checkpoint of this encoder")
    fuse_disentangled_attention(encoder, tokenizer.padding_side == "right")

    def forward(ids: Any, mask: Any) -> Any:
        hidden = encoder(input_ids=ids, attention_mask=mask).last_hidden_state
        return fc(hidden[:, 0, :])

    # NeMo's tokenizer stage reads its own max_seq_length, not the tokenizer's model_max_length
    limit = window(max_length, position_limit(encoder.config))
    return Encoder(tokenizer, module, forward, limit, id2label)
