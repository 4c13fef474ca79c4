"""Scoring requests with the model as this rank holds it, at any layout: each request's summed log-probability of
its continuation and whether every continuation token is the greedy choice.

Requests are spread over the data-parallel ranks (longest first, round robin); every dp rank runs the same number
of forwards (short shares padded with empty rows) so the collectives of tensor and pipeline parallelism and FSDP
line up. Under pipeline parallelism each forward is a fixed ``[micro_batch, window]`` block through a pipeline
schedule whose last stage returns the scores; otherwise rows are padded to the batch's longest. Log-probabilities
are taken in fp32 over the real vocabulary (the padding columns of a tensor-parallel vocabulary are cut off).
The results are summed over the world (only one tensor-parallel rank of the last stage contributes), so every rank
ends with every request's score. Requests are built a batch at a time (a ``RequestList`` builds one when asked), and
the scores come back as one array (``Scores``), so a task of a million windows holds no million objects."""
from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from pretrain.eval.request_lists import Request

IGNORE = -100


class Scores(Sequence):
    """Every request's ``(log-likelihood, is_greedy)``, held as one float64 array ``[N, 2]``."""

    def __init__(self, array: np.ndarray):
        self.array = np.asarray(array, dtype=np.float64).reshape(-1, 2)

    def __len__(self) -> int:
        return len(self.array)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        ll, greedy = self.array[i]
        return float(ll), bool(greedy > 0.5)

    @property
    def ll(self) -> np.ndarray:
        return self.array[:, 0]

    @property
    def greedy(self) -> np.ndarray:
        return self.array[:, 1] > 0.5

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and len(other) == len(self) and all(a == b for a, b in zip(self, other))


def request_lengths(requests) -> np.ndarray:
    """Every request's number of tokens (a ``RequestList`` tells them without building the requests)."""
    lengths = getattr(requests, "lengths", None)
    if lengths is not None:
        return np.asarray(lengths(), dtype=np.int64)
    return np.fromiter((len(q.tokens) for q in requests), dtype=np.int64, count=len(requests))


def row_scores(logits, target: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """logits [R, T, V'] (a DTensor under tensor parallelism), target [R, T] with IGNORE where not scored ->
    [R, 2] float64: (summed log-probability, 1.0 if every scored token is the argmax else 0.0)."""
    if isinstance(logits, DTensor):
        logits = logits.full_tensor()
    out = torch.zeros(target.shape[0], 2, dtype=torch.float64, device=target.device)
    for r in range(target.shape[0]):  # one row's fp32 [T, V] at a time
        scored = target[r] != IGNORE
        if not bool(scored.any()):
            continue
        z = logits[r][scored][:, :vocab_size].float()
        y = target[r][scored]
        lp = torch.log_softmax(z, dim=-1).gather(1, y[:, None])[:, 0]
        out[r, 0] = lp.sum().double()
        out[r, 1] = float(bool((z.argmax(dim=-1) == y).all()))
    return out


def pack_rows(reqs: list[Request | None], window: int, length: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and targets [R, length] (``length`` None: the longest row): a request's last ``window`` inputs,
    right-padded; only its last ``n_cont`` targets scored. ``None`` rows are empty padding."""
    rows = []
    for q in reqs:
        if q is None:
            rows.append(([0], [IGNORE]))
            continue
        x, y = q.tokens[:-1][-window:], q.tokens[1:][-window:]
        rows.append((x, [IGNORE] * (len(y) - q.n_cont) + y[len(y) - q.n_cont:]))
    width = length or max(len(x) for x, _ in rows)
    inp = torch.zeros(len(rows), width, dtype=torch.long)
    tgt = torch.full((len(rows), width), IGNORE, dtype=torch.long)
    for r, (x, y) in enumerate(rows):
        inp[r, :len(x)] = torch.tensor(x, dtype=torch.long)
        tgt[r, :len(y)] = torch.tensor(y, dtype=torch.long)
    return inp, tgt


def score_requests(parts, requests: Sequence[Request], *, window: int, vocab_size: int, micro_batch: int,
                   n_micro: int, device: torch.device, autocast_dtype: torch.dtype | None = None,
                   progress=None) -> Scores:
    """Every request's (log-likelihood, is_greedy), known to every rank (a ``Scores``: a sequence of those pairs).
    ``parts``: ``pretrain.parallel.ModelParts`` (in any mode; evaluation mode during the call). ``progress(n)`` is
    told of rows done on this rank."""
    env = parts.env
    pp, dp = env.layout.pp, env.layout.dp
    dp_rank = env.dp_rank if env.mesh is not None else 0
    tp_rank = env.tp_rank if env.mesh is not None else 0
    order = np.argsort(-request_lengths(requests), kind="stable")  # longest first; ties in request order
    mine = order[dp_rank::dp]
    rows_per_step = micro_batch * (n_micro if pp > 1 else 1)
    n_steps = math.ceil(math.ceil(len(requests) / dp) / rows_per_step) if requests else 0
    results = torch.zeros(len(requests), 2, dtype=torch.float64, device=device)
    contributes = parts.has_last_stage and tp_rank == 0
    was_training = [p.training for p in parts.parts]
    parts.train(False)
    score_fn = lambda logits, target: row_scores(logits, target, vocab_size)  # noqa: E731
    autocast = (torch.autocast(device.type, dtype=autocast_dtype) if autocast_dtype is not None
                else contextlib.nullcontext())
    try:
        with torch.no_grad(), autocast:
            for s in range(n_steps):
                idx = mine[s * rows_per_step:(s + 1) * rows_per_step]
                batch = [requests[i] for i in idx] + [None] * (rows_per_step - len(idx))
                inp, tgt = pack_rows(batch, window, window if pp > 1 else None)
                inp, tgt = inp.to(device), tgt.to(device)
                if pp > 1:
                    losses: list = []
                    with parts.scoring_schedule(n_micro, score_fn) as sched:
                        sched.eval(*((inp,) if parts.has_first_stage else ()),
                                   target=tgt if parts.has_last_stage else None, losses=losses)
                    scores = torch.cat(losses) if parts.has_last_stage else None
                else:
                    scores = score_fn(parts.parts[0](inp), tgt)
                if contributes and len(idx):
                    results[torch.as_tensor(idx, device=device)] = scores[:len(idx)]
                if progress is not None:
                    progress(len(idx))
    finally:
        for p, mode in zip(parts.parts, was_training):
            p.train(mode)
    if dist.is_initialized() and env.layout.world_size > 1:
        if not contributes:
            results.zero_()
        dist.all_reduce(results)
    return Scores(results.cpu().numpy())
