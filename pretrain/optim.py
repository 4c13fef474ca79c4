"""The optimizer (AdamW, no weight decay on 1-D tensors) and the learning-rate schedule (linear warm-up, cosine
decay), with the schedule's state for checkpoints."""
from __future__ import annotations

import math

import torch

from pretrain.config import Config


class LRSchedule:
    """Linear warm-up from 0 to lr over warmup_steps, cosine decay to min_lr at decay_steps, then min_lr."""

    def __init__(self, cfg: Config):
        t = cfg.train
        self.lr, self.min_lr, self.warmup = t.lr, t.min_lr, t.warmup_steps
        self.decay = t.decay_steps if t.decay_steps is not None else t.steps
        self.step = 0

    def lr_at(self, step: int) -> float:
        if step < self.warmup:
            return self.lr * (step + 1) / self.warmup
        if step >= self.decay:
            return self.min_lr
        progress = (step - self.warmup) / max(1, self.decay - self.warmup)
        return self.min_lr + 0.5 * (self.lr - self.min_lr) * (1 + math.cos(math.pi * progress))

    def apply(self, optimizers) -> float:
        lr = self.lr_at(self.step)
        for opt in optimizers:
            for group in opt.param_groups:
                group["lr"] = lr
        return lr

    def state_dict(self) -> dict:
        return {"step": self.step, "lr": self.lr, "min_lr": self.min_lr, "warmup": self.warmup, "decay": self.decay}

    def load_state_dict(self, state: dict) -> None:
        self.step = int(state["step"])


def make_optimizer(part, cfg: Config, device: torch.device) -> torch.optim.Optimizer:
    """AdamW; no weight decay on biases and norm weights (1-D tensors)."""
    t = cfg.train
    decay, no_decay = [], []
    for p in part.parameters():
        (decay if p.ndim >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": t.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    kwargs = {"fused": True} if device.type == "cuda" else {}
    return torch.optim.AdamW(groups, lr=t.lr, betas=(t.beta1, t.beta2), eps=t.eps, **kwargs)
