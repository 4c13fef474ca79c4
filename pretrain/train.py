"""`pretrain train --config C.toml [--set table.key=value ...]`: train a GPT in one process, or under
`torchrun --nproc-per-node N -m pretrain train ...` with tensor (+ sequence), pipeline and data parallelism.

One step consumes the global batch [consumed, consumed + B) of the train split in order (dp rank r takes
micro-batch j = samples consumed + (j * dp + r) * mbs + [0, mbs)), so a resume that restores consumed_samples
continues the same data order. A run whose checkpoint.dir already holds a checkpoint resumes from it and trains on
to train.steps. Per step one JSON line (step, loss, lr, grad_norm, tokens_per_s, mfu, hfu, ...) is appended to
LOG_DIR/metrics.jsonl (a resumed run appends; the last line for a step wins) and written to TensorBoard.
"""
from __future__ import annotations

import contextlib
import json
import math
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import loss_parallel

from pretrain import checkpoint as ckpt
from pretrain.config import (
    Config,
    ConfigError,
    batch_size_at,
    check,
    finalize,
    load_config,
    total_train_samples,
)
from pretrain.fits import check_fits
from pretrain.flops import flops_per_iteration
from pretrain.mfu import device_peak
from pretrain.model import GPT, num_params
from pretrain.parallel import ModelParts, build_model_parts
from pretrain.parallel.mesh import Layout, env_world, init_parallel, start_process_group
from pretrain.prefetch import Prefetcher


HELP_EPILOG = """metrics: tokens/s, MFU and HFU per step. FLOPs per iteration = 3 x forward (a multiply-add is 2 FLOPs);
the causal attention core is counted as computed, s (s + 1) / 2 query-key pairs per head dim, not s^2; HFU adds
the forward recomputed by train.recompute = "full" ("selective" recomputes only pointwise ops: HFU = MFU). The
peak: train.peak_tflops if set; on CUDA the device's dense bf16 (or fp32) figure, matched by name (H100 SXM /
PCIe / NVL, H200, A100, B200), "MFU unknown" for another device; on CPU a matmul measured at start ("% of
measured matmul peak"). Losses and gradient norms stay on the device and are fetched every log.interval steps;
a non-finite one stops the run (exit code 3) before any checkpoint is written."""


def add_arguments(parser) -> None:
    import argparse

    parser.epilog = HELP_EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--config", help="TOML config ([model] [parallel] [train] [data] [checkpoint] [log])")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="TABLE.KEY=VALUE",
                        help="override a config value, e.g. --set parallel.tp=2 --set train.steps=100")


def run(args) -> int:
    try:
        cfg = load_config(args.config, args.overrides)
        train(cfg)
    except ConfigError as e:
        print(f"pretrain train: {e}", file=sys.stderr)
        return 2
    except NonFiniteError as e:
        print(f"pretrain train: {e}", file=sys.stderr)
        return 3
    return 0


# ---------------------------------------------------------------------------------------------------- data

class DataError(ConfigError):
    """The training data cannot be used as it is (tokens outside the vocabulary); says what to change."""


class SyntheticDataset:
    """Deterministic learnable token sequences with the blend datasets' interface: sample i is an arithmetic
    progression modulo the vocabulary (start and stride drawn from (seed, i)) with 1 in 8 tokens replaced by noise."""

    def __init__(self, num_samples: int, seq_len: int, vocab_size: int, seed: int):
        self.n, self.seq_len, self.vocab, self.seed = num_samples, seq_len, vocab_size, seed

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> np.ndarray:
        if not 0 <= i < self.n:
            raise IndexError(i)
        rng = np.random.default_rng([self.seed, i])
        start, stride = rng.integers(0, self.vocab), rng.integers(1, 8)
        x = (start + stride * np.arange(self.seq_len + 1)) % self.vocab
        noise = rng.random(self.seq_len + 1) < 0.125
        x[noise] = rng.integers(0, self.vocab, int(noise.sum()))
        return x.astype(np.int64)

    def get_batch(self, indices) -> np.ndarray:
        return np.stack([self[int(i)] for i in indices]) if len(indices) else np.empty((0, self.seq_len + 1),
                                                                                       np.int64)


def build_datasets(cfg: Config, num_train: int, num_valid: int):
    d = cfg.data
    if d.kind == "synthetic":
        train = SyntheticDataset(num_train, d.seq_len, cfg.model.vocab_size, cfg.train.seed)
        valid = SyntheticDataset(num_valid, d.seq_len, cfg.model.vocab_size, cfg.train.seed + 1) if num_valid else None
        return train, valid
    from pretrain.data.blend import build_blend_splits
    from pretrain.data.gpt_dataset import EmptySplitError

    try:
        train, valid, _ = build_blend_splits(d.blend, d.seq_len, (num_train, num_valid, 0), cfg.train.seed,
                                             d.cache_dir, order=d.order)
    except EmptySplitError as e:
        raise ConfigError(f"data.blend {d.blend}: {e}" + (" (or set train.eval_interval = 0: no validation)"
                                                          if num_valid else "")) from e
    except (ValueError, IndexError) as e:  # a damaged .idx or index cache, a blend that draws too much
        raise ConfigError(f"data.blend {d.blend}: {e}") from e
    return train, valid


DEMO_HINT = ("run `make demo` (or steps 1-6 of pipelines/demo.sh) to tokenize the repository's sample, or train on "
             "synthetic tokens: --set data.kind=synthetic --set model.vocab_size=256")


def check_data_paths(cfg: Config) -> None:
    """Before any process-group work: the tokenizer and the blend's .bin/.idx files exist."""
    d = cfg.data
    if d.kind != "blend":
        return
    if d.tokenizer and cfg.model.vocab_size is None and not Path(d.tokenizer).is_file():
        raise ConfigError(f"data.tokenizer {d.tokenizer} not found: {DEMO_HINT}")
    from pretrain.data.blend_spec import BlendSpecError, load_blend_spec

    try:
        spec = load_blend_spec(d.blend)
    except (BlendSpecError, OSError) as e:
        raise ConfigError(f"data.blend {d.blend}: {e}") from e
    for ds in spec.datasets:
        for ext in (".bin", ".idx"):
            if not Path(ds.prefix + ext).is_file():
                raise ConfigError(f"data.blend {d.blend}: dataset {ds.name!r} has no {ds.prefix}{ext}: {DEMO_HINT}")


def local_indices(first_sample: int, n_micro: int, mbs: int, dp: int, dp_rank: int) -> np.ndarray:
    """Sample indices of this dp rank's micro-batches of the global batch starting at ``first_sample``, in order."""
    j = np.arange(n_micro, dtype=np.int64)[:, None]
    return (first_sample + (j * dp + dp_rank) * mbs + np.arange(mbs, dtype=np.int64)[None, :]).reshape(-1)


def local_batch(ds, first_sample: int, n_micro: int, mbs: int, dp: int, dp_rank: int,
                vocab_size: int | None = None) -> torch.Tensor:
    """This dp rank's micro-batches of the global batch starting at ``first_sample``, stacked [n_micro * mbs, T+1]
    (one vectorised ``get_batch`` call). With ``vocab_size``, every token must be a vocabulary id: data
    tokenized with a larger vocabulary (or a damaged .bin) stops the run here, naming the sample, instead of
    as an index error inside the embedding (a device-side assert on a GPU)."""
    idx = local_indices(first_sample, n_micro, mbs, dp, dp_rank)
    if hasattr(ds, "get_batch"):
        batch = np.ascontiguousarray(ds.get_batch(idx), dtype=np.int64)
    else:
        batch = np.stack([np.asarray(ds[int(i)], dtype=np.int64) for i in idx])
    if vocab_size is not None and batch.size and (batch.min() < 0 or batch.max() >= vocab_size):
        row = int(np.argmax(((batch < 0) | (batch >= vocab_size)).any(axis=1)))
        bad = batch[row][(batch[row] < 0) | (batch[row] >= vocab_size)][0]
        raise DataError(f"sample {int(idx[row])} holds token id {int(bad)}, outside the model's vocabulary of "
                         f"{vocab_size}: the data was tokenized with another tokenizer (or its .bin is damaged); "
                         "re-tokenize it with data.tokenizer, or set model.vocab_size to that tokenizer's")
    return torch.from_numpy(batch)


# ---------------------------------------------------------------------------------------------------- schedule


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


# ---------------------------------------------------------------------------------------------------- steps


def _scalar(x) -> torch.Tensor:
    if isinstance(x, DTensor):
        x = x.to_local()  # a replicated loss
    return x.detach().float()


class NonFiniteError(RuntimeError):
    """A loss or gradient norm that is not finite: training stops before any checkpoint is written."""


class Trainer:
    """One precision recipe for every layout (``pretrain.precision``): under bf16 every forward runs in autocast;
    the data-parallel wrappers gather the blocks' weights in bf16 and reduce gradients in fp32."""

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


# ---------------------------------------------------------------------------------------------------- main


def _pick_device(cfg: Config, local_rank: int) -> torch.device:
    want = cfg.train.device
    if want == "cuda" or (want == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise ConfigError("train.device = 'cuda' but CUDA is not available: set train.device = 'cpu' or 'auto'")
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def _compute_dtype(cfg: Config, device: torch.device) -> torch.dtype:
    prec = cfg.train.precision
    if prec == "bf16" or (prec == "auto" and device.type == "cuda"):
        return torch.bfloat16
    return torch.float32


class MetricsLog:
    """rank 0: stdout every log.interval steps, LOG_DIR/metrics.jsonl and TensorBoard one line per step (written
    when the loop fetches its metrics from the device: every log.interval steps, see ``_train``)."""

    def __init__(self, cfg: Config, rank: int):
        self.enabled = rank == 0
        self.interval = max(1, cfg.log.interval)
        self.peak_name = "peak"
        self.file = self.tb = None
        if self.enabled and cfg.log.dir:
            Path(cfg.log.dir).mkdir(parents=True, exist_ok=True)
            self.file = open(Path(cfg.log.dir) / "metrics.jsonl", "a")
            if cfg.log.tensorboard:
                from torch.utils.tensorboard import SummaryWriter

                self.tb = SummaryWriter(str(Path(cfg.log.dir) / "tensorboard"))

    def info(self, text: str) -> None:
        if self.enabled:
            print(text, flush=True)

    def step(self, rec: dict) -> None:
        if not self.enabled:
            return
        if self.file:
            self.file.write(json.dumps(rec) + "\n")
            self.file.flush()
        if self.tb:
            for k, v in rec.items():
                if k not in ("step", "time") and isinstance(v, (int, float)):
                    self.tb.add_scalar(("val/" if k.startswith("val_") else "train/") + k, v, rec["step"])
        if rec["step"] % self.interval == 0 or "val_loss" in rec:
            if rec["mfu"] is None:
                util = ["mfu unknown", "hfu unknown"]
            else:
                util = [f"mfu {100 * rec['mfu']:.2f}%", f"hfu {100 * rec['hfu']:.2f}% of {self.peak_name}"]
            parts = [f"step {rec['step']}", f"loss {rec['loss']:.4f}", f"lr {rec['lr']:.3e}",
                     f"grad_norm {rec['grad_norm']:.3f}", f"tok/s {rec['tokens_per_s']:,.0f}", *util]
            if "val_loss" in rec:
                parts.append(f"val_loss {rec['val_loss']:.4f}")
            print(" | ".join(parts), flush=True)

    def close(self) -> None:
        if self.file:
            self.file.close()
        if self.tb:
            self.tb.close()


def train(cfg: Config) -> dict:
    """Run (or resume) training; returns {"losses": {step: loss}, "val_losses": {...}, "step", "consumed_samples"}.
    Every rank returns the same losses."""
    rank, local_rank, world = env_world()
    check(cfg, world)  # before any process-group work
    check_data_paths(cfg)
    device = _pick_device(cfg, local_rank)
    start_process_group(device)  # before the checkpoint check: the ranks share its hashing
    try:
        # verified; a damaged latest checkpoint -> the newest intact one (or stop: checkpoint.on_damage)
        resume_dir = ckpt.find_resume(cfg.checkpoint, announce=rank == 0) if cfg.checkpoint.dir else None
        if resume_dir is not None:
            _adopt_checkpoint_model(cfg, resume_dir)
        finalize(cfg, world)
        check_fits(cfg, world, device)  # before anything is allocated
        dtype = _compute_dtype(cfg, device)
        p, t = cfg.parallel, cfg.train
        env = init_parallel(Layout(tp=p.tp, pp=p.pp, dp=p.dp), device)
        random.seed(t.seed)
        np.random.seed(t.seed)
        torch.manual_seed(t.seed)
        log = MetricsLog(cfg, rank)
        try:
            return _train(cfg, env, device, dtype, resume_dir, log)
        finally:
            log.close()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _adopt_checkpoint_model(cfg: Config, d: Path) -> None:
    """Resuming: the checkpoint's architecture must match the config; its padded vocabulary is kept."""
    saved = ckpt.read_model_config(d)
    m = cfg.model
    for key in ("hidden_size", "num_layers", "num_heads", "norm", "position", "mlp", "bias", "tie_embeddings"):
        if getattr(m, key) != getattr(saved, key):
            raise ConfigError(f"checkpoint {d} has model.{key} = {getattr(saved, key)!r} but the config says "
                              f"{getattr(m, key)!r}: fix the config or use another checkpoint.dir")
    if m.vocab_size is not None and m.vocab_size != saved.vocab_size:
        raise ConfigError(f"checkpoint {d} has model.vocab_size = {saved.vocab_size}, the config {m.vocab_size}")
    m.vocab_size = saved.vocab_size
    if m.ffn_hidden_size is None:
        m.ffn_hidden_size = saved.ffn_hidden_size
    elif m.ffn_hidden_size != saved.ffn_hidden_size:
        raise ConfigError(f"checkpoint {d} has model.ffn_hidden_size = {saved.ffn_hidden_size}, the config "
                          f"{m.ffn_hidden_size}")
    if saved.padded_vocab_size % cfg.parallel.tp == 0:
        m.padded_vocab_size = saved.padded_vocab_size


def _batch_plan(cfg: Config, step: int, consumed: int):
    """(first sample, micro-batches) of each remaining step, in order."""
    t, p = cfg.train, cfg.parallel
    while step < t.steps:
        gbs = batch_size_at(cfg, consumed)
        yield consumed, gbs // (t.micro_batch * p.dp)
        consumed += gbs
        step += 1


def _check_finite(rows: list[dict], last_ckpt) -> None:
    for r in rows:
        bad = [k for k in ("loss", "grad_norm") if not math.isfinite(r[k])]
        if bad:
            what = " and ".join(f"{k} = {r[k]}" for k in bad)
            where = f"the latest checkpoint is {last_ckpt}" if last_ckpt else "no checkpoint was written"
            raise NonFiniteError(f"step {r['step']}: {what} is not finite; training stopped before writing a "
                                 f"checkpoint ({where}). Lower train.lr, raise train.warmup_steps or "
                                 f"train.grad_clip, or check the data, then resume.")


def _train(cfg: Config, env, device, dtype, resume_dir, log: MetricsLog) -> dict:
    """The loop keeps each step's loss and gradient norm on the device and fetches them (one synchronisation) every
    log.interval steps, before an evaluation or a checkpoint, and at the end; a non-finite value then stops the
    run before any checkpoint is written."""
    p, t = cfg.parallel, cfg.train
    parts = build_model_parts(cfg, env, dtype)
    optimizers = [make_optimizer(part, cfg, device) for part in parts.parts]
    sched = LRSchedule(cfg)
    step, consumed = 0, 0
    if resume_dir is not None:
        meta = ckpt.load(resume_dir, parts.parts, optimizers)
        step, consumed = int(meta["step"]), int(meta["consumed_samples"])
        sched.load_state_dict(meta["scheduler"])
        log.info(f"resumed from {resume_dir} at step {step} ({consumed} samples consumed)")
    n_valid = t.eval_iters * t.global_batch if t.eval_interval else 0
    train_ds, valid_ds = _build_data(cfg, env, total_train_samples(cfg), n_valid)
    trainer = Trainer(cfg, parts, device, dtype)
    with torch.device("meta"):
        whole = GPT(cfg.model)
    log.info(f"world {env.layout.world_size} = tp {p.tp} x dp {p.dp} x pp {p.pp} (vpp {p.vpp}); device {device}; "
             f"{dtype}; parameters {num_params(whole):,} ({num_params(whole, exclude_embeddings=True):,} without "
             f"embeddings); vocab {cfg.model.vocab_size} padded to {cfg.model.padded_vocab_size}")
    seq = cfg.data.seq_len
    peak = device_peak(device, dtype, t.peak_tflops)
    log.peak_name = peak.label.split(" (")[0]
    log.info(f"MFU against the {peak.label}; attention FLOPs counted causally (pretrain/flops.py)")
    world = env.layout.world_size
    losses, val_losses, grad_norms = {}, {}, {}
    load_data = env.layout.pp == 1 or parts.has_first_stage or parts.has_last_stage
    batches = None
    if load_data and step < t.steps:
        batches = Prefetcher(lambda first, n: local_batch(train_ds, first, n, t.micro_batch, p.dp, env.dp_rank,
                                                            cfg.model.vocab_size),
                             _batch_plan(cfg, step, consumed), device)
    pending: list[dict] = []  # steps whose loss / grad norm are still on the device
    last_ckpt = resume_dir
    window_t0 = time.perf_counter()

    def fetch():
        nonlocal window_t0
        if not pending:
            return
        values = torch.stack([torch.stack([r["loss"].double(), r["grad_norm"].double()]) for r in pending])
        values = values.tolist()  # the one host synchronisation of the window
        dt = (time.perf_counter() - window_t0) / len(pending)
        window_t0 = time.perf_counter()
        for r, (loss, gn) in zip(pending, values):
            r["loss"], r["grad_norm"] = loss, gn
        _check_finite(pending, last_ckpt)
        for r in pending:
            gbs = r["global_batch"]
            flops = flops_per_iteration(cfg.model, gbs, seq)
            hw_flops = flops_per_iteration(cfg.model, gbs, seq, t.recompute)
            losses[r["step"]], grad_norms[r["step"]] = r["loss"], r["grad_norm"]
            mfu = peak.fraction(flops / (dt * world))
            r.update({"tokens_per_s": gbs * seq / dt, "mfu": mfu,
                      "hfu": None if mfu is None else peak.fraction(hw_flops / (dt * world)),
                      "step_time_s": dt, "tflops_per_device": flops / dt / world / 1e12})
            log.step(r)
        pending.clear()

    try:
        while step < t.steps:
            gbs = batch_size_at(cfg, consumed)
            n_micro = gbs // (t.micro_batch * p.dp)
            if load_data:
                tokens = batches.next()
            else:
                tokens = torch.empty(n_micro * t.micro_batch, seq + 1, dtype=torch.long, device=device)
            lr = sched.apply(optimizers)
            parts.train(True)
            local = trainer.forward_backward(tokens, n_micro)
            parts.finish_grads()
            grad_norm = trainer.clip_grad_norm()
            for opt in optimizers:
                opt.step()
                opt.zero_grad(set_to_none=True)
            loss = trainer.global_loss(local)
            step += 1
            consumed += gbs
            sched.step = step
            rec = {"step": step, "loss": loss, "lr": lr, "grad_norm": grad_norm, "global_batch": gbs,
                   "consumed_samples": consumed, "time": time.time()}
            pending.append(rec)
            evaluate = bool(t.eval_interval and step % t.eval_interval == 0 and valid_ds is not None)
            save = bool(cfg.checkpoint.dir and ((cfg.checkpoint.interval and step % cfg.checkpoint.interval == 0)
                                                or step == t.steps))
            if evaluate or save or step % log.interval == 0 or step == t.steps:
                if evaluate:
                    # evaluated before the fetch, so that the window's time is training time only
                    eval_t0 = time.perf_counter()
                    rec["val_loss"] = val_losses[step] = _evaluate(cfg, trainer, parts, valid_ds, device,
                                                                   load_data)
                    window_t0 += time.perf_counter() - eval_t0
                fetch()
            if save:
                meta = {"step": step, "consumed_samples": consumed, "scheduler": sched.state_dict(),
                        "world_size": world, "layout": {"tp": p.tp, "pp": p.pp, "vpp": p.vpp, "dp": p.dp},
                        "config": cfg.to_dict()}
                last_ckpt = ckpt.save(cfg.checkpoint.dir, step, parts.parts, optimizers, meta, cfg.model)
                log.info(f"saved checkpoint {last_ckpt}")
                window_t0 = time.perf_counter()
        fetch()
    finally:
        if batches is not None:
            batches.close()
    local_numel = sum((q.to_local() if isinstance(q, DTensor) else q).numel() for q in parts.parameters())
    return {"losses": losses, "val_losses": val_losses, "grad_norms": grad_norms, "step": step,
            "consumed_samples": consumed, "stage_ids": parts.stage_ids, "local_param_numel": local_numel}


def _build_data(cfg: Config, env, num_train: int, num_valid: int):
    """Rank 0 builds (and caches) the blend indices first, then the others read them."""
    if not dist.is_initialized() or cfg.data.kind == "synthetic":
        return build_datasets(cfg, num_train, num_valid)
    if env.rank == 0:
        out = build_datasets(cfg, num_train, num_valid)
    dist.barrier()
    if env.rank != 0:
        out = build_datasets(cfg, num_train, num_valid)
    return out


def _evaluate(cfg: Config, trainer: Trainer, parts: ModelParts, ds, device, load_data: bool) -> float:
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
