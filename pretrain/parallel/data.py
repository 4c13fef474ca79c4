"""Data parallelism on the "dp" mesh dimension with FSDP2 (``fully_shard``: parameters, gradients and optimizer
state sharded, ZeRO-3; ``reshard_after_forward=False`` keeps parameters gathered between forward and backward,
ZeRO-2-like) or ``replicate`` (parameters replicated, gradients all-reduced). Both reduce gradients in buckets, one
per transformer block plus one for the rest, launched as each block's backward finishes (overlapped with the
backward of the blocks before it), averaged over dp, in fp32 when computing in bf16.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.distributed._composable.replicate_with_fsdp import replicate
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def mixed_precision(compute_dtype: torch.dtype) -> MixedPrecisionPolicy:
    """bf16 compute from fp32 master weights, gradients reduced in fp32."""
    if compute_dtype == torch.float32:
        return MixedPrecisionPolicy()
    return MixedPrecisionPolicy(param_dtype=compute_dtype, reduce_dtype=torch.float32)


def apply_dp(model: nn.Module, dp_mesh: DeviceMesh, mode: str, compute_dtype: torch.dtype,
             reshard_after_forward: bool = True) -> nn.Module:
    mp = mixed_precision(compute_dtype)
    if mode == "fsdp":
        for block in model.layers.values():
            fully_shard(block, mesh=dp_mesh, mp_policy=mp, reshard_after_forward=reshard_after_forward)
        fully_shard(model, mesh=dp_mesh, mp_policy=mp, reshard_after_forward=reshard_after_forward)
    elif mode == "replicate":
        for block in model.layers.values():
            replicate(block, mesh=dp_mesh, mp_policy=mp)
        replicate(model, mesh=dp_mesh, mp_policy=mp)
    else:
        raise ValueError(f"unknown dp mode {mode!r}")
    return model
