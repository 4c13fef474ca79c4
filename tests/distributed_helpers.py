"""Run a function in N processes wired like torchrun (RANK, WORLD_SIZE, MASTER_ADDR/PORT on 127.0.0.1, gloo).

Processes come from a forkserver that imported torch once, so each one starts in ~0.1 s instead of ~1.5 s, each
with one thread (the machine has 2 cores). Results travel back through files; a failing or hanging rank fails the
call with every rank's error output.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import socket
import tempfile
import time
import traceback
from pathlib import Path

from pretrain.config import Config, from_dict

ROOT = Path(__file__).resolve().parents[1]
_CTX = None


def _ctx():
    global _CTX
    if _CTX is None:
        _CTX = mp.get_context("forkserver")
        _CTX.set_forkserver_preload(["torch", "torch.distributed", "pretrain.train", "tests.distributed_helpers"])
    return _CTX


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _child(fn, args, rank, world, port, out_dir):
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world), LOCAL_WORLD_SIZE=str(world),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")
    import torch

    torch.set_num_threads(1)
    try:
        result = fn(*args)
        with open(Path(out_dir) / f"rank{rank}.pkl", "wb") as f:
            pickle.dump(("ok", result), f)
    except BaseException:
        with open(Path(out_dir) / f"rank{rank}.pkl", "wb") as f:
            pickle.dump(("error", traceback.format_exc()), f)
        os._exit(1)


def run_distributed(world: int, fn, *args, timeout: float = 300.0) -> list:
    """fn(*args) in ``world`` processes; returns the per-rank results. ``fn`` must be importable."""
    ctx = _ctx()
    port = free_port()
    with tempfile.TemporaryDirectory() as out_dir:
        procs = [ctx.Process(target=_child, args=(fn, args, r, world, port, out_dir)) for r in range(world)]
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        hung = [r for r, p in enumerate(procs) if p.is_alive()]
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
        results, errors = [], []
        for r in range(world):
            path = Path(out_dir) / f"rank{r}.pkl"
            if not path.exists():
                errors.append(f"rank {r}: no result (exit code {procs[r].exitcode})")
                results.append(None)
                continue
            status, value = pickle.loads(path.read_bytes())
            if status == "error":
                errors.append(f"rank {r}:\n{value}")
            results.append(value)
        if hung or errors:
            raise RuntimeError(f"distributed run failed (hung ranks {hung}):\n" + "\n".join(errors))
        return results


# ---------------------------------------------------------------------------------------------- tiny configs


def tiny_config(overrides: dict | None = None, **tables) -> Config:
    """The tiny fp32 CPU model the multi-process tests train: 4 layers, hidden 32, 4 heads, seq 16, vocab 256,
    4 micro-batches of 2 per step, synthetic data, no logging files."""
    raw = {
        "model": {"vocab_size": 256, "hidden_size": 32, "num_layers": 4, "num_heads": 4},
        "parallel": {},
        "train": {"steps": 5, "micro_batch": 2, "global_batch": 8, "seed": 7, "lr": 3e-3, "min_lr": 3e-4,
                  "warmup_steps": 2, "grad_clip": 1.0, "device": "cpu", "precision": "fp32"},
        "data": {"kind": "synthetic", "seq_len": 16},
        "checkpoint": {},
        "log": {"tensorboard": False},
    }
    for table, values in tables.items():
        raw.setdefault(table, {}).update(values)
    for key, value in (overrides or {}).items():
        table, k = key.split(".", 1)
        raw.setdefault(table, {})[k] = value
    return from_dict(raw)


def train_losses(raw: dict) -> dict:
    """Train the config given as a plain dict (picklable) and return {"losses", "val_losses", ...}."""
    from pretrain.train import train

    cfg = from_dict(raw)
    return train(cfg)


def config_dict(cfg: Config) -> dict:
    d = cfg.to_dict()
    for table in d.values():
        for k in [k for k, v in table.items() if v is None]:
            del table[k]
    return d
