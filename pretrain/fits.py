"""Does a config fit the machine at all? A lower bound of each rank's memory, checked before anything is allocated.

A model too large for the device used to fail deep inside ``torch.empty`` with a 400 TB allocation error (or an
out-of-memory kill on the host), and a micro-batch too large (``train.micro_batch = 1000000``) passed the check and
ran out of memory in the first forward. The bound counts only memory training cannot do without:

- weights, gradients and AdamW's two moments, 16 bytes per parameter in fp32, spread evenly over all ranks (as
  FSDP with tensor and pipeline parallelism at best spreads them);
- the activations autograd keeps for backward, for the micro-batches the pipeline schedule has in flight on the
  rank (``activation_bytes``, see ``layer_activation_bytes`` for the formula and its source), and on the last
  stage the logits of a micro-batch and their gradient (``micro_batch x seq_len x vocab / tp`` each);
- the step's tokens of the rank's data-parallel share (``global_batch / dp x (seq_len + 1)`` int64), which a step
  loads at once and moves to the device; the host holds them twice (the step's and the next, prefetched).

Communication buffers, workspaces, the allocator's slack and what eager mode keeps beyond the minimum come on top,
so a config under the bound can still run out of memory; one over it never fits, and the run stops at once saying
what to change (with a ``train.micro_batch`` that fits when the activations are what does not).
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
    h, f, vocab = m.hidden_size, m.ffn_hidden_size, _vocab(cfg)
    per_layer = 4 * h * h + (3 if m.mlp == "swiglu" else 2) * h * f
    embeddings = vocab * h * (1 if m.tie_embeddings else 2)
    if m.position == "learned":
        embeddings += (m.max_seq_len or cfg.data.seq_len) * h
    return m.num_layers * per_layer + embeddings


def _vocab(cfg: Config) -> int:
    m = cfg.model
    return m.padded_vocab_size or m.vocab_size or 0


def _dp(cfg: Config, world_size: int) -> int:
    p = cfg.parallel
    return max(1, p.dp or world_size // max(1, p.tp * p.pp))


def step_token_bytes(cfg: Config, world_size: int) -> int:
    """Bytes of one step's tokens on a rank (its data-parallel share of the largest global batch, int64)."""
    return cfg.train.global_batch // _dp(cfg, world_size) * (cfg.data.seq_len + 1) * 8


def activation_dtype_bytes(cfg: Config, device: torch.device | None) -> int:
    """Bytes of an activation element: 2 under bf16 autocast (``train.precision = bf16``, or ``auto`` on CUDA, as
    ``pretrain.train.compute_dtype`` picks), else 4."""
    prec = cfg.train.precision
    bf16 = prec == "bf16" or (prec == "auto" and device is not None and device.type == "cuda")
    return 2 if bf16 else 4


def layer_activation_bytes(cfg: Config, micro_batch: int, nbytes: int, recompute: str | None = None) -> int:
    """Bytes one transformer layer keeps for backward for one micro-batch, on one rank, at the least.

    Source: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models" (sec. 4),
    which counts ``s*b*h*(34 + 5*a*s/h)`` bytes per layer in 16-bit without recomputation: 4 sbh for the two
    LayerNorms' inputs, 11 sbh + 5 a s^2 b for attention (QKV input 2, Q and K 4, V 2, output-projection input
    2, dropout mask 1; scores, softmax and its dropout 5 a s^2 b), 19 sbh for the MLP (first linear's input 2,
    GeLU input 8 and output 8 with f = 4h, dropout mask 1). With tensor parallelism ``t`` the attention and MLP
    terms are divided by ``t``, and with sequence parallelism the norms' (and linears' replicated inputs) too.

    This model differs, and the count keeps only what must be held, whatever eager mode, torch.compile's
    partitioner (which recomputes pointwise ops) or ``train.recompute`` do, so that the check never refuses a
    config that fits:

    - no dropout: no masks, no dropout outputs;
    - attention through ``scaled_dot_product_attention`` (flash / memory-efficient kernels): no ``a s^2 b`` terms,
      the kernel keeps a log-sum-exp per head and position instead (fp32: ``4 a s b``);
    - kept per layer (``B`` bytes per element: 2 under bf16, 4 in fp32): the two norms' inputs ``2 B sbh`` (divided
      by t under sequence parallelism), Q, K, V and the attention output ``4 B sbh / t``, the MLP's up (and
      SwiGLU's gate) projection output ``B sbf / t`` each; the GeLU output, the linears' cast inputs and the
      norms' outputs (another ~14 sbh in 16-bit that eager mode keeps) are left out;
    - ``selective`` recomputation keeps the block input instead of the two norm inputs (``B sbh``, / t under
      sequence parallelism) and every matmul and attention output (the count takes those above);
    - ``full`` keeps only the block input (``B sbh``); the transient one layer's worth while it is recomputed
      in backward is counted by ``activation_bytes``.

    With the usual f = 4h (GeLU) in bf16 this is 20 sbh per layer, against Korthikanti's 34 (eager mode keeps
    about 36 here): conservative (a lower bound), not absurd."""
    m, p = cfg.model, cfg.parallel
    mode = recompute or cfg.train.recompute
    s, b, h, f, a = cfg.data.seq_len, micro_batch, m.hidden_size, m.ffn_hidden_size or 4 * m.hidden_size, m.num_heads
    t = max(1, p.tp)
    t_sp = t if p.sequence_parallel else 1
    sb = s * b
    if mode == "full":
        return nbytes * sb * h // t_sp
    ff = (2 if m.mlp == "swiglu" else 1) * nbytes * sb * f // t
    attn = 4 * nbytes * sb * h // t + 4 * sb * (a // t)
    norms = (1 if mode == "selective" else 2) * nbytes * sb * h // t_sp
    return norms + attn + ff


def logits_bytes(cfg: Config, micro_batch: int, nbytes: int) -> int:
    """The last stage's logits of one micro-batch and their gradient, which the loss's backward writes while the
    logits are still held (``pretrain.loss``): ``2 x micro_batch x seq_len x vocab / tp`` elements."""
    return 2 * micro_batch * cfg.data.seq_len * (_vocab(cfg) // max(1, cfg.parallel.tp)) * nbytes


def _micro_batches(cfg: Config, world_size: int, micro_batch: int) -> int:
    return max(1, cfg.train.global_batch // (micro_batch * _dp(cfg, world_size)))


def activation_bytes(cfg: Config, world_size: int, device: torch.device | None = None,
                     micro_batch: int | None = None) -> int:
    """Activations (and logits) one rank holds at the least at the peak of a step, on the rank that holds the
    most: the first pipeline stage, which has the most micro-batches in flight, or the last, which holds the
    logits. Micro-batches in flight (what ``torch.distributed.pipelining`` schedules; Korthikanti et al. sec. 4.2):
    1F1B runs ``min(pp, n_micro)`` forwards on the first rank before its first backward, each of ``L / pp``
    layers (L layers' worth, whatever pp); interleaved 1F1B ``(vpp - 1) pp + 2 (pp - 1) + 1`` chunks of
    ``L / (pp vpp)`` layers (about ``L (1 + (pp - 1) / (pp vpp))``); the last rank has one micro-batch of its
    layers in flight (interleaved: ``(vpp - 1) pp + 1`` chunks). Without pipeline parallelism micro-batches run
    one after another. Full recomputation adds one layer's activations, rebuilt during its backward (after
    the logits are freed)."""
    p, m = cfg.parallel, cfg.model
    b = micro_batch or cfg.train.micro_batch
    nbytes = activation_dtype_bytes(cfg, device)
    per_layer = layer_activation_bytes(cfg, b, nbytes)
    transient = layer_activation_bytes(cfg, b, nbytes, "none") if cfg.train.recompute == "full" else 0
    pp, vpp = max(1, p.pp), max(1, p.vpp)
    layers_per_chunk = max(1, m.num_layers // (pp * vpp))
    n_micro = _micro_batches(cfg, world_size, b)
    if pp == 1:
        first = last = 1
    elif vpp == 1:
        first, last = min(pp, n_micro), 1
    else:
        first = min((vpp - 1) * pp + 2 * (pp - 1) + 1, n_micro * vpp)
        last = min((vpp - 1) * pp + 1, n_micro * vpp)
    # the logits and their gradient are freed before the head's backward ends, so before any layer is recomputed
    first_bytes = first * layers_per_chunk * per_layer + transient
    last_bytes = last * layers_per_chunk * per_layer + max(transient, logits_bytes(cfg, b, nbytes))
    return max(first_bytes, last_bytes)


def rank_lower_bound(cfg: Config, world_size: int, device: torch.device | None = None,
                     micro_batch: int | None = None) -> int:
    """Bytes one rank needs at the very least on its device (see the module doc); ``device`` picks the
    activations' dtype (``train.precision = auto``: bf16 on CUDA)."""
    static = param_count(cfg) * BYTES_PER_PARAM // max(1, world_size)
    return static + step_token_bytes(cfg, world_size) + activation_bytes(cfg, world_size, device, micro_batch)


def _micro_batch_choices(cfg: Config, world_size: int) -> list[int]:
    """Values of train.micro_batch below the current one that the config's batch checks accept (global batch and
    ramp-up multiples of micro_batch x dp, at least pp micro-batches, a multiple of pp under interleaving)."""
    p, t = cfg.parallel, cfg.train
    dp = _dp(cfg, world_size)
    out = []
    for b in range(min(t.micro_batch - 1, t.global_batch // dp), 0, -1):
        unit = b * dp
        if t.global_batch % unit:
            continue
        if t.rampup_batch_size and len(t.rampup_batch_size) == 3:
            start, incr, _ = t.rampup_batch_size
            if start % unit or incr % unit or (p.pp > 1 and start // unit < p.pp):
                continue
        n = t.global_batch // unit
        if (p.pp > 1 and n < p.pp) or (p.vpp > 1 and n % p.pp):
            continue
        out.append(b)
    return out


def fitting_micro_batch(cfg: Config, world_size: int, device: torch.device | None, have: int) -> int | None:
    """The largest train.micro_batch below the config's whose lower bound fits in ``have`` bytes (None: none)."""
    choices = _micro_batch_choices(cfg, world_size)
    # the bound grows with the micro-batch: bisect over the (descending) choices for the first that fits
    lo, hi = 0, len(choices)
    while lo < hi:
        mid = (lo + hi) // 2
        if rank_lower_bound(cfg, world_size, device, choices[mid]) <= have:
            hi = mid
        else:
            lo = mid + 1
    return choices[lo] if lo < len(choices) else None


def device_bytes(device: torch.device) -> int | None:
    """Memory one rank may use: the GPU's total, or the host's available memory shared by the ranks on it."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[1]
    from curate.host_memory import available_bytes

    avail = available_bytes()
    if avail is None:
        return None
    return avail // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))


def gib(n: int) -> str:
    """``n`` bytes as the messages about memory say it: ``"1.5 GiB"``."""
    return f"{n / 2**30:,.1f} GiB"


def check_fits(cfg: Config, world_size: int, device: torch.device) -> None:
    have = device_bytes(device)
    m, t = cfg.model, cfg.train
    tokens = step_token_bytes(cfg, world_size)
    static = param_count(cfg) * BYTES_PER_PARAM // max(1, world_size)
    act = activation_bytes(cfg, world_size, device)
    need = static + tokens + act
    lower_all = ("lower model.hidden_size / model.num_layers / data.seq_len / train.micro_batch / "
                 "train.global_batch, or spread it over more ranks")
    if have is not None and need > have:
        what = (f"this config cannot fit: each of the {world_size} rank(s) needs at least {gib(need)} "
                f"({param_count(cfg):,} parameters x {BYTES_PER_PARAM} bytes for weights, gradients and AdamW: "
                f"{gib(static)}; activations and logits of train.micro_batch = {t.micro_batch} sequences of "
                f"data.seq_len = {cfg.data.seq_len} (hidden {m.hidden_size}, {m.num_layers} layers, vocabulary "
                f"{_vocab(cfg):,}, train.recompute = {t.recompute!r}): {gib(act)}; a step's tokens of "
                f"train.global_batch = {t.global_batch}: {gib(tokens)}), and {device.type} has {gib(have)} per rank")
        if static + tokens <= have:  # the micro-batch's activations are what does not fit
            fit = fitting_micro_batch(cfg, world_size, device, have)
            if fit is not None:
                raise ConfigError(f"{what}: set train.micro_batch = {fit} (or less; train.global_batch stays a "
                                  f"multiple of micro_batch x dp), or {lower_all}")
            if t.recompute != "full":
                full = _with_recompute(cfg, "full")
                if rank_lower_bound(full, world_size, device) <= have or \
                        fitting_micro_batch(full, world_size, device, have) is not None:
                    raise ConfigError(f"{what}: lower train.micro_batch, or set train.recompute = 'full' (keeps one "
                                      f"hidden state per layer), or {lower_all}")
            raise ConfigError(f"{what}: even train.micro_batch = 1 does not fit: {lower_all}")
        raise ConfigError(f"{what}: {lower_all}")
    _check_eval_batch(cfg, world_size, device, have, static + tokens)
    if device.type != "cpu":  # the host holds the step's tokens too, and the next step's, prefetched
        host = device_bytes(torch.device("cpu"))
        if host is not None and 2 * tokens > host:
            raise ConfigError(
                f"this config cannot fit: a step's tokens (train.global_batch = {t.global_batch} sequences of "
                f"data.seq_len + 1 = {cfg.data.seq_len + 1}) take {tokens / 2**30:,.1f} GiB per rank, held twice on "
                f"the host, which has {host / 2**30:,.1f} GiB per rank: lower train.global_batch or data.seq_len")


def _with_recompute(cfg: Config, mode: str) -> Config:
    import copy

    other = copy.deepcopy(cfg)
    other.train.recompute = mode
    return other


def eval_logits_bytes(batch: int, seq_len: int, vocab: int, nbytes: int) -> int:
    """One evaluation forward's logits on a rank (``batch x seq_len x vocab`` elements; no gradient), the one
    allocation of an evaluation that grows with its batch size."""
    return batch * seq_len * vocab * nbytes


def fitting_eval_batch(room: int, seq_len: int, vocab: int, nbytes: int) -> int:
    """The largest evaluation batch whose logits fit in ``room`` bytes (0: not even one sequence)."""
    return max(0, room) // max(1, seq_len * vocab * nbytes)


def _check_eval_batch(cfg: Config, world_size: int, device: torch.device, have: int | None, held: int) -> None:
    """[[eval.tasks]] run on the training ranks with ``eval.batch_size`` sequences per forward (``train.micro_batch``
    under pipeline parallelism, which the training bound covers): its logits come on top of what training holds
    (weights, gradients, optimizer state, the step's tokens), so a batch size of a million passed the check and
    ran out of memory at the first evaluation, after the training steps before it."""
    e = cfg.eval
    if have is None or not e.tasks or not e.batch_size or cfg.parallel.pp > 1:
        return
    nbytes = activation_dtype_bytes(cfg, device)
    vocab = _vocab(cfg) // max(1, cfg.parallel.tp)
    need = eval_logits_bytes(e.batch_size, cfg.data.seq_len, vocab, nbytes)
    if held + need <= have:
        return
    fit = fitting_eval_batch(have - held, cfg.data.seq_len, vocab, nbytes)
    hint = (f"set eval.batch_size = {fit} (or less)" if fit else
            "lower data.seq_len or the model's size, or spread it over more ranks")
    raise ConfigError(f"eval.batch_size = {e.batch_size} cannot fit: one evaluation forward's logits "
                      f"({e.batch_size} x data.seq_len {cfg.data.seq_len} x vocabulary {vocab:,}) take {gib(need)} "
                      f"on top of training's {gib(held)}, and {device.type} has {gib(have)} per rank: {hint}")
