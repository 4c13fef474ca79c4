"""One training step's work on this rank: forward and backward over the micro-batches (pipeline schedule or a
plain loop, under autocast and loss_parallel as the layout needs), the global loss, the global gradient norm and
clipping; and the validation loss (``evaluate``).

The precision recipe: under bf16 every forward runs in autocast; the data-parallel wrappers gather the blocks'
weights in bf16 and reduce gradients in fp32 (``pretrain.parallel.data.mixed_precision``)."""
from __future__ import annotations

import contextlib

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import loss_parallel

from pretrain.config import Config
from pretrain.data.batches import local_batch
from pretrain.parallel import ModelParts


def _scalar(x) -> torch.Tensor:
    if isinstance(x, DTensor):
        x = x.to_local()  # a replicated loss
    return x.detach().float()


class Trainer:
    """Forward, backward, loss and gradient norm of one step on this rank, for every layout (the precision
    recipe: see the module's docstring)."""

    def __init__(self, cfg: Config, parts: ModelParts, device: torch.device, compute_dtype: torch.dtype):
        self.cfg, self.parts, self.device = cfg, parts, device
        self.env = parts.env
        p = cfg.parallel
        self.tp, self.dp, self.pp = p.tp, p.dp, p.pp
        self.autocast_dtype = compute_dtype if compute_dtype != torch.float32 else None
        self.fsdp = p.dp > 1 and p.dp_mode == "fsdp"
        self.reduce_every = self.fsdp and p.fsdp_reduce_every_microbatch

    def _ctx(self):
        stack = contextlib.ExitStack()
        if self.tp > 1:
            stack.enter_context(loss_parallel())
        if self.autocast_dtype is not None:
            stack.enter_context(torch.autocast(self.device.type, dtype=self.autocast_dtype))
        return stack

    def forward_backward(self, tokens: torch.Tensor, n_micro: int, train: bool = True) -> torch.Tensor | None:
        """Mean loss over this rank's micro-batches, on the device (None on a pipeline rank without the last
        stage); in training mode the gradients of that mean are accumulated (averaged over dp by the data-parallel
        wrapper; with FSDP reduce-scattered every micro-batch unless parallel.fsdp_reduce_every_microbatch = false;
        under pipeline parallelism the schedule of torch.distributed.pipelining reduces once per step)."""
        inputs, labels = tokens[:, :-1], tokens[:, 1:]
        mbs = tokens.shape[0] // n_micro
        if self.pp > 1:
            sched = self.parts.schedule(n_micro)
            losses: list = []
            args = (inputs,) if self.parts.has_first_stage else ()
            target = labels if self.parts.has_last_stage else None
            with self._ctx():
                if train:
                    sched.step(*args, target=target, losses=losses)
                else:
                    with torch.no_grad():
                        sched.eval(*args, target=target, losses=losses)
            if not self.parts.has_last_stage:
                return None
            return torch.stack([_scalar(x) for x in losses]).mean()
        model = self.parts.parts[0]
        loss_fn = self.parts.loss_fn
        total = torch.zeros((), device=self.device)
        with self._ctx(), (contextlib.nullcontext() if train else torch.no_grad()):
            for j in range(n_micro):
                if train and self.dp > 1:
                    model.set_requires_gradient_sync(self.reduce_every or j == n_micro - 1)
                sl = slice(j * mbs, (j + 1) * mbs)
                loss = loss_fn(model(inputs[sl]), labels[sl])
                if train:
                    (loss / n_micro).backward()
                total += _scalar(loss)
        return total / n_micro

    def global_loss(self, local: torch.Tensor | None) -> torch.Tensor:
        """The global batch's mean loss, known to every rank, as a device tensor (no host synchronisation)."""
        if not dist.is_initialized():
            return local.detach().double()
        contributes = local is not None and self.env.tp_rank == 0
        t = local.detach().double().reshape(1) if contributes else torch.zeros(1, dtype=torch.float64,
                                                                                 device=self.device)
        dist.all_reduce(t)
        return t[0] / self.dp

    def clip_grad_norm(self) -> torch.Tensor:
        """Global gradient 2-norm over all parallel groups (tensor- and data-parallel shards through DTensor,
        pipeline stages summed over the pp group; the tied head's copy counted once), then clipping. Returned as
        a device tensor: the optimizer step does not wait for it."""
        skip = self.parts.norm_exclusions()
        params = [p for p in self.parts.parameters() if p.grad is not None]
        grads = [p.grad for p in params if id(p) not in skip]
        norm = torch.nn.utils.get_total_norm(grads, 2.0)
        if isinstance(norm, DTensor):
            norm = norm.full_tensor()
        if self.pp > 1:
            sq = norm.float() ** 2
            dist.all_reduce(sq, group=self.env.submesh("pp").get_group())
            norm = sq.sqrt()
        if self.cfg.train.grad_clip > 0:
            torch.nn.utils.clip_grads_with_norm_(params, self.cfg.train.grad_clip, norm)
        return norm.detach()


def evaluate(cfg: Config, trainer: Trainer, parts: ModelParts, ds, device, load_data: bool) -> float:
    """Mean loss over the first eval_iters global batches of the validation split (the same ones every time)."""
    t, p = cfg.train, cfg.parallel
    n_micro = t.global_batch // (t.micro_batch * p.dp)
    parts.train(False)
    vals = []
    for it in range(t.eval_iters):
        if load_data:
            tokens = local_batch(ds, it * t.global_batch, n_micro, t.micro_batch, p.dp, trainer.env.dp_rank,
                                 cfg.model.vocab_size)
        else:
            tokens = torch.empty(n_micro * t.micro_batch, cfg.data.seq_len + 1, dtype=torch.long)
        vals.append(trainer.global_loss(trainer.forward_backward(tokens.to(device), n_micro, train=False)))
    parts.train(True)
    return float(torch.stack(vals).mean())
