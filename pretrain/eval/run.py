"""Evaluating a model on tasks: during training (the trainer's own model parts, every ``eval.interval`` steps) and
from a checkpoint (``pretrain eval``: one process, or under torchrun at any tp/pp layout with the examples spread
over the data-parallel ranks). Both go through ``evaluate_tasks``: items -> requests (requests.py) -> scores
(score.py) -> metrics (metrics.py)."""
from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from pretrain.eval.metrics import task_metrics
from pretrain.eval.request_lists import Request
from pretrain.eval.requests import prepare_task
from pretrain.eval.score import score_requests
from pretrain.eval.tasks import TaskItems, TaskSpec


@dataclass
class PreparedTask:
    items: TaskItems
    requests: Sequence[Request]  # a RequestList: each built when it is scored
    problems: list[str]  # items left out once every item is read (few-shot examples added)

    @property
    def spec(self) -> TaskSpec:
        return self.items.spec


def prepare_tasks(specs: list[TaskSpec], tokenizer, window: int) -> list[PreparedTask]:
    """Read, check and tokenize every task once (the requests are reused at every evaluation). An item the model
    cannot score is set aside as the file is read (named by file and line): a task's limit counts items scored."""
    out = []
    for spec in specs:
        items, reqs, problems = prepare_task(spec, tokenizer.encode, tokenizer.eod_id, window)
        if not reqs:
            raise ValueError(f"task {spec.name!r}: no item of {spec.path} can be scored: {problems[:1]}")
        out.append(PreparedTask(items, reqs, problems))
    return out


def set_aside_note(task: PreparedTask) -> str | None:
    n = task.items.skipped + len(task.problems)
    if not n:
        return None
    first = (task.items.problems + task.problems)[:2]
    return f"task {task.spec.name!r}: {n} item(s) set aside ({'; '.join(first)})"


def evaluate_tasks(parts, tasks: list[PreparedTask], *, window: int, vocab_size: int, micro_batch: int,
                   n_micro: int, device, autocast_dtype=None, show_progress: bool = False) -> dict:
    """-> {NAME: {"kind", "n", "skipped", "metrics": {METRIC: value}}}, the same on every rank."""
    results = {}
    for task in tasks:
        bar = None
        if show_progress and sys.stderr.isatty():
            from tqdm import tqdm

            mine = -(-len(task.requests) // parts.env.layout.dp)  # rank 0's share of the requests
            bar = tqdm(total=mine, desc=f"  {task.spec.name}", unit="req", dynamic_ncols=True)
        scores = score_requests(parts, task.requests, window=window, vocab_size=vocab_size, micro_batch=micro_batch,
                                n_micro=n_micro, device=device, autocast_dtype=autocast_dtype,
                                progress=bar.update if bar is not None else None)
        if bar is not None:
            bar.close()
        n, metrics = task_metrics(task.spec.kind, task.items.items, task.requests, scores)
        results[task.spec.name] = {"kind": task.spec.kind, "n": n,
                                   "skipped": task.items.skipped + len(task.problems), "metrics": metrics}
    return results


def _check_batch_fits(parts, batch_size: int, window: int, vocab: int, device) -> None:
    """``--batch-size`` checked against the device's memory before the first forward: its logits (``batch x window
    x vocab``) come on top of the weights, and a batch of 100,000 ran out of memory (or was killed) mid-task."""
    from pretrain.fits import device_bytes, eval_logits_bytes, fitting_eval_batch, gib

    have = device_bytes(device)
    if have is None:
        return
    params = [getattr(p, "_local_tensor", p) for m in parts.parts for p in m.parameters()]  # a DTensor's shard
    weights = sum(p.numel() * p.element_size() for p in params)
    nbytes = max((p.element_size() for p in params), default=4)
    need = eval_logits_bytes(batch_size, window, vocab, nbytes)
    if weights + need <= have:
        return
    fit = fitting_eval_batch(have - weights, window, vocab, nbytes)
    hint = f"pass --batch-size {fit} (or less)" if fit else "run it on a device with more memory, or under --tp"
    raise ValueError(f"--batch-size {batch_size} cannot fit: one forward's logits ({batch_size} x {window} positions "
                     f"x vocabulary {vocab:,}) take {gib(need)} on top of the weights' {gib(weights)}, and "
                     f"{device.type} has {gib(have)}: {hint}")


def flat_metrics(results: dict) -> dict:
    """{NAME: {...}} -> {"eval/NAME/METRIC": value} (metrics.jsonl and TensorBoard keys)."""
    return {f"eval/{name}/{m}": v for name, r in results.items() for m, v in r["metrics"].items()}


def table(results: dict) -> str:
    lines = [f"{'task':<20} {'kind':<7} {'n':>6}  metrics"]
    for name, r in results.items():
        ms = "  ".join(f"{m} {v:.4f}" for m, v in r["metrics"].items())
        skipped = f"  ({r['skipped']} set aside)" if r.get("skipped") else ""
        lines.append(f"{name:<20} {r['kind']:<7} {r['n']:>6}  {ms}{skipped}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------- from a checkpoint

def _single_process_parts(model, device):
    from pretrain.parallel import ModelParts
    from pretrain.parallel.mesh import Layout, ParallelEnv

    env = ParallelEnv(Layout(tp=1, pp=1, dp=1), 0, device, None)
    return ModelParts([model], [0], 1, env, tied=False)


def _parallel_parts(d: Path, model_cfg, tp: int, pp: int, micro_batch: int, device, world: int):
    from pretrain import checkpoint as ckpt
    from pretrain.config import Config, check, finalize
    from pretrain.model import GPT
    from pretrain.parallel import build_model_parts
    from pretrain.parallel.mesh import Layout, init_parallel

    with torch.device("meta"):  # the claimed model against the stored tensors before any rank allocates it
        ckpt.check_shapes(GPT(model_cfg), d)
    cfg = Config(model=model_cfg)
    cfg.parallel.tp, cfg.parallel.pp = tp, pp
    cfg.data.kind, cfg.data.seq_len = "synthetic", model_cfg.max_seq_len
    cfg.train.micro_batch, cfg.train.compile, cfg.train.device = micro_batch, False, device.type
    cfg.train.global_batch = micro_batch * pp * max(1, world // (tp * pp))
    check(cfg, world)
    finalize(cfg, world)
    env = init_parallel(Layout(tp=tp, pp=pp, dp=cfg.parallel.dp), device)
    parts = build_model_parts(cfg, env, torch.float32)
    ckpt.load(d, parts.parts)
    return parts, cfg


def evaluate_checkpoint(checkpoint: str, specs: list[TaskSpec], *, step: int | None = None,
                        tokenizer: str | None = None, device: str = "auto", tp: int = 1, pp: int = 1,
                        batch_size: int = 8, show_progress: bool = True, log=print) -> dict:
    """``pretrain eval``: the results JSON of the issue's contract for one checkpoint (every rank returns it)."""
    import torch.distributed as dist

    from pretrain import checkpoint as ckpt
    from pretrain.data.tokenizer import load_tokenizer
    from pretrain.generate import pick_device, resolve_tokenizer_path
    from pretrain.parallel.mesh import env_world, start_process_group

    _, local_rank, world = env_world()  # torchrun's variables checked (a stale WORLD_SIZE: one line naming it)
    dev = pick_device(device, local_rank)  # --device cuda without CUDA: a ValueError saying so
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    d = ckpt.find_intact(ckpt.step_dir(checkpoint, step) if step is not None else checkpoint)
    meta = ckpt.read_meta(d)
    tok_path = resolve_tokenizer_path(d, tokenizer)
    if tok_path is None:
        raise ValueError(f"no tokenizer recorded with {d} (data.tokenizer): pass --tokenizer PATH")
    tok = load_tokenizer(tok_path)
    model_cfg = ckpt.read_model_config(d)
    if tok.vocab_size != model_cfg.vocab_size:
        raise ValueError(f"tokenizer {tok_path} has {tok.vocab_size} pieces but the model was trained with "
                         f"vocab_size {model_cfg.vocab_size}: pass the tokenizer it was trained with (--tokenizer)")
    window = model_cfg.max_seq_len
    tasks = prepare_tasks(specs, tok, window)
    # no more rows per forward than a rank has requests (padding rows are allocated too: --batch-size 10^12 was a
    # MemoryError); every row is scored on its own, so the scores do not depend on it
    per_rank = -(-max((len(t.requests) for t in tasks), default=1) // max(1, world // (tp * pp)))
    batch_size = max(1, min(batch_size, per_rank))
    if world > 1:
        start_process_group(dev)
        parts, cfg = _parallel_parts(d, model_cfg, tp, pp, batch_size, dev, world)
        n_micro = pp
    else:
        if tp * pp > 1:
            raise ValueError(f"--tp {tp} --pp {pp} needs {tp * pp} processes: run under torchrun "
                             f"--nproc-per-node {tp * pp}")
        model, _ = ckpt.load_model_for_inference(d, device=dev)
        parts, n_micro = _single_process_parts(model, dev), 1
    _check_batch_fits(parts, batch_size, window, model_cfg.vocab_size // tp, dev)
    rank0 = not dist.is_initialized() or dist.get_rank() == 0
    for task in tasks:
        note = set_aside_note(task)
        if note and rank0:
            log(note)
    results = evaluate_tasks(parts, tasks, window=window, vocab_size=model_cfg.vocab_size, micro_batch=batch_size,
                             n_micro=n_micro, device=dev, show_progress=show_progress and rank0)
    seq_len = meta.get("config", {}).get("data", {}).get("seq_len", window)
    return {"checkpoint": str(d), "step": int(meta.get("step", 0)),
            "tokens_seen": int(meta.get("consumed_samples", 0)) * int(seq_len), "tokenizer": str(tok_path),
            "tasks": results}
