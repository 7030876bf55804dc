"""DeBERTa-v2/v3's disentangled attention through ``scaled_dot_product_attention``.

transformers runs it eagerly: the content scores, the relative-position bias added, the mask
filled in, a softmax and a second product, each a pass over a ``[batch x heads, L, L]`` tensor
in memory. Here the bias (transformers' own ``disentangled_attention_bias``, unchanged) and the
padding mask go to one fused attention kernel as an additive mask. Padding is masked per key,
as transformers masks it for every real token (its pairwise mask differs only on rows of
padding, whose outputs nothing reads). docs/classifier.md gives the measured gain."""

from __future__ import annotations

import inspect
import math
from typing import Any

#: The parameters of transformers' ``DisentangledSelfAttention.forward`` this replaces.
_SIGNATURE = ("self", "hidden_states", "attention_mask", "output_attentions", "query_states",
              "relative_pos", "rel_embeddings")


def fuse_disentangled_attention(model: Any) -> int:
    """Each DeBERTa-v2 self-attention module of ``model`` made to run the fused attention;
    the number of modules changed (0 for other models, or a transformers whose module differs
    from the one this was written against)."""
    try:
        from transformers.models.deberta_v2.modeling_deberta_v2 import (
            DisentangledSelfAttention,
        )
    except ImportError:
        return 0
    if tuple(inspect.signature(DisentangledSelfAttention.forward).parameters) != _SIGNATURE:
        return 0
    changed = 0
    for module in model.modules():
        if type(module) is DisentangledSelfAttention:
            module.forward = _fused_forward.__get__(module)
            changed += 1
    return changed


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
    floor = torch.finfo(query.dtype).min
    if self.relative_attention:
        bias = self.disentangled_attention_bias(query, key, relative_pos,
                                                self.pos_dropout(rel_embeddings), scale_factor)
        bias = bias.view(batch, heads, length, length).masked_fill(~valid_keys, floor)
    else:
        bias = torch.zeros(valid_keys.shape, dtype=query.dtype, device=query.device
                           ).masked_fill(~valid_keys, floor)
    size = query.size(-1)
    context = torch.nn.functional.scaled_dot_product_attention(
        *(x.view(batch, heads, length, size) for x in (query, key, value)),
        attn_mask=bias.to(query.dtype), scale=1 / math.sqrt(size * scale_factor))
    return context.transpose(1, 2).reshape(batch, length, heads * size), None
