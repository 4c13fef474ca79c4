"""The GPT: parameter names, tied embeddings, causality, Megatron's init (independent of pipeline cutting),
options (RoPE, RMSNorm, SwiGLU), activation recomputation, and the FLOPs formulas."""
from __future__ import annotations

import math

import pytest
import torch

from pretrain.config import Config, finalize
from pretrain.flops import (
    closed_form_full_recompute_flops,
    closed_form_model_flops,
    flops_per_iteration,
    model_flops,
)
from pretrain.loss import cross_entropy
from pretrain.model import GPT, num_params
from pretrain.parallel import apply_recompute
from pretrain.parallel.pipeline import build_stage_model


def make_cfg(**model):
    cfg = Config()
    cfg.data.kind, cfg.data.seq_len = "synthetic", 16
    for k, v in dict(vocab_size=200, hidden_size=32, num_layers=4, num_heads=4).items():
        setattr(cfg.model, k, v)
    for k, v in model.items():
        setattr(cfg.model, k, v)
    finalize(cfg, 1)
    return cfg


VARIANTS = [dict(), dict(position="rope", norm="rmsnorm", mlp="swiglu", bias=False)]


def test_parameter_names_and_shapes():
    m = GPT(make_cfg().model)
    shapes = {k: tuple(v.shape) for k, v in m.state_dict().items()}
    assert shapes["embed.weight"] == (256, 32)  # vocab 200 padded to 256
    assert shapes["lm_head.weight"] == (256, 32)
    assert shapes["pos_embed.weight"] == (16, 32)
    assert shapes["layers.3.attn.q_proj.weight"] == (32, 32)
    assert shapes["layers.0.mlp.up_proj.weight"] == (128, 32)
    assert shapes["layers.0.mlp.down_proj.bias"] == (32,)
    assert shapes["norm.weight"] == (32,)
    assert len([k for k in shapes if k.startswith("layers.0.")]) == 16
    assert m.lm_head.weight is m.embed.weight  # tied
    r = GPT(make_cfg(**VARIANTS[1]).model)
    names = set(r.state_dict())
    assert "pos_embed.weight" not in names and "layers.0.mlp.gate_proj.weight" in names
    assert not any(k.endswith(".bias") for k in names)
    assert r.config.ffn_hidden_size == 128  # 8h/3 rounded up to 64


@pytest.mark.parametrize("variant", VARIANTS)
def test_causal_and_finite(variant):
    m = GPT(make_cfg(**variant).model)
    x = torch.randint(0, 200, (2, 16))
    y = x.clone()
    y[:, 9] = (y[:, 9] + 1) % 200
    with torch.no_grad():
        a, b = m(x), m(y)
    assert a.shape == (2, 16, 256) and torch.isfinite(a).all()
    assert torch.equal(a[:, :9], b[:, :9])  # the past does not see the future
    assert not torch.allclose(a[:, 9:], b[:, 9:])


def test_megatron_init():
    m = GPT(make_cfg(num_layers=8, hidden_size=128, vocab_size=5000).model)
    sd = m.state_dict()
    std = lambda k: sd[k].float().std().item()  # noqa: E731
    assert std("layers.0.attn.q_proj.weight") == pytest.approx(0.02, rel=0.05)
    assert std("embed.weight") == pytest.approx(0.02, rel=0.05)
    assert std("layers.5.attn.o_proj.weight") == pytest.approx(0.02 / math.sqrt(16), rel=0.05)
    assert std("layers.5.mlp.down_proj.weight") == pytest.approx(0.02 / math.sqrt(16), rel=0.05)
    assert torch.equal(sd["layers.2.attn_norm.weight"], torch.ones(128))
    assert not sd["layers.2.mlp.up_proj.bias"].any()
    # distinct draws for distinct tensors; the same seed gives the same model, another seed another one
    assert not torch.equal(sd["layers.0.attn.q_proj.weight"], sd["layers.0.attn.k_proj.weight"])
    assert torch.equal(GPT(make_cfg().model).state_dict()["layers.1.attn.v_proj.weight"],
                       GPT(make_cfg().model).state_dict()["layers.1.attn.v_proj.weight"])
    assert not torch.equal(GPT(make_cfg(init_seed=5).model).state_dict()["layers.1.attn.v_proj.weight"],
                           GPT(make_cfg().model).state_dict()["layers.1.attn.v_proj.weight"])


def test_pipeline_stages_hold_the_whole_models_weights():
    cfg = make_cfg().model
    whole = GPT(cfg).state_dict()
    seen = set()
    for stage in range(4):
        part = build_stage_model(cfg, stage, 4, torch.device("cpu"))
        names = set(part.state_dict())
        assert {k.split(".")[1] for k in names if k.startswith("layers.")} == {str(stage)}
        for k, v in part.state_dict().items():
            assert torch.equal(v, whole[k]), k
            seen.add(k)
    assert seen == set(whole)  # incl. the last stage's copy of the tied weight, equal to the embedding


@pytest.mark.parametrize("variant", VARIANTS)
def test_recompute_modes_give_the_same_gradients(variant):
    cfg = make_cfg(**variant).model
    x = torch.randint(0, 200, (2, 17))
    grads = {}
    for mode in ("none", "selective", "full"):
        m = GPT(cfg)
        apply_recompute(m, mode)
        loss = cross_entropy(m(x[:, :-1]), x[:, 1:])
        loss.backward()
        grads[mode] = (loss.item(), {k: p.grad.clone() for k, p in m.named_parameters()})
    for mode in ("selective", "full"):
        assert grads[mode][0] == grads["none"][0]
        for k, g in grads["none"][1].items():
            torch.testing.assert_close(grads[mode][1][k], g, rtol=0, atol=1e-7)


def test_num_params_counts_tied_weight_once():
    m = GPT(make_cfg().model)
    assert num_params(m) == sum(p.numel() for p in m.parameters())
    assert num_params(m) - num_params(m, exclude_embeddings=True) == 256 * 32 + 16 * 32


@pytest.mark.parametrize("B, s, l, h, V", [(1536, 2048, 96, 12288, 51200),  # GPT-3 175B
                                            (8, 2048, 24, 2048, 50304),  # the 1.3B benchmark model
                                            (16, 64, 4, 64, 256)])
def test_flops_formulas(B, s, l, h, V):
    full = dict(causal=False)  # the papers' full-square attention count
    assert model_flops(B, s, l, h, V, **full) == pytest.approx(closed_form_model_flops(B, s, l, h, V), rel=1e-12)
    assert model_flops(B, s, l, h, V, recompute="full", **full) == \
        pytest.approx(closed_form_full_recompute_flops(B, s, l, h, V), rel=1e-12)
    # selective recomputation reruns only pointwise ops: no extra matmul FLOPs
    assert model_flops(B, s, l, h, V, recompute="selective") == model_flops(B, s, l, h, V)
    # causal: the attention core counts s (s + 1) / 2 of the s^2 query-key pairs (3 x 4 B h per pair)
    core_saved = 3 * l * 4 * B * h * (s * s - s * (s + 1) / 2)
    assert model_flops(B, s, l, h, V) == pytest.approx(model_flops(B, s, l, h, V, **full) - core_saved, rel=1e-12)


def test_flops_for_a_config():
    cfg = make_cfg()
    assert flops_per_iteration(cfg.model, 8, 16) == model_flops(8, 16, 4, 32, 256)
    assert model_flops(8, 16, 4, 32, 256, causal=False) == closed_form_model_flops(8, 16, 4, 32, 256)
    swiglu = make_cfg(mlp="swiglu")
    # 3 matrices of h x ffn instead of 2: 2 B s h ffn per extra matrix, x3 for forward + backward
    extra = 3 * 4 * (2 * 8 * 16 * 32 * swiglu.model.ffn_hidden_size)
    base = model_flops(8, 16, 4, 32, 256, ffn=swiglu.model.ffn_hidden_size)
    assert flops_per_iteration(swiglu.model, 8, 16) == pytest.approx(base + extra)


def test_chunked_cross_entropy_equals_torch_and_never_holds_fp32_logits():
    import torch.nn.functional as F

    from pretrain.memory import LiveBytes
    from pretrain.loss import ChunkedCrossEntropy

    g = torch.Generator().manual_seed(0)
    logits = torch.randn(300, 1000, generator=g, requires_grad=True)
    labels = torch.randint(0, 1000, (300,), generator=g)
    ref = F.cross_entropy(logits, labels)
    (ref_grad,) = torch.autograd.grad(ref, logits)
    got = ChunkedCrossEntropy.apply(logits, labels, 64)
    (grad,) = torch.autograd.grad(got, logits)
    torch.testing.assert_close(got, ref, rtol=1e-6, atol=0)
    torch.testing.assert_close(grad, ref_grad, rtol=1e-5, atol=1e-9)
    # bf16 logits [4096, 1000]: an fp32 copy would be 16 MB; the loss holds one 64-token fp32 chunk at a time
    big = torch.randn(4096, 1000, generator=g).to(torch.bfloat16).requires_grad_()
    tgt = torch.randint(0, 1000, (4096,), generator=g)
    with LiveBytes() as mem:
        loss = ChunkedCrossEntropy.apply(big, tgt, 64)
        loss.backward()
    fp32_full = 4096 * 1000 * 4
    assert mem.peak < big.numel() * 2 + fp32_full / 8  # the bf16 gradient plus chunks
    ref = F.cross_entropy(big.detach().float(), tgt)
    assert loss.item() == pytest.approx(ref.item(), rel=1e-6)


@pytest.mark.parametrize("name, label, tflops", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.0), ("NVIDIA H100 PCIe", "H100 PCIe", 756.0),
    ("NVIDIA H100 NVL", "H100 NVL", 835.0), ("NVIDIA H200", "H200 SXM", 989.0),
    ("NVIDIA A100-SXM4-80GB", "A100", 312.0), ("NVIDIA A100 80GB PCIe", "A100", 312.0),
    ("NVIDIA B200", "B200", 2250.0), ("NVIDIA GeForce RTX 4090", None, None), ("NVIDIA GH200 480GB", None, None)])
def test_mfu_peak_by_exact_device_name(name, label, tflops):
    from pretrain.mfu import cuda_peak

    peak = cuda_peak(name, torch.bfloat16)
    if label is None:
        assert peak.flops is None and "MFU unknown" in peak.label and peak.fraction(1e15) is None
    else:
        assert peak.flops == tflops * 1e12 and peak.label.startswith(f"{label} bf16 dense peak")


def test_cpu_peak_is_measured():
    from pretrain.mfu import device_peak

    peak = device_peak(torch.device("cpu"), torch.float32)
    assert peak.flops > 1e8 and peak.label.startswith("measured matmul peak")
    assert device_peak(torch.device("cpu"), torch.float32, 2.0).flops == 2e12
