"""FP8 matrix products for an encoder's linear layers, through the installed torch's
``torch._scaled_mm``: weights in e4m3 with one scale per output row (set once), activations in
e4m3 with one scale per token (set per batch), bf16 out. Rationale and measured tolerance:
docs/classifier.md."""

from __future__ import annotations

from typing import Any

import torch

#: Largest finite e4m3 value: a row's largest magnitude is scaled onto it.
E4M3_MAX = torch.finfo(torch.float8_e4m3fn).max
#: ``torch._scaled_mm`` needs both dimensions of a weight to be multiples of this.
ALIGN = 16
#: GPUs with FP8 matrix units: compute capability 8.9 (Ada) and later (Hopper, Blackwell).
FP8_CAPABILITY = (8, 9)


def fp8_capable(device: str) -> bool:
    """Whether ``device`` runs ``torch._scaled_mm`` in hardware."""
    return (device == "cuda" and hasattr(torch, "_scaled_mm") and torch.cuda.is_available()
            and torch.cuda.get_device_capability() >= FP8_CAPABILITY)


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` [rows, k] in e4m3, each row scaled so its largest magnitude is E4M3_MAX, and the
    float32 scales [rows, 1] that undo it."""
    amax = x.abs().amax(dim=-1, keepdim=True).float().clamp(min=1e-12)
    scale = amax / E4M3_MAX
    return (x.float() / scale).to(torch.float8_e4m3fn), scale


class Fp8Linear(torch.nn.Module):
    """A linear layer whose product runs in FP8 (rowwise scales both sides, fast accumulation
    as torchao's float8 inference uses) and returns bf16."""

    def __init__(self, linear: torch.nn.Linear, quantize: Any = quantize_rows):
        super().__init__()
        weight, scale = quantize_rows(linear.weight.detach())
        self.register_buffer("weight", weight)  # [out, in]
        self.register_buffer("weight_scale", scale.t().contiguous())  # [1, out]
        bias = linear.bias
        self.register_buffer("bias", None if bias is None else bias.detach().to(torch.bfloat16))
        self.quantize = quantize

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        values, scale = self.quantize(rows)
        out = torch._scaled_mm(values, self.weight.t(), scale_a=scale, scale_b=self.weight_scale,
                               bias=self.bias, out_dtype=torch.bfloat16, use_fast_accum=True)
        return out.reshape(*x.shape[:-1], out.shape[-1])


def fp8_layers(module: torch.nn.Module, quantize: Any = quantize_rows) -> int:
    """Replace, in place, every ``nn.Linear`` inside ``module``'s encoder layers (a submodule
    path through ``encoder``) whose dimensions ``_scaled_mm`` takes; embeddings, poolers and
    classification heads stay as they are. The number replaced."""
    targets = [(name, child) for name, child in module.named_modules()
               if isinstance(child, torch.nn.Linear) and "encoder" in name.split(".")
               and child.in_features % ALIGN == 0 and child.out_features % ALIGN == 0]
    for name, linear in targets:
        parent, _, attribute = name.rpartition(".")
        setattr(module.get_submodule(parent), attribute, Fp8Linear(linear, quantize))
    return len(targets)
