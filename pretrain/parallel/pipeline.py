"""Pipeline parallelism with ``torch.distributed.pipelining``: the model is cut into ``pp * vpp`` stages by layer
ranges (stage 0 also holds the embeddings, the last stage the final norm and the output head); pipeline rank ``r``
holds stages ``r, r + pp, r + 2 pp, ...`` (Megatron's interleaved assignment), run by ``Schedule1F1B`` (one stage per
rank) or ``ScheduleInterleaved1F1B`` (``vpp > 1`` virtual stages per rank).

Tied embeddings across stages (Megatron's embedding group): the first and the last stage each hold a copy of the
weight, initialised identically; ``sync_tied_grads`` sums their gradients after backward so the copies stay equal.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from pretrain.config import ModelConfig
from pretrain.model import GPT


def stage_layers(num_layers: int, num_stages: int, stage: int) -> range:
    per = num_layers // num_stages
    return range(stage * per, (stage + 1) * per)


def stages_of_rank(pp_rank: int, pp: int, vpp: int) -> list[int]:
    return [pp_rank + v * pp for v in range(vpp)]


def build_stage_model(cfg: ModelConfig, stage: int, num_stages: int, device: torch.device) -> GPT:
    """The GPT restricted to one pipeline stage (the whole model for ``num_stages == 1``), initialised on
    ``device`` with the same values the whole model would have."""
    with torch.device("meta"):
        model = GPT(cfg)
    keep = set(stage_layers(cfg.num_layers, num_stages, stage))
    for name in list(model.layers.keys()):
        if int(name) not in keep:
            del model.layers[name]
    if stage != 0:
        model.embed = None
        model.pos_embed = None
    if stage != num_stages - 1:
        model.norm = None
        model.lm_head = None
    model.to_empty(device=device)
    if cfg.tie_embeddings and model.embed is not None and model.lm_head is not None:
        model.lm_head.weight = model.embed.weight
    model.init_weights()
    return model


def make_stages(parts: list[nn.Module], stage_ids: list[int], num_stages: int, device: torch.device,
                group: dist.ProcessGroup) -> list:
    from torch.distributed.pipelining import PipelineStage  # imported on use: 1.4 s that one process never needs

    return [PipelineStage(part, sid, num_stages, device, group=group) for part, sid in zip(parts, stage_ids)]


def make_schedule(stages: list[PipelineStage], n_microbatches: int, loss_fn, interleaved: bool):
    """Gradients are scaled by 1 / n_microbatches (``loss_fn`` returns a micro-batch mean)."""
    from torch.distributed.pipelining import Schedule1F1B, ScheduleInterleaved1F1B

    if interleaved:
        return ScheduleInterleaved1F1B(stages, n_microbatches, loss_fn=loss_fn, scale_grads=True)
    assert len(stages) == 1
    return Schedule1F1B(stages[0], n_microbatches, loss_fn=loss_fn, scale_grads=True)


@torch.no_grad()
def sync_tied_grads(parts: list[nn.Module], embed_group: dist.ProcessGroup | None) -> None:
    """Sum the gradients of the tied embedding / output-head copies held by the first and the last stage."""
    if embed_group is None:
        return
    for part in parts:
        for mod in (part.embed, part.lm_head):
            if mod is None or (part.embed is not None and part.lm_head is not None):
                continue
            grad = mod.weight.grad
            local = grad.to_local() if hasattr(grad, "to_local") else grad
            dist.all_reduce(local, group=embed_group)


def tied_duplicates(parts: list[nn.Module], pp_rank: int, pp: int, tied: bool) -> set[int]:
    """ids of parameters that duplicate one held elsewhere (the last stage's copy of the tied embedding),
    left out of the gradient norm."""
    if not tied or pp == 1:
        return set()
    return {id(p.lm_head.weight) for p in parts if p.lm_head is not None and p.embed is None}
