"""Training a GPT: in one process, or under `torchrun --nproc-per-node N -m pretrain train ...` with tensor
(+ sequence), pipeline and data parallelism. ``train(cfg)`` is the whole run; the parts it puts together:
the data (pretrain/data/batches.py), the optimizer and LR schedule (optim.py), one step's forward, backward and
gradient clipping (trainer.py), metrics (metrics.py) and checkpoints (pretrain/checkpoint/).

A run whose checkpoint.dir already holds a checkpoint resumes from it and trains on to train.steps.
"""
from __future__ import annotations

import contextlib
import random
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from pretrain import checkpoint as ckpt
from pretrain.config import Config, ConfigError, batch_size_at, check, finalize, total_train_samples
from pretrain.data.batches import batch_plan, build_data, check_data_paths, local_batch
from pretrain.eval.run import evaluate_tasks, flat_metrics
from pretrain.fits import check_fits
from pretrain.metrics import MetricsLog, StepWindow
from pretrain.mfu import device_peak
from pretrain.model import GPT, num_params
from pretrain.optim import LRSchedule, make_optimizer
from pretrain.parallel import build_model_parts
from pretrain.parallel.mesh import Layout, env_world, init_parallel, start_process_group
from pretrain.prefetch import Prefetcher
from pretrain.trainer import Trainer, evaluate


def train(cfg: Config) -> dict:
    """Run (or resume) training; returns {"losses": {step: loss}, "val_losses": {...}, "evals": {step: {"eval/NAME/METRIC":
    value}}, "step", "consumed_samples"}.
    Every rank returns the same losses."""
    rank, local_rank, world = env_world()
    check(cfg, world)  # before any process-group work
    check_data_paths(cfg)
    tok_sha = check_tokenizer(cfg, quiet=rank != 0)
    device = pick_device(cfg, local_rank)
    lock, made = hold_checkpoint_dir(cfg, rank)  # one run per checkpoint.dir (rank 0 holds it)
    try:
        start_process_group(device, cfg.parallel.timeout_s)  # before the checkpoint check: the ranks share its hashing
        ckpt.check_shared_storage(cfg)  # every rank sees rank 0's checkpoint.dir, log.dir and data, or all stop
        # verified; a damaged latest checkpoint -> the newest intact one (or stop: checkpoint.on_damage)
        resume_dir = ckpt.find_resume(cfg.checkpoint, announce=rank == 0) if cfg.checkpoint.dir else None
        if resume_dir is not None:
            adopt_checkpoint_model(cfg, resume_dir, tok_sha)
        finalize(cfg, world)
        check_fits(cfg, world, device)  # before anything is allocated
        dtype = compute_dtype(cfg, device)
        p, t = cfg.parallel, cfg.train
        env = init_parallel(Layout(tp=p.tp, pp=p.pp, dp=p.dp), device)
        random.seed(t.seed)
        np.random.seed(t.seed)
        torch.manual_seed(t.seed)
        log = MetricsLog(cfg, rank)
        try:
            return train_loop(cfg, env, device, dtype, resume_dir, log, tok_sha)
        finally:
            log.close()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        if lock is not None:
            lock.release()
            if made:  # a run stopped at start leaves no folder behind (rmdir fails on one that holds files)
                with contextlib.suppress(OSError):
                    Path(cfg.checkpoint.dir).rmdir()


def check_tokenizer(cfg: Config, quiet: bool = False) -> str | None:
    """Before any process-group work: data.tokenizer against the model (``model.vocab_size``, when set, holds its
    ids) and against each dataset of the blend (the tokenizer the dataset's record names: a different one made
    ids that stand for other pieces; a note on stderr, unless ``quiet``, names those that record none). Returns
    the tokenizer's sha256 (each checkpoint records it), None without one."""
    import sys

    d = cfg.data
    if not d.tokenizer or not Path(d.tokenizer).is_file():
        return None
    from curate.shards import sha256_file

    sha = sha256_file(d.tokenizer)
    if cfg.model.vocab_size is not None:
        from pretrain.config import check_vocab
        from pretrain.data.tokenizer import load_tokenizer

        try:
            pieces = load_tokenizer(d.tokenizer).vocab_size
        except (OSError, ValueError) as e:  # not a SentencePiece model
            raise ConfigError(f"data.tokenizer: {e}") from None
        check_vocab(cfg, d.tokenizer, pieces)
    if d.kind == "blend":
        check_blend_tokenizer(d.blend, d.tokenizer, sha,
                              (lambda _text: None) if quiet else (lambda text: print(text, file=sys.stderr)))
    return sha


def check_blend_tokenizer(blend: str, tokenizer: str, sha: str, say=print) -> None:
    """Each dataset of ``blend`` was tokenized with ``tokenizer`` (of sha256 ``sha``), as far as its records
    say: ``tokenizer_sha256`` of ``PREFIX.json`` or of ``PREFIX/job.json`` (``--parts``, ``--merge``), else the
    file at the ``tokenizer`` path ``PREFIX.json`` names (relative: from the current directory). A dataset whose
    records say nothing (or name a file no longer there) is not compared: one note names them."""
    import os

    from curate.shards import read_record, sha256_file
    from pretrain.data.blend_spec import load_blend_spec

    hashes = {os.path.realpath(tokenizer): sha}  # each tokenizer file hashed once
    unknown = []
    for ds in load_blend_spec(blend).datasets:
        record = read_record(ds.prefix + ".json") or {}
        job = read_record(os.path.join(ds.prefix, "job.json")) or {}
        path = record.get("tokenizer")
        if isinstance(record.get("tokenizer_sha256"), str):
            made = record["tokenizer_sha256"]
            how = f"{path}, as {ds.prefix}.json records it" if isinstance(path, str) else \
                f"the tokenizer {ds.prefix}.json records"
        elif isinstance(job.get("tokenizer_sha256"), str):
            made, how = job["tokenizer_sha256"], f"the tokenizer {ds.prefix}/job.json records"
        elif isinstance(path, str) and os.path.isfile(path):
            real = os.path.realpath(path)
            if real not in hashes:
                hashes[real] = sha256_file(real)
            made, how = hashes[real], f"{path}, as {ds.prefix}.json names it"
        else:
            unknown.append(ds.name)
            continue
        if made != sha:
            raise ConfigError(f"data.blend {blend}: dataset {ds.name!r} ({ds.prefix}) was tokenized with {how} "
                              f"(sha256 {made[:12]}...), not with data.tokenizer {tokenizer} (sha256 {sha[:12]}...): "
                              "its token ids stand for other pieces; tokenize it again with data.tokenizer "
                              "(pretrain tokenize), or set data.tokenizer to the one it was made with")
    if unknown:
        say(f"note: the tokenizer of dataset(s) {', '.join(unknown[:5])}{' ...' if len(unknown) > 5 else ''} is "
            f"not recorded (or no longer at the path recorded): not compared with data.tokenizer {tokenizer}")


def hold_checkpoint_dir(cfg: Config, rank: int):
    """Rank 0 locks ``checkpoint.dir`` for the run (``run.lock``, as ``curate run`` locks its output): a second
    ``pretrain train`` on the same folder stops at once naming the run that holds it (two runs would write
    each other's checkpoints and move ``latest`` in turn); the kernel drops the lock of a run that died. A
    group torchrun restarted (``TORCHELASTIC_RESTART_COUNT``) whose lock is still held from another host
    goes on without it: that is the run's own lock, on a node that was lost (a network file system keeps it
    until its lease ends). -> (the lock or None, whether the folder was made here)."""
    import os
    import socket
    import sys

    from curate.lock import LockError, OutputLock

    if rank != 0 or not cfg.checkpoint.dir:
        return None, False
    folder = Path(cfg.checkpoint.dir)
    made = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return OutputLock(folder).acquire(), made
    except LockError as e:
        holder = e.holder
        restarted = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0) > 0
        if restarted and holder.get("host") not in (None, socket.gethostname()):
            print(f"warning: {e}; going on without the lock: this is a restart of the run after a lost node",
                  file=sys.stderr, flush=True)
            return None, False
        raise ConfigError(f"checkpoint.dir: {e}") from None


def train_loop(cfg: Config, env, device, dtype, resume_dir, log: MetricsLog, tok_sha: str | None = None) -> dict:
    p, t = cfg.parallel, cfg.train
    parts = build_model_parts(cfg, env, dtype)
    optimizers = [make_optimizer(part, cfg, device) for part in parts.parts]
    sched = LRSchedule(cfg)
    step, consumed = 0, 0
    if resume_dir is not None:
        meta = ckpt.load(resume_dir, parts.parts, optimizers)
        step, consumed, sched_state = ckpt.resume_point(meta, resume_dir, t.global_batch)
        sched.load_state_dict(sched_state)
        log.info(f"resumed from {resume_dir} at step {step} ({consumed} samples consumed)")
        if step >= t.steps:
            log.info(f"step {step} already reaches train.steps = {t.steps}: nothing to train (raise train.steps to "
                     "train on)")
    n_valid = t.eval_iters * t.global_batch if t.eval_interval else 0
    n_train = total_train_samples(cfg)
    if step < t.steps:  # a run that took larger batches before (global_batch lowered) reads past this config's plan
        n_train = max(n_train, total_train_samples(cfg, step, consumed))
    train_ds, valid_ds = build_data(cfg, env, n_train, n_valid)
    trainer = Trainer(cfg, parts, device, dtype)
    tasks = prepare_eval_tasks(cfg, log)
    describe_run(cfg, env, device, dtype, log)
    peak = device_peak(device, dtype, t.peak_tflops)  # on a CPU a timed matmul (it draws from torch's RNG)
    log.peak_name = peak.label.split(" (")[0]
    log.info(f"MFU against the {peak.label}; attention FLOPs counted causally (pretrain/flops.py)")
    window = StepWindow(cfg, peak, env.layout.world_size, log, first_step=step + 1)
    val_losses, evals = {}, {}
    load_data = env.layout.pp == 1 or parts.has_first_stage or parts.has_last_stage
    batches = None
    if load_data and step < t.steps:
        batches = Prefetcher(lambda first, n: local_batch(train_ds, first, n, t.micro_batch, p.dp, env.dp_rank,
                                                            cfg.model.vocab_size),
                             batch_plan(cfg, step, consumed), device)
    last_ckpt = resume_dir
    try:
        while step < t.steps:
            gbs = batch_size_at(cfg, consumed)
            n_micro = gbs // (t.micro_batch * p.dp)
            if load_data:
                tokens = batches.next()
            else:
                tokens = torch.empty(n_micro * t.micro_batch, cfg.data.seq_len + 1, dtype=torch.long,
                                     device=device)
            lr = sched.apply(optimizers)
            loss, grad_norm = train_step(trainer, parts, optimizers, tokens, n_micro)
            step += 1
            consumed += gbs
            sched.step = step
            rec = {"step": step, "loss": loss, "lr": lr, "grad_norm": grad_norm, "global_batch": gbs,
                   "consumed_samples": consumed, "time": time.time()}
            window.add(rec)
            evaluating = bool(t.eval_interval and step % t.eval_interval == 0 and valid_ds is not None)
            saving = bool(cfg.checkpoint.dir and ((cfg.checkpoint.interval and step % cfg.checkpoint.interval == 0)
                                                  or step == t.steps))
            if evaluating:  # before the fetch, so that the window's time is training time only
                eval_t0 = time.perf_counter()
                rec["val_loss"] = val_losses[step] = evaluate(cfg, trainer, parts, valid_ds, device, load_data)
                window.leave_out(time.perf_counter() - eval_t0)
            task_results = None
            if tasks and ((cfg.eval.interval and step % cfg.eval.interval == 0) or step == t.steps):
                eval_t0 = time.perf_counter()
                task_results = run_eval_tasks(cfg, trainer, parts, tasks, device, gbs)
                window.leave_out(time.perf_counter() - eval_t0)
            if evaluating or saving or task_results or window.due(step) or step == t.steps:
                window.flush(last_ckpt)
            if task_results:
                evals[step] = flat_metrics(task_results)
                log.eval({"step": step, "consumed_samples": consumed, "tokens": consumed * cfg.data.seq_len,
                          **evals[step]})
            if saving:
                meta = {"step": step, "consumed_samples": consumed, "scheduler": sched.state_dict(),
                        "world_size": env.layout.world_size,
                        "layout": {"tp": p.tp, "pp": p.pp, "vpp": p.vpp, "dp": p.dp}, "config": cfg.to_dict()}
                if tok_sha:  # which tokenizer the weights go with: eval, generate and export-hf compare it
                    meta["tokenizer_sha256"] = tok_sha
                last_ckpt = ckpt.save(cfg.checkpoint.dir, step, parts.parts, optimizers, meta, cfg.model,
                                      async_save=cfg.checkpoint.async_save)
                log.info(f"{'writing' if cfg.checkpoint.async_save else 'saved'} checkpoint {last_ckpt}")
                window.restart()
        ckpt.wait_async()  # a background save completes (latest moves to it) before the run ends
        window.flush(last_ckpt)
    finally:
        if batches is not None:
            batches.close()
    local_numel = sum((q.to_local() if isinstance(q, DTensor) else q).numel() for q in parts.parameters())
    return {"losses": window.losses, "val_losses": val_losses, "evals": evals, "grad_norms": window.grad_norms, "step": step,
            "consumed_samples": consumed, "stage_ids": parts.stage_ids, "local_param_numel": local_numel}


def prepare_eval_tasks(cfg: Config, log: MetricsLog) -> list:
    """[[eval.tasks]] read, checked and tokenized once per run (every rank does the same)."""
    if not cfg.eval.tasks:
        return []
    from pretrain.data.tokenizer import load_tokenizer
    from pretrain.eval.run import prepare_tasks, set_aside_note
    from pretrain.eval.tasks import task_specs_from_tables

    specs = task_specs_from_tables(cfg.eval.tasks, "[[eval.tasks]]")
    tasks = prepare_tasks(specs, load_tokenizer(cfg.data.tokenizer), cfg.model.max_seq_len)
    for task in tasks:
        note = set_aside_note(task)
        if note:
            log.info(note)
    return tasks


def run_eval_tasks(cfg: Config, trainer: Trainer, parts, tasks: list, device, gbs: int) -> dict:
    """The tasks on the training ranks' own model parts (no gradient, no random draw: the run's losses do not
    change)."""
    p, t = cfg.parallel, cfg.train
    micro = cfg.eval.batch_size or t.micro_batch
    return evaluate_tasks(parts, tasks, window=cfg.model.max_seq_len, vocab_size=cfg.model.vocab_size,
                          micro_batch=t.micro_batch if p.pp > 1 else micro,
                          n_micro=gbs // (t.micro_batch * p.dp), device=device,
                          autocast_dtype=trainer.autocast_dtype)


def train_step(trainer: Trainer, parts, optimizers, tokens: torch.Tensor, n_micro: int):
    """One optimizer step; -> (global loss, gradient norm), both still on the device."""
    parts.train(True)
    local = trainer.forward_backward(tokens, n_micro)
    parts.finish_grads()
    grad_norm = trainer.clip_grad_norm()
    for opt in optimizers:
        opt.step()
        opt.zero_grad(set_to_none=True)
    return trainer.global_loss(local), grad_norm


def describe_run(cfg: Config, env, device, dtype, log: MetricsLog) -> None:
    p = cfg.parallel
    with torch.device("meta"):
        whole = GPT(cfg.model)
    log.info(f"world {env.layout.world_size} = tp {p.tp} x dp {p.dp} x pp {p.pp} (vpp {p.vpp}); device {device}; "
             f"{dtype}; parameters {num_params(whole):,} ({num_params(whole, exclude_embeddings=True):,} without "
             f"embeddings); vocab {cfg.model.vocab_size} padded to {cfg.model.padded_vocab_size}")


def pick_device(cfg: Config, local_rank: int) -> torch.device:
    want = cfg.train.device
    if want == "cuda" or (want == "auto" and torch.cuda.is_available()):
        from pretrain.parallel.mesh import cuda_problem

        problem = cuda_problem(f"train.device = {want!r}", local_rank)  # no CUDA, or fewer GPUs than local ranks
        if problem:
            raise ConfigError(f"{problem}: set train.device = 'cpu' or 'auto'")
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def compute_dtype(cfg: Config, device: torch.device) -> torch.dtype:
    prec = cfg.train.precision
    if prec == "bf16" or (prec == "auto" and device.type == "cuda"):
        return torch.bfloat16
    return torch.float32


def adopt_checkpoint_model(cfg: Config, d: Path, tok_sha: str | None = None) -> None:
    """Resuming: the checkpoint's architecture and tokenizer (``tok_sha``: data.tokenizer's sha256) must match
    the config; its padded vocabulary is kept."""
    saved = ckpt.read_model_config(d)
    if tok_sha:
        ckpt.check_tokenizer(d, ckpt.read_meta(d), cfg.data.tokenizer, "set data.tokenizer to that one, or use "
                             "another checkpoint.dir", sha=tok_sha)
    m = cfg.model
    # (norm_eps and rope_theta change what the same weights compute: the loss jumped, as after damage)
    for key in ("hidden_size", "num_layers", "num_heads", "norm", "norm_eps", "position", "rope_theta", "mlp", "bias",
                "tie_embeddings"):
        if key == "rope_theta" and saved.position != "rope":
            continue
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
