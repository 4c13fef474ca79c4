"""Activation recomputation of a transformer block (``train.recompute``):

- ``none``: autograd keeps every activation the backward needs.
- ``selective``: op-level selective checkpointing (``torch.utils.checkpoint`` with a policy, as torchtitan's
  selective AC): the outputs of the matrix multiplications, of attention (SDPA, with its log-sum-exp) and of the
  sequence-parallel reduce-scatters are kept; everything else (norms, GeLU/SiLU, RoPE, residual adds, dtype casts)
  is recomputed in backward. Costs no matmul FLOPs, saves the pointwise activations (about half of a block's).
- ``full``: only the block input is kept; the whole block runs again in backward (one extra forward).
"""
from __future__ import annotations

import functools

import torch
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

MODES = ("none", "selective", "full")


def _save_ops() -> set:
    aten = torch.ops.aten
    ops = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default,
           aten._scaled_dot_product_flash_attention.default,
           aten._scaled_dot_product_efficient_attention.default,
           aten._scaled_dot_product_flash_attention_for_cpu.default}
    for name in ("_scaled_dot_product_cudnn_attention",):
        if hasattr(aten, name):
            ops.add(getattr(aten, name).default)
    functional = getattr(torch.ops, "_c10d_functional", None)
    if functional is not None and hasattr(functional, "reduce_scatter_tensor"):
        ops.add(functional.reduce_scatter_tensor.default)
    return ops


_SAVE = None


def selective_policy(ctx, op, *args, **kwargs) -> CheckpointPolicy:
    global _SAVE
    if _SAVE is None:
        _SAVE = _save_ops()
    return CheckpointPolicy.MUST_SAVE if op in _SAVE else CheckpointPolicy.PREFER_RECOMPUTE


def run_block(fn, mode: str, *args):
    """``fn(*args)`` with the activation recomputation ``mode`` (only while gradients are being recorded)."""
    if mode == "none" or not torch.is_grad_enabled():
        return fn(*args)
    if mode == "full":
        return checkpoint(fn, *args, use_reentrant=False)
    if mode == "selective":
        return checkpoint(fn, *args, use_reentrant=False,
                          context_fn=functools.partial(create_selective_checkpoint_contexts, selective_policy))
    raise ValueError(f"unknown recompute mode {mode!r}")
