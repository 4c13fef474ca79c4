"""Tensor (+ sequence) parallelism for ``pretrain.model.GPT`` as DTensor plans (``parallelize_module``).

Megatron's layout: q/k/v and the MLP's up/gate projections are column-parallel (split by output features, i.e. by
heads), o_proj and down_proj row-parallel; the embedding is vocab-parallel (rows) and the tied output head
column-parallel by vocabulary, its logits left vocab-sharded for ``loss_parallel()`` (cross entropy without
gathering [B, T, V]). With sequence parallelism the residual stream, norms and the position embedding work on
``T / tp`` tokens: all-gather before the column-parallel layers, reduce-scatter after the row-parallel ones.
Modules the plan replicates (norms without sequence parallelism, the position table) still get DTensor
parameters, so that every parameter lives on the same mesh (gradient clipping, FSDP).
"""
from __future__ import annotations

import torch.nn as nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_module
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    ParallelStyle,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)


class ReplicateParallel(ParallelStyle):
    """Parameters replicated (as DTensors) over the mesh; the first input, a plain tensor holding the whole
    ``input_layout`` value, is redistributed to ``desired_layout`` (Replicate -> Shard is a local slice); the
    output is handed on as a local tensor."""

    def __init__(self, input_layout=Replicate(), desired_layout=Replicate()):
        super().__init__()
        self.input_layout, self.desired_layout = input_layout, desired_layout

    def _prepare_input(self, module, inputs, mesh):
        x = inputs[0]
        if not isinstance(x, DTensor):
            x = DTensor.from_local(x, mesh, (self.input_layout,), run_check=False)
        if x.placements != (self.desired_layout,):
            x = x.redistribute(mesh, (self.desired_layout,))
        return (x, *inputs[1:])

    @staticmethod
    def _prepare_output(module, outputs, mesh):
        return outputs.to_local() if isinstance(outputs, DTensor) else outputs

    def _apply(self, module: nn.Module, device_mesh: DeviceMesh) -> nn.Module:
        return distribute_module(module, device_mesh, None, self._prepare_input, self._prepare_output)


def block_plan(mlp_has_gate: bool, sequence_parallel: bool) -> dict[str, ParallelStyle]:
    if sequence_parallel:
        norm = SequenceParallel()
        to_full = {"input_layouts": (Shard(1),), "desired_input_layouts": (Replicate(),)}
        out = Shard(1)
    else:
        norm = ReplicateParallel()
        to_full = None
        out = Replicate()
    plan: dict[str, ParallelStyle] = {
        "attn_norm": norm,
        "attn.q_proj": ColwiseParallel(),
        "attn.k_proj": ColwiseParallel(),
        "attn.v_proj": ColwiseParallel(),
        "attn.o_proj": RowwiseParallel(output_layouts=out),
        "mlp_norm": norm,
        "mlp.up_proj": ColwiseParallel(),
        "mlp.down_proj": RowwiseParallel(output_layouts=out),
    }
    if mlp_has_gate:
        plan["mlp.gate_proj"] = ColwiseParallel()
    if to_full:
        # attn(x, rope): gather x along the sequence, leave the RoPE table alone
        plan["attn"] = PrepareModuleInput(input_layouts=(Shard(1), None), desired_input_layouts=(Replicate(), None))
        plan["mlp"] = PrepareModuleInput(**to_full)
    return plan


def apply_tp(model: nn.Module, tp_mesh: DeviceMesh, sequence_parallel: bool) -> nn.Module:
    """Shard ``model`` (a GPT or a pipeline stage of one) over ``tp_mesh`` in place."""
    sp = sequence_parallel
    tied = model.embed is not None and model.lm_head is not None and model.lm_head.weight is model.embed.weight
    plan: dict[str, ParallelStyle] = {}
    if model.embed is not None:
        plan["embed"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1) if sp else Replicate())
        if model.pos_embed is not None:
            # positions [T]: each rank embeds its own T / tp slice under sequence parallelism
            plan["pos_embed"] = ReplicateParallel(Replicate(), Shard(0) if sp else Replicate())
    if model.norm is not None:
        plan["norm"] = SequenceParallel() if sp else ReplicateParallel()
    if model.lm_head is not None:
        plan["lm_head"] = ColwiseParallel(input_layouts=Shard(1) if sp else Replicate(), output_layouts=Shard(-1),
                                          use_local_output=False)
    parallelize_module(model, tp_mesh, plan)
    for block in model.layers.values():
        parallelize_module(block, tp_mesh, block_plan(block.mlp.swiglu, sp))
    if tied:  # the plan distributed the shared weight twice (same Shard(0) placement): share it again
        model.lm_head.weight = model.embed.weight
    return model
