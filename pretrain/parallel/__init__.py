"""Parallelism applied to the plain GPT from outside, in torchtitan's order, on the meta device: cut pipeline stages,
tensor/sequence parallel plans, activation recomputation, torch.compile, data parallelism (FSDP2 or replicate);
then each rank allocates and initialises only its shards.

    parts = build_model_parts(cfg, env)   # this rank's stage models, pipeline stages and schedules
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.distributed.tensor import DTensor

from pretrain.config import Config
from pretrain.loss import cross_entropy
from pretrain.parallel.data import apply_dp
from pretrain.parallel.mesh import Layout, ParallelEnv, init_parallel
from pretrain.parallel.pipeline import (
    build_stage_model,
    layer_ranges,
    make_schedule,
    materialize,
    make_stages,
    stages_of_rank,
    sync_tied_grads,
    tied_duplicates,
)
from pretrain.parallel.tensor import apply_tp

__all__ = ["Layout", "ParallelEnv", "init_parallel", "ModelParts", "build_model_parts", "apply_recompute"]


def apply_recompute(model: nn.Module, mode: str) -> None:
    """none | selective (op-level: matmul and attention outputs kept, the rest recomputed) | full (each block
    recomputed in backward); see ``pretrain.recompute``."""
    for block in model.layers.values():
        block.recompute = mode


@dataclass
class ModelParts:
    parts: list[nn.Module]  # this rank's model chunks (one per virtual pipeline stage)
    stage_ids: list[int]
    num_stages: int
    env: ParallelEnv
    tied: bool
    interleaved: bool = False
    stages: list | None = None  # PipelineStage per part when pp > 1
    loss_fn: object = cross_entropy  # the (maybe compiled) loss
    _schedules: dict = field(default_factory=dict)

    @property
    def has_first_stage(self) -> bool:
        return 0 in self.stage_ids

    @property
    def has_last_stage(self) -> bool:
        return self.num_stages - 1 in self.stage_ids

    def schedule(self, n_microbatches: int):
        if n_microbatches not in self._schedules:
            self._schedules[n_microbatches] = make_schedule(self.stages, n_microbatches, self.loss_fn,
                                                            self.interleaved)
        return self._schedules[n_microbatches]

    @contextlib.contextmanager
    def scoring_schedule(self, n_microbatches: int, score_fn):
        """The training schedule of ``n_microbatches`` with its last stage returning ``score_fn(logits, target)``
        per micro-batch instead of the loss, for ``sched.eval`` (evaluation). The same schedule object, not a
        second one: a second schedule over the same stages would re-create their receive buffers without
        gradients, and the next training step's backward would not reach the earlier stages."""
        sched = self.schedule(n_microbatches)
        loss_fn = sched._loss_fn
        sched._loss_fn = score_fn
        try:
            yield sched
        finally:
            sched._loss_fn = loss_fn

    def parameters(self):
        seen = set()
        for part in self.parts:
            for p in part.parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield p

    @torch.no_grad()
    def finish_grads(self) -> None:
        """After backward: give every DTensor gradient its parameter's placements (DTensor leaves e.g. the
        vocab-parallel embedding's gradient replicated; Replicate -> Shard is a local slice), then sum the tied
        embedding copies of the first and last pipeline stages."""
        for p in self.parameters():
            g = p.grad
            if isinstance(g, DTensor) and g.placements != p.placements:
                p.grad = g.redistribute(g.device_mesh, p.placements)
        if self.tied:
            sync_tied_grads(self.parts, self.env.embed_group)

    def norm_exclusions(self) -> set[int]:
        return tied_duplicates(self.parts, self.env.pp_rank, self.env.layout.pp, self.tied)

    def train(self, mode: bool = True):
        for part in self.parts:
            part.train(mode)


def use_compile(cfg: Config, device: torch.device) -> bool:
    """``train.compile``: None means on for CUDA, off on CPU."""
    c = cfg.train.compile
    return device.type == "cuda" if c is None else bool(c)


def apply_compile(model: nn.Module, backend: str) -> None:
    """torch.compile in place (parameter names unchanged): each block, the final norm and the output head."""
    for block in model.layers.values():
        block.compile(backend=backend)
    for mod in (model.norm, model.lm_head):
        if mod is not None:
            mod.compile(backend=backend)


def build_model_parts(cfg: Config, env: ParallelEnv, compute_dtype: torch.dtype = torch.float32) -> ModelParts:
    """torchtitan's order: each stage is built on the meta device, the tensor-parallel plan, recomputation,
    torch.compile and the data-parallel wrapper are applied to it there, and only then is it allocated on the
    device and initialised: each rank allocates and draws only its own shards (``pretrain.init``)."""
    p = cfg.parallel
    num_stages = p.pp * p.vpp
    stage_ids = stages_of_rank(env.pp_rank, p.pp, p.vpp)
    ranges = layer_ranges(cfg.model, num_stages, p.pp_balance, cfg.data.seq_len)
    compile_on = use_compile(cfg, env.device)
    parts = []
    for sid in stage_ids:
        model = build_stage_model(cfg.model, sid, num_stages, None, ranges[sid])  # meta
        if p.tp > 1:
            apply_tp(model, env.submesh("tp"), p.sequence_parallel)
        apply_recompute(model, cfg.train.recompute)
        if compile_on:
            apply_compile(model, cfg.train.compile_backend)
        if p.dp > 1:
            apply_dp(model, env.submesh("dp"), p.dp_mode, compute_dtype, p.fsdp_reshard_after_forward)
        materialize(model, env.device)
        parts.append(model)
    mp = ModelParts(parts, stage_ids, num_stages, env, tied=cfg.model.tie_embeddings,
                    interleaved=p.pp_schedule == "interleaved_1f1b",
                    loss_fn=torch.compile(cross_entropy, backend=cfg.train.compile_backend) if compile_on
                    else cross_entropy)
    if p.pp > 1:
        mp.stages = make_stages(parts, stage_ids, num_stages, env.device, env.submesh("pp").get_group())
    return mp
