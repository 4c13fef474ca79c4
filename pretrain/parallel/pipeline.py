"""Pipeline parallelism with ``torch.distributed.pipelining``: the model is cut into ``pp * vpp`` stages by layer
ranges (stage 0 also holds the embeddings, the last stage the final norm and the output head; with
``parallel.pp_balance = "flops"`` the split counts those as layers' worth of work, ``balanced_stage_layers``);
pipeline rank ``r`` holds stages ``r, r + pp, r + 2 pp, ...`` (Megatron's interleaved assignment), run by
``Schedule1F1B`` (one stage per rank) or ``ScheduleInterleaved1F1B`` (``vpp > 1`` virtual stages per rank).

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
    """The even split (``parallel.pp_balance = "even"``)."""
    per = num_layers // num_stages
    return range(stage * per, (stage + 1) * per)


def stage_costs(cfg: ModelConfig, seq_len: int) -> tuple[float, float]:
    """(embedding, output head) in layers' worth of work. The head (final norm, logits, loss): the FLOPs of the
    logits over those of one layer, 2 h V / (the layer's forward FLOPs per token), about 1.75 layers at h = 2048,
    V = 50k, s = 2048. The embedding: one layer (Megatron's account-for-embedding convention: its lookup is cheap
    but its V x h gradient, optimizer update and memory are not)."""
    from pretrain.flops import layer_forward_flops

    dense, core = layer_forward_flops(1, seq_len, cfg.hidden_size, cfg.ffn_hidden_size, cfg.mlp == "swiglu")
    per_token = (dense + core) / seq_len
    return 1.0, 2.0 * cfg.hidden_size * cfg.padded_vocab_size / per_token


def balanced_stage_layers(num_layers: int, num_stages: int, first_extra: float, last_extra: float) -> list[range]:
    """Contiguous layer ranges, at least one layer per stage, minimising the most loaded stage's cost (layers,
    plus ``first_extra`` on stage 0 and ``last_extra`` on the last stage); ties: the smallest sum of squares."""
    if num_stages == 1:
        return [range(num_layers)]
    # best[s][n] = (max cost, sum of squares, split) for the first s stages holding the first n layers
    best: list[dict] = [{0: (0.0, 0.0, ())}]
    for s in range(num_stages):
        nxt: dict = {}
        remaining = num_stages - s - 1
        for used, (mx, sq, split) in best[s].items():
            for k in range(1, num_layers - used - remaining + 1):
                if remaining == 0 and used + k != num_layers:
                    continue
                cost = k + (first_extra if s == 0 else 0.0) + (last_extra if s == num_stages - 1 else 0.0)
                cand = (max(mx, cost), sq + cost * cost, split + (k,))
                if used + k not in nxt or cand[:2] < nxt[used + k][:2]:
                    nxt[used + k] = cand
        best.append(nxt)
    split = best[num_stages][num_layers][2]
    out, start = [], 0
    for k in split:
        out.append(range(start, start + k))
        start += k
    return out


def layer_ranges(cfg: ModelConfig, num_stages: int, balance: str, seq_len: int) -> list[range]:
    if balance == "even":
        return [stage_layers(cfg.num_layers, num_stages, s) for s in range(num_stages)]
    first, last = stage_costs(cfg, seq_len)
    return balanced_stage_layers(cfg.num_layers, num_stages, first, last)


def stages_of_rank(pp_rank: int, pp: int, vpp: int) -> list[int]:
    return [pp_rank + v * pp for v in range(vpp)]


def build_stage_model(cfg: ModelConfig, stage: int, num_stages: int, device: torch.device | None = None,
                      layers: range | None = None) -> GPT:
    """The GPT restricted to one pipeline stage (the whole model for ``num_stages == 1``), holding ``layers``
    (default: the even split). On the meta device when ``device`` is None (``materialize`` it after the parallel
    plans); else initialised on ``device`` with the same values the whole model would have."""
    with torch.device("meta"):
        model = GPT(cfg)
    keep = set(stage_layers(cfg.num_layers, num_stages, stage) if layers is None else layers)
    for name in list(model.layers.keys()):
        if int(name) not in keep:
            del model.layers[name]
    if stage != 0:
        model.embed = None
        model.pos_embed = None
    if stage != num_stages - 1:
        model.norm = None
        model.lm_head = None
    if cfg.tie_embeddings and model.embed is not None and model.lm_head is not None:
        model.lm_head.weight = model.embed.weight
    if device is not None:
        materialize(model, device)
    return model


def materialize(model: GPT, device: torch.device) -> GPT:
    """Allocate a meta-device model (or its tensor/data-parallel shards, after the plans) on ``device`` and write
    Megatron's init into what this rank holds."""
    tied = model.embed is not None and model.lm_head is not None and model.lm_head.weight is model.embed.weight
    model.to_empty(device=device)
    if tied and model.lm_head.weight is not model.embed.weight:
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
