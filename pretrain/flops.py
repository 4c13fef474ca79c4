"""Model and hardware FLOPs per iteration, for MFU and HFU (Korthikanti et al. 2022; Narayanan et al. 2021).

Convention: a multiply-add is 2 FLOPs; one iteration is forward + backward = 3 x forward; the attention core
(QK^T and AV) is counted as computed by a causal flash kernel: only the s (s + 1) / 2 query-key pairs at or below
the diagonal, i.e. half of the full s^2 (``causal=False`` gives the full-square count of the papers below).
For a GPT with a 4h GeLU MLP, per iteration of B sequences of s tokens, full-square attention:
    model FLOPs  = 72 B s l h^2 (1 + s/(6h) + V/(12 l h))
    full recompute (one extra forward of every layer): 96 B s l h^2 (1 + s/(6h) + V/(16 l h))
``model_flops`` derives the count term by term, so that it also covers other MLP widths, SwiGLU and the causal
count; for the configuration above with ``causal=False`` it equals the closed form (tested). MFU = model FLOPs /
(time x devices x peak); HFU counts the recomputed FLOPs too: full recompute adds one forward of every layer,
selective recompute (``pretrain.recompute``: matmul and attention outputs kept) adds only pointwise work, which
is not counted, so its HFU equals its MFU. Peaks: ``pretrain.mfu``.
"""
from __future__ import annotations


def closed_form_model_flops(B: int, s: int, l: int, h: int, V: int) -> float:
    return 72.0 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))


def closed_form_full_recompute_flops(B: int, s: int, l: int, h: int, V: int) -> float:
    return 96.0 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))


def layer_forward_flops(B: int, s: int, h: int, ffn: int, swiglu: bool, causal: bool = True) -> tuple[float, float]:
    """(dense GEMM FLOPs, attention-core FLOPs) of one transformer layer's forward."""
    qkv_proj = 2 * B * s * h * 3 * h + 2 * B * s * h * h
    mlp = 2 * B * s * h * ffn * (3 if swiglu else 2)
    pairs = s * (s + 1) / 2 if causal else s * s
    core = 2 * B * pairs * h * 2  # QK^T and AV
    return float(qkv_proj + mlp), float(core)


def model_flops(B: int, s: int, l: int, h: int, V: int, ffn: int | None = None, swiglu: bool = False,
                recompute: str = "none", causal: bool = True) -> float:
    """FLOPs of one training iteration (forward + backward = 3 x forward) of B sequences; with ``recompute`` set,
    the hardware FLOPs including the recomputed forward work."""
    ffn = 4 * h if ffn is None else ffn
    dense, core = layer_forward_flops(B, s, h, ffn, swiglu, causal)
    logits = 2.0 * B * s * h * V
    total = 3 * (l * (dense + core) + logits)
    if recompute == "full":
        total += l * (dense + core)
    return total


def flops_per_iteration(model_cfg, global_batch: int, seq_len: int, recompute: str = "none") -> float:
    return model_flops(global_batch, seq_len, model_cfg.num_layers, model_cfg.hidden_size,
                       model_cfg.padded_vocab_size, model_cfg.ffn_hidden_size, model_cfg.mlp == "swiglu", recompute)
