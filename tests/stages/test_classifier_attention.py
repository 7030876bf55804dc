"""DeBERTa-v2's disentangled attention through the fused kernel gives transformers' eager
hidden states at every real token (right or left padding, no mask); other models are left
alone."""

from __future__ import annotations

import copy

import pytest

from curator.stages.filters.classifier_attention import fuse_disentangled_attention

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _deberta(layers: int = 2):
    config = transformers.DebertaV2Config(
        hidden_size=64, num_hidden_layers=layers, num_attention_heads=4, intermediate_size=128,
        vocab_size=500, max_position_embeddings=512, relative_attention=True,
        position_buckets=256, norm_rel_ebd="layer_norm", share_att_key=True,
        pos_att_type=["p2c", "c2p"], position_biased_input=False, max_relative_positions=-1,
        type_vocab_size=0)  # deberta-v3-base's attention, small
    torch.manual_seed(0)
    return transformers.AutoModel.from_config(config).eval()


@pytest.mark.parametrize("pad_left", [False, True])
def test_fused_attention_equals_transformers_at_every_real_token(pad_left):
    eager = _deberta(layers=3)
    fused = copy.deepcopy(eager)
    assert fuse_disentangled_attention(fused) == 3
    ids = torch.randint(5, 500, (3, 40), generator=torch.Generator().manual_seed(1))
    lengths = [40, 25, 9]
    mask = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        mask[row, slice(40 - n, 40) if pad_left else slice(0, n)] = 1
    with torch.inference_mode():
        want = eager(input_ids=ids, attention_mask=mask).last_hidden_state
        got = fused(input_ids=ids, attention_mask=mask).last_hidden_state
        for row, n in enumerate(lengths):
            real = slice(40 - n, 40) if pad_left else slice(0, n)
            torch.testing.assert_close(got[row, real], want[row, real], rtol=0, atol=1e-5)
        torch.testing.assert_close(fused(input_ids=ids).last_hidden_state,
                                   eager(input_ids=ids).last_hidden_state, rtol=0, atol=1e-5)


def test_other_models_are_left_alone():
    config = transformers.BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=64, vocab_size=100)
    assert fuse_disentangled_attention(transformers.BertModel(config)) == 0


def test_the_kernel_on_a_gpu_is_as_close_to_fp32_as_bf16_attention_is():
    """flashdeberta's kernel (bf16, right padding) against transformers' eager fp32: as close as
    the fused SDPA path in bf16 is, at every real token (skipped without CUDA or the kernel)."""
    from curator.stages.filters.classifier_attention import disentangled_kernel

    if not torch.cuda.is_available() or disentangled_kernel() is None:
        pytest.skip("needs CUDA and flashdeberta")
    eager = _deberta(layers=3).cuda()
    kernel, sdpa = copy.deepcopy(eager).bfloat16(), copy.deepcopy(eager).bfloat16()
    fuse_disentangled_attention(kernel)
    fuse_disentangled_attention(sdpa, right_padded=False)
    assert all(m.curator_kernel is not None for m in kernel.modules()
               if hasattr(m, "curator_kernel"))
    ids = torch.randint(5, 500, (4, 300), generator=torch.Generator().manual_seed(2)).cuda()
    lengths = [300, 200, 77, 9]
    mask = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
    with torch.inference_mode():
        want = eager(input_ids=ids, attention_mask=mask).last_hidden_state
        got = kernel(input_ids=ids, attention_mask=mask).last_hidden_state.float()
        plain = sdpa(input_ids=ids, attention_mask=mask).last_hidden_state.float()
    for row, n in enumerate(lengths):
        kernel_error = (got[row, :n] - want[row, :n]).abs().max().item()
        sdpa_error = (plain[row, :n] - want[row, :n]).abs().max().item()
        assert kernel_error <= 2 * sdpa_error + 1e-2, (row, kernel_error, sdpa_error)
