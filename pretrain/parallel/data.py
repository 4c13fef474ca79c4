"""Data parallelism on the "dp" mesh dimension with FSDP2 (``fully_shard``: parameters, gradients and optimizer
state sharded, ZeRO-3; ``reshard_after_forward=False`` keeps parameters gathered between forward and backward,
ZeRO-2-like) or ``replicate`` (parameters replicated, gradients all-reduced). Both reduce gradients in buckets, one
per transformer block plus one for the rest, launched as each block's backward finishes (overlapped with the
backward of the blocks before it), averaged over dp, in fp32 when computing in bf16.

Gradient accumulation over micro-batches (``parallel.fsdp_reduce_every_microbatch``, on by default): FSDP
reduce-scatters every micro-batch's gradients and accumulates the fp32 shard, so a rank never holds more than
1/dp of the gradients between micro-batches (ZeRO-3's saving), at the cost of one reduce-scatter per micro-batch
instead of one per step. Off, only the last micro-batch synchronises: fewer collectives, but every rank keeps
unsharded fp32 gradients of all its parameters (4 bytes x parameters) until the step. ``replicate`` always
synchronises only on the last micro-batch (its gradients are whole anyway).
"""
from __future__ import annotations

import torch
from torch import nn
from torch.distributed._composable.replicate_with_fsdp import replicate
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def mixed_precision(compute_dtype: torch.dtype, root: bool = False) -> MixedPrecisionPolicy:
    """The data-parallel wrappers' part of the precision recipe (train.precision; the forward's autocast is in
    ``pretrain.trainer.Trainer``): fp32 master weights, the blocks' weights gathered (and used) in
    ``compute_dtype``, the root's (embeddings, final norm, head) kept fp32 as without data parallelism (autocast
    rounds them per op), the block inputs NOT cast (the residual stream stays fp32), gradients reduced in fp32."""
    if compute_dtype == torch.float32:
        return MixedPrecisionPolicy()
    return MixedPrecisionPolicy(param_dtype=None if root else compute_dtype, reduce_dtype=torch.float32,
                                cast_forward_inputs=False)


def apply_dp(model: nn.Module, dp_mesh: DeviceMesh, mode: str, compute_dtype: torch.dtype,
             reshard_after_forward: bool = True) -> nn.Module:
    block_mp, root_mp = mixed_precision(compute_dtype), mixed_precision(compute_dtype, root=True)
    if mode == "fsdp":
        for block in model.layers.values():
            fully_shard(block, mesh=dp_mesh, mp_policy=block_mp, reshard_after_forward=reshard_after_forward)
        fully_shard(model, mesh=dp_mesh, mp_policy=root_mp, reshard_after_forward=reshard_after_forward)
    elif mode == "replicate":
        for block in model.layers.values():
            replicate(block, mesh=dp_mesh, mp_policy=block_mp)
        replicate(model, mesh=dp_mesh, mp_policy=root_mp)
    else:
        raise ValueError(f"unknown dp mode {mode!r}")
    return model
