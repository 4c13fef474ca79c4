"""Megatron's initialisation, written into each rank's shard only (sharded initialisation).

Every parameter is drawn from its own CPU generator seeded by (seed, parameter name), so its values do not depend on
the layout: N(0, init_std) for weights and embeddings, N(0, init_std / sqrt(2 L)) for the output projections
(``o_proj``, ``down_proj``), ones for norm weights, zeros for biases. A parameter that is a DTensor (tensor or data
parallel shard) is filled with its local shard of those values without ever holding the whole tensor: the rows are
drawn in chunks of about ``CHUNK_ELEMS`` elements (CPU ``normal_`` draws 16 values at a time, so chunks of a multiple
of 16 elements give exactly the values of one draw of the whole tensor), and each chunk gives the rows and columns
this rank holds. Peak memory beyond the shard is one chunk.

The values are drawn on the CPU and copied to the parameter's device, so a model initialised on a GPU has the
same weights as on a CPU.
"""
from __future__ import annotations

import math
import zlib

import torch
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.placement_types import _StridedShard

CHUNK_ELEMS = 1 << 22  # 16 MiB of fp32 per chunk


def param_seed(seed: int, name: str) -> int:
    return (seed * 1_000_003 + zlib.crc32(name.encode())) % (2**63)


def init_rule(name: str, cfg) -> tuple[str, float]:
    """("ones" | "zeros" | "normal", std) for the parameter ``name`` of a GPT with ModelConfig ``cfg``."""
    leaf = name.rsplit(".", 1)[-1]
    if name.endswith("norm.weight"):
        return "ones", 0.0
    if leaf == "bias":
        return "zeros", 0.0
    std = cfg.init_std
    if name.endswith(("o_proj.weight", "down_proj.weight")):
        std = cfg.init_std / math.sqrt(2 * cfg.num_layers)
    return "normal", std


def _chunk_rows(shape: tuple[int, ...]) -> int:
    """Rows per chunk: a multiple of 16 elements, about CHUNK_ELEMS elements."""
    row = math.prod(shape[1:]) if len(shape) > 1 else 1
    step = 16 // math.gcd(row, 16)
    return step * max(1, CHUNK_ELEMS // (row * step))


def normal_chunks(shape: tuple[int, ...], std: float, seed: int):
    """Yield (first_row, values) covering a ``torch.empty(shape).normal_(0, std, generator=seeded)`` in row chunks,
    with the same values as that single draw."""
    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed)
    rows = shape[0]
    numel = math.prod(shape)
    per = _chunk_rows(shape)
    row_elems = numel // rows if rows else 0
    r0 = 0
    while r0 < rows:
        n = min(per, rows - r0)
        # the last draw must be >= 16 values (a shorter tail re-draws across the chunk boundary): merge it
        if r0 + n < rows and (rows - r0 - n) * row_elems < 16:
            n = rows - r0
        yield r0, torch.empty((n, *shape[1:]), dtype=torch.float32).normal_(0.0, std, generator=gen)
        r0 += n


def _local_indices(p: DTensor, dim: int) -> torch.Tensor | None:
    """Global indices along ``dim`` of the elements this rank holds (None: all of them), by splitting an index
    vector with the parameter's own placements (a local split, no communication)."""
    if not any(isinstance(pl, (Shard, _StridedShard)) and pl.dim == dim for pl in p.placements):
        return None
    size = p.shape[dim]
    pls = []
    for pl in p.placements:
        if isinstance(pl, _StridedShard) and pl.dim == dim:
            pls.append(_StridedShard(0, split_factor=pl.split_factor))
        elif isinstance(pl, Shard) and not isinstance(pl, _StridedShard) and pl.dim == dim:
            pls.append(Shard(0))
        else:
            pls.append(Replicate())
    idx = torch.arange(size, dtype=torch.int64)
    # src_data_rank=None: each rank only slices its own part (no communication)
    return distribute_tensor(idx, p.device_mesh, pls, src_data_rank=None).to_local().cpu()


@torch.no_grad()
def fill_normal(p: torch.Tensor, std: float, seed: int) -> None:
    """Write this rank's part of N(0, std) (seeded) into ``p`` (a tensor or a DTensor), chunk by chunk."""
    shape = tuple(p.shape)
    if not isinstance(p, DTensor):
        for r0, vals in normal_chunks(shape, std, seed):
            p[r0:r0 + len(vals)].copy_(vals)
        return
    local = p.to_local()
    if local.numel() == 0:
        return
    rows = _local_indices(p, 0)
    cols = _local_indices(p, 1) if p.ndim > 1 else None
    rows = torch.arange(shape[0]) if rows is None else rows.cpu()
    cols = None if cols is None else cols.cpu()
    order = torch.argsort(rows)
    sorted_rows = rows[order]
    for r0, vals in normal_chunks(shape, std, seed):
        lo = int(torch.searchsorted(sorted_rows, r0))
        hi = int(torch.searchsorted(sorted_rows, r0 + len(vals)))
        if lo == hi:
            if lo == len(sorted_rows):
                break  # past this rank's last row
            continue
        where = order[lo:hi]  # local row positions
        block = vals[sorted_rows[lo:hi] - r0]
        if cols is not None:
            block = block[:, cols]
        local[where.to(local.device)] = block.to(device=local.device, dtype=local.dtype)


@torch.no_grad()
def fill_const(p: torch.Tensor, value: float) -> None:
    (p.to_local() if isinstance(p, DTensor) else p).fill_(value)


@torch.no_grad()
def init_parameters(named_params, cfg, seed: int, tied: bool) -> None:
    """Initialise ``(name, parameter)`` pairs of a GPT (or of a stage / shard of one) in place."""
    for name, p in named_params:
        rule, std = init_rule(name, cfg)
        if rule == "ones":
            fill_const(p, 1.0)
        elif rule == "zeros":
            fill_const(p, 0.0)
        else:
            if name == "lm_head.weight" and tied:
                name = "embed.weight"  # a pipeline's last stage holds its own copy of the tied weight
            fill_normal(p, std, param_seed(seed, name))
