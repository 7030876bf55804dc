"""DeBERTa-v2/v3's disentangled attention through ``scaled_dot_product_attention``.

transformers runs it eagerly: the content scores, the relative-position bias added, the mask
filled in, a softmax and a second product, each a pass over a ``[batch x heads, L, L]`` tensor
in memory. Here the bias (transformers' own ``disentangled_attention_bias``, unchanged) and the
padding mask go to one fused attention kernel as an additive mask. Padding is masked per key,
as transformers masks it for every real token (its pairwise mask differs only on rows of
padding, whose outputs nothing reads). On a GPU in bf16 or fp16, where flashdeberta is installed
(``pip install 'curator[gpu-classifier]'``) and texts are padded on the right, its Triton kernel
instead gathers the relative-position scores inside the attention tile: the ``[L, L]`` bias is
never written. docs/classifier.md gives the measured gains."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

#: The parameters of transformers' ``DisentangledSelfAttention.forward`` this replaces.
_SIGNATURE = ("self", "hidden_states", "attention_mask", "output_attentions", "query_states",
              "relative_pos", "rel_embeddings")


def fuse_disentangled_attention(model: Any, right_padded: bool = True) -> int:
    """Each DeBERTa-v2 self-attention module of ``model`` made to run the fused attention (the
    kernel too where ``right_padded``); the number of modules changed (0 for other models, or a
    transformers whose module differs from the one this was written against)."""
    try:
        from transformers.models.deberta_v2.modeling_deberta_v2 import (
            DisentangledSelfAttention,
        )
    except ImportError:
        return 0
    if tuple(inspect.signature(DisentangledSelfAttention.forward).parameters) != _SIGNATURE:
        return 0
    kernel = disentangled_kernel() if right_padded else None
    changed = 0
    for module in model.modules():
        if type(module) is DisentangledSelfAttention:
            module.forward = _fused_forward.__get__(module)
            module.curator_kernel = kernel
            changed += 1
    return changed


def disentangled_kernel() -> Callable[..., Any] | None:
    """flashdeberta's disentangled attention (its Triton kernel), None where it or Triton is
    not installed."""
    try:
        from flashdeberta.ops.flash_attention import flash_attention_with_disentangled
    except ImportError:
        return None
    return flash_attention_with_disentangled


def _fused_forward(self: Any, hidden_states: Any, attention_mask: Any,
                   output_attentions: bool = False, query_states: Any = None,
                   relative_pos: Any = None, rel_embeddings: Any = None) -> tuple[Any, None]:
    import torch

    if output_attentions or query_states is not None:  # not at inference: transformers' own
        return type(self).forward(self, hidden_states, attention_mask, output_attentions,
                                  query_states, relative_pos, rel_embeddings)
    batch, length = hidden_states.shape[:2]
    heads = self.num_attention_heads

    def per_head(x: Any) -> Any:
        return self.transpose_for_scores(x, heads)  # [batch x heads, L, head size]

    query = per_head(self.query_proj(hidden_states))
    key = per_head(self.key_proj(hidden_states))
    value = per_head(self.value_proj(hidden_states))
    scale_factor = 1 + ("c2p" in self.pos_att_type) + ("p2c" in self.pos_att_type)
    valid_keys = attention_mask.amax(dim=-2, keepdim=True).bool()  # [batch, 1, 1, L]
    size = query.size(-1)
    if (self.curator_kernel is not None and self.relative_attention and query.is_cuda
            and query.dtype in (torch.bfloat16, torch.float16)):
        context = _kernel_attention(self, *(x.view(batch, heads, length, size)
                                            for x in (query, key, value)),
                                    valid_keys.view(batch, length), rel_embeddings,
                                    1 / math.sqrt(size * scale_factor))
        return context.transpose(1, 2).reshape(batch, length, heads * size), None
    floor = torch.finfo(query.dtype).min
    if self.relative_attention:
        bias = self.disentangled_attention_bias(query, key, relative_pos,
                                                self.pos_dropout(rel_embeddings), scale_factor)
        bias = bias.view(batch, heads, length, length).masked_fill(~valid_keys, floor)
    else:
        bias = torch.zeros(valid_keys.shape, dtype=query.dtype, device=query.device
                           ).masked_fill(~valid_keys, floor)
    context = torch.nn.functional.scaled_dot_product_attention(
        *(x.view(batch, heads, length, size) for x in (query, key, value)),
        attn_mask=bias.to(query.dtype), scale=1 / math.sqrt(size * scale_factor))
    return context.transpose(1, 2).reshape(batch, length, heads * size), None


def _kernel_attention(self: Any, query: Any, key: Any, value: Any, valid: Any,
                      rel_embeddings: Any, scale: float) -> Any:
    """Context ``[batch, heads, L, head size]`` by flashdeberta's kernel: each row's first
    ``valid.sum()`` tokens are its real ones (right padding)."""
    import torch

    heads, size = query.shape[1], query.shape[-1]

    def table(projection: Any) -> Any:  # [1, heads, 2 x span, head size]
        rows = projection(self.pos_dropout(rel_embeddings))
        return rows.view(1, -1, heads, size).transpose(1, 2).contiguous()

    c2p = "c2p" in self.pos_att_type
    p2c = "p2c" in self.pos_att_type
    pos_key = table(self.key_proj if self.share_att_key else self.pos_key_proj) if c2p else None
    pos_query = (table(self.query_proj if self.share_att_key else self.pos_query_proj)
                 if p2c else None)
    lengths = valid.sum(dim=-1, dtype=torch.int32)
    return self.curator_kernel(query, key, value, lengths, pos_key, pos_query, False, scale,
                               self.position_buckets, self.max_relative_positions)
