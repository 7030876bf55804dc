"""FP8 linear layers (``precision: fp8``): which layers are converted, the product's error
against bf16 (torch's ``_scaled_mm`` runs on the CPU too, so the numerics are checked here; the
speed needs an FP8 GPU: test_classifier_gpu.py), and a worker without FP8 matrix units refused
in one line."""

from __future__ import annotations

import pytest

from tests.stages import quality_models as qm

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
if not hasattr(torch, "_scaled_mm"):
    pytest.skip("this torch has no _scaled_mm", allow_module_level=True)

from curator import ClassifierFilter  # noqa: E402
from curator.stages.filters.classifier_fp8 import Fp8Linear, fp8_layers  # noqa: E402
from curator.stages.filters.classifier_hf import load_hf  # noqa: E402
from curator.stages.filters.classifier_torch import TorchScorer  # noqa: E402

TEXTS = ["the cat sat on the mat and looked at the birds outside the window " * 3,
         "gradient descent converges when the learning rate is small enough " * 2,
         "tokyo station is a railway station in the marunouchi business district"]


def test_a_linear_in_fp8_stays_within_the_formats_rounding():
    torch.manual_seed(0)
    linear = torch.nn.Linear(768, 3072).to(torch.bfloat16)
    x = torch.randn(64, 10, 768, dtype=torch.bfloat16)
    exact = x.float() @ linear.weight.float().t() + linear.bias.float()
    out = Fp8Linear(linear)(x)
    assert out.shape == (64, 10, 3072) and out.dtype == torch.bfloat16
    # e4m3 keeps 3 mantissa bits: each factor rounded by up to 1/16 of itself, about 5 % of a
    # product's size as a deviation, which a sum of random terms keeps (bf16: 0.4 %)
    error = (out.float() - exact).abs()
    assert error.max() < 0.1 * exact.abs().max()
    assert 0.01 * exact.abs().mean() < error.mean() < 0.06 * exact.abs().mean()


def test_only_the_encoder_layers_linears_are_converted(tmp_path):
    model = qm.fineweb_edu_model(tmp_path / "model", TEXTS * 4)
    encoder = load_hf(model, 128)
    layers = encoder.module.config.num_hidden_layers
    assert fp8_layers(encoder.module) == 6 * layers  # q, k, v, attention out, up, down
    linears = {name for name, m in encoder.module.named_modules()
               if isinstance(m, torch.nn.Linear)}
    assert linears == {"bert.pooler.dense", "classifier"}  # pooled features and head as trained


def test_fp8_scores_follow_the_models_scores(tmp_path):
    model = qm.fineweb_edu_model(tmp_path / "model", TEXTS * 4)

    def scores(precision: str):
        encoder = load_hf(model, 128)
        if precision == "fp8":  # the conversion a GPU scorer makes, run on the CPU
            encoder.module.to(torch.bfloat16)
            fp8_layers(encoder.module)
        return TorchScorer(encoder, "cpu", "fp32", 8, 1024, 1, None, True, None).score(
            TEXTS).score

    fp32, fp8 = scores("fp32"), scores("fp8")
    assert abs(fp8 - fp32).max() < 1.0  # of the 0-5 scale, on a 32-wide random model
    assert (fp8 != fp32).any()


def test_fp8_on_a_worker_without_fp8_units_is_one_line(tmp_path):
    model = qm.fineweb_edu_model(tmp_path / "model", TEXTS * 4)
    with pytest.raises(ValueError, match="precision fp8 needs a GPU with FP8") as err:
        TorchScorer(load_hf(model, 128), "cpu", "fp8", 8, 1024, 1, None, True, None)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="fp8 runs on a GPU"):
        ClassifierFilter(model=str(model), precision="fp8", device="cpu")
