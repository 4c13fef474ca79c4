"""Model and hardware FLOPs per iteration, MFU and HFU (Korthikanti et al. 2022; Narayanan et al. 2021).

For a GPT with a 4h GeLU MLP and no causal halving of attention, per iteration of B sequences of s tokens:
    model FLOPs  = 72 B s l h^2 (1 + s/(6h) + V/(12 l h))
    full recompute (one extra forward of every layer): 96 B s l h^2 (1 + s/(6h) + V/(16 l h))
    selective recompute (extra forward of the attention core, 4 B s^2 h per layer): 72 B s l h^2 (1 + 2s/(9h) + V/(12 l h))
``model_flops`` derives the same count term by term, so that it also covers other MLP widths and SwiGLU; for the
configuration above it equals the closed form (tested). MFU = model FLOPs / (time x devices x peak); HFU counts
the recomputed FLOPs too.
"""
from __future__ import annotations

import torch

# dense peak per device, TFLOP/s
PEAK_TFLOPS = {
    ("cuda", "h100", "bf16"): 989.0, ("cuda", "h200", "bf16"): 989.0, ("cuda", "h800", "bf16"): 989.0,
    ("cuda", "a100", "bf16"): 312.0, ("cuda", "h100", "fp32"): 67.0, ("cuda", "h200", "fp32"): 67.0,
    ("cuda", "a100", "fp32"): 19.5,
}
# CPU: no vendor figure applies; 0.094 TFLOP/s per thread is the fp32 4096^3 matmul ceiling measured on the
# reference machine (shared/reference/baselines.md section 9). Set train.peak_tflops for a meaningful CPU MFU.
CPU_TFLOPS_PER_THREAD = 0.094


def closed_form_model_flops(B: int, s: int, l: int, h: int, V: int) -> float:
    return 72.0 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))


def closed_form_full_recompute_flops(B: int, s: int, l: int, h: int, V: int) -> float:
    return 96.0 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))


def layer_forward_flops(B: int, s: int, h: int, ffn: int, swiglu: bool) -> tuple[float, float]:
    """(dense GEMM FLOPs, attention-core FLOPs) of one transformer layer's forward."""
    qkv_proj = 2 * B * s * h * 3 * h + 2 * B * s * h * h
    mlp = 2 * B * s * h * ffn * (3 if swiglu else 2)
    core = 2 * B * s * s * h * 2  # QK^T and AV
    return float(qkv_proj + mlp), float(core)


def model_flops(B: int, s: int, l: int, h: int, V: int, ffn: int | None = None, swiglu: bool = False,
                recompute: str = "none") -> float:
    """FLOPs of one training iteration (forward + backward = 3 x forward) of B sequences; with ``recompute`` set,
    the hardware FLOPs including the recomputed forward work."""
    ffn = 4 * h if ffn is None else ffn
    dense, core = layer_forward_flops(B, s, h, ffn, swiglu)
    logits = 2.0 * B * s * h * V
    total = 3 * (l * (dense + core) + logits)
    if recompute == "full":
        total += l * (dense + core)
    elif recompute == "selective":
        total += l * core
    return total


def flops_per_iteration(model_cfg, global_batch: int, seq_len: int, recompute: str = "none") -> float:
    return model_flops(global_batch, seq_len, model_cfg.num_layers, model_cfg.hidden_size,
                       model_cfg.padded_vocab_size, model_cfg.ffn_hidden_size, model_cfg.mlp == "swiglu", recompute)


def peak_flops(device: torch.device, dtype: torch.dtype, override_tflops: float | None = None) -> float:
    """Per-device peak FLOP/s: ``override_tflops`` if set, else from the device name; CPU see above."""
    if override_tflops:
        return override_tflops * 1e12
    kind = "bf16" if dtype == torch.bfloat16 else "fp32"
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device).lower()
        for (dev, key, k), tf in PEAK_TFLOPS.items():
            if dev == "cuda" and key in name and k == kind:
                return tf * 1e12
        return 989e12 if kind == "bf16" else 67e12
    return CPU_TFLOPS_PER_THREAD * torch.get_num_threads() * 1e12
