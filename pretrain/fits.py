"""Does a config fit the machine at all? A lower bound of each rank's memory, checked before anything is allocated.

A model too large for the device used to fail deep inside ``torch.empty`` with a 400 TB allocation error (or an
out-of-memory kill on the host). The bound counts only memory training cannot do without:

- weights, gradients and AdamW's two moments, 16 bytes per parameter in fp32, spread evenly over all ranks (as
  FSDP with tensor and pipeline parallelism at best spreads them);
- one fp32 hidden state of a micro-batch (``micro_batch x seq_len x hidden``), which every stage holds;
- the step's tokens of the rank's data-parallel share (``global_batch / dp x (seq_len + 1)`` int64), which a step
  loads at once and moves to the device; the host holds them twice (the step's and the next, prefetched).

Activations saved for backward, communication buffers and the allocator's slack come on top, so a config under
the bound can still run out of memory; one over it never fits, and the run stops at once saying what to change.
"""
from __future__ import annotations

import os

import torch

from pretrain.config import Config, ConfigError

BYTES_PER_PARAM = 16  # fp32 weight + fp32 gradient + AdamW exp_avg + exp_avg_sq


def param_count(cfg: Config) -> int:
    """Parameters of the whole GPT from its (finalized) [model] table: embeddings, attention, MLP (norms and
    biases, a few per layer, are left out: this is a lower bound)."""
    m = cfg.model
    h, f, vocab = m.hidden_size, m.ffn_hidden_size, m.padded_vocab_size or m.vocab_size or 0
    per_layer = 4 * h * h + (3 if m.mlp == "swiglu" else 2) * h * f
    embeddings = vocab * h * (1 if m.tie_embeddings else 2)
    if m.position == "learned":
        embeddings += (m.max_seq_len or cfg.data.seq_len) * h
    return m.num_layers * per_layer + embeddings


def step_token_bytes(cfg: Config, world_size: int) -> int:
    """Bytes of one step's tokens on a rank (its data-parallel share of the largest global batch, int64)."""
    p = cfg.parallel
    dp = p.dp or max(1, world_size // max(1, p.tp * p.pp))
    return cfg.train.global_batch // max(1, dp) * (cfg.data.seq_len + 1) * 8


def rank_lower_bound(cfg: Config, world_size: int) -> int:
    """Bytes one rank needs at the very least on its device (see the module doc)."""
    static = param_count(cfg) * BYTES_PER_PARAM // max(1, world_size)
    hidden = cfg.train.micro_batch * cfg.data.seq_len * cfg.model.hidden_size * 4
    return static + hidden + step_token_bytes(cfg, world_size)


def device_bytes(device: torch.device) -> int | None:
    """Memory one rank may use: the GPU's total, or the host's available memory shared by the ranks on it."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[1]
    from curate.host_memory import available_bytes

    avail = available_bytes()
    if avail is None:
        return None
    return avail // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))


def check_fits(cfg: Config, world_size: int, device: torch.device) -> None:
    need, have = rank_lower_bound(cfg, world_size), device_bytes(device)
    m, t = cfg.model, cfg.train
    tokens = step_token_bytes(cfg, world_size)
    if have is not None and need > have:
        raise ConfigError(
            f"this config cannot fit: each of the {world_size} rank(s) needs at least {need / 2**30:,.1f} GiB "
            f"({param_count(cfg):,} parameters x {BYTES_PER_PARAM} bytes for weights, gradients and AdamW, plus "
            f"one hidden state of {t.micro_batch} x {cfg.data.seq_len} x {m.hidden_size}, plus "
            f"{tokens / 2**30:,.1f} GiB for a step's tokens of train.global_batch = {t.global_batch}), and "
            f"{device.type} has {have / 2**30:,.1f} GiB per rank: lower model.hidden_size / model.num_layers / "
            "data.seq_len / train.micro_batch / train.global_batch, or spread it over more ranks")
    if device.type != "cpu":  # the host holds the step's tokens too, and the next step's, prefetched
        host = device_bytes(torch.device("cpu"))
        if host is not None and 2 * tokens > host:
            raise ConfigError(
                f"this config cannot fit: a step's tokens (train.global_batch = {t.global_batch} sequences of "
                f"data.seq_len + 1 = {cfg.data.seq_len + 1}) take {tokens / 2**30:,.1f} GiB per rank, held twice on "
                f"the host, which has {host / 2**30:,.1f} GiB per rank: lower train.global_batch or data.seq_len")
