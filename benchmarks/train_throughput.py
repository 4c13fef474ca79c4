"""Tokens/s of `pretrain train` (one process) against a minimal reference GPT training loop with the same dims,
data and torch: a plain nanoGPT-style model (fused QKV, tied embeddings, GeLU MLP, pre-LayerNorm, SDPA) and an
AdamW + gradient-clipping loop written here. Goal: ratio >= 0.95.

    .venv/bin/python benchmarks/train_throughput.py [--steps 15] [--rounds 2]

Both run in fresh subprocesses with the same thread count, alternating (reference, ours, reference, ours, ...) so
that drift in machine load hits both; each round discards its first warm-up steps. Step times are wall-clock
between consecutive steps, including everything each loop does per step (for `pretrain train`: data,
forward/backward, grad norm, AdamW, loss reduction, the metrics.jsonl line). Printed: the ratio per round and over
all steps by the median step and by the fastest step (on a shared machine other processes only ever add time, so
the fastest steps are the least disturbed comparison). Default dims: baselines.md section 9 (4 layers, hidden 256,
4 heads, seq 256, batch 8, vocab 8192, fp32).

First it prints the activation memory autograd keeps after one forward of the same model for train.recompute =
none / selective / full (``--memory-only`` stops there):

    .venv/bin/python benchmarks/train_throughput.py --memory-only [--memory-dtype bf16]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DIMS = dict(layers=4, hidden=256, heads=4, seq=256, batch=8, vocab=8192)

REFERENCE = r'''
import math, sys, time, json
import torch, torch.nn as nn, torch.nn.functional as F
from pretrain.data.batches import SyntheticDataset   # the same data
import numpy as np
L, H, NH, S, B, V, STEPS, WARM = [int(a) for a in sys.argv[1:9]]

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(H), nn.LayerNorm(H)
        self.c_attn, self.c_proj = nn.Linear(H, 3 * H), nn.Linear(H, H)
        self.c_fc, self.c_mlp = nn.Linear(H, 4 * H), nn.Linear(4 * H, H)
    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(H, dim=2)
        q, k, v = (z.view(b, t, NH, H // NH).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, H)
        x = x + self.c_proj(y)
        return x + self.c_mlp(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, H), nn.Embedding(S, H)
        self.h = nn.ModuleList(Block() for _ in range(L))
        self.ln_f = nn.LayerNorm(H)
        self.lm_head = nn.Linear(H, V, bias=False)
        self.lm_head.weight = self.wte.weight
        for n, p in self.named_parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, 0, 0.02 / math.sqrt(2 * L) if n.endswith(("c_proj.weight", "c_mlp.weight")) else 0.02)
    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for blk in self.h:
            x = blk(x)
        return self.lm_head(self.ln_f(x))

torch.manual_seed(0)
model = GPT()
decay = [p for p in model.parameters() if p.dim() >= 2]
no_decay = [p for p in model.parameters() if p.dim() < 2]
opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                        lr=3e-4, betas=(0.9, 0.95))
ds = SyntheticDataset((STEPS + WARM) * B, S, V, 1234)
times = []
for step in range(STEPS + WARM):
    batch = torch.from_numpy(np.stack([ds[i] for i in range(step * B, (step + 1) * B)]))
    x, y = batch[:, :-1], batch[:, 1:]
    loss = F.cross_entropy(model(x).flatten(0, 1).float(), y.flatten())
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    loss.item()
    times.append(time.time())
print(json.dumps({"step_times": [b - a for a, b in zip(times[WARM - 1:], times[WARM:])]}))
'''


def run_reference(steps: int, warm: int, env: dict) -> list[float]:
    d = DIMS
    out = subprocess.run([sys.executable, "-c", REFERENCE, *map(str, (d["layers"], d["hidden"], d["heads"], d["seq"],
                                                                     d["batch"], d["vocab"], steps, warm))],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"reference loop failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])["step_times"]


def run_ours(steps: int, warm: int, env: dict) -> list[float]:
    d = DIMS
    with tempfile.TemporaryDirectory() as tmp:
        sets = {"model.vocab_size": d["vocab"], "model.hidden_size": d["hidden"], "model.num_layers": d["layers"],
                "model.num_heads": d["heads"], "data.kind": "'synthetic'", "data.seq_len": d["seq"],
                "train.micro_batch": d["batch"], "train.global_batch": d["batch"], "train.steps": steps + warm,
                "train.eval_interval": 0, "train.lr": 3e-4, "train.warmup_steps": 0, "train.precision": "'fp32'",
                "train.device": "'cpu'", "log.dir": f"'{tmp}/log'", "log.interval": 1000,
                "log.tensorboard": "false", "checkpoint.interval": 0}
        args = [sys.executable, "-m", "pretrain", "train"]
        for k, v in sets.items():
            args += ["--set", f"{k}={v}"]
        out = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(f"pretrain train failed:\n{out.stdout}\n{out.stderr}")
        rows = [json.loads(line) for line in (Path(tmp) / "log" / "metrics.jsonl").read_text().splitlines()]
    t = [r["time"] for r in rows]  # written after each step's metrics line: the whole loop's wall time
    return [b - a for a, b in zip(t[warm - 1:], t[warm:])]


def activation_memory(dtype_name: str) -> None:
    """Bytes autograd keeps after one forward (loss included) of the DIMS model, per train.recompute mode, counted
    with pretrain.memory.LiveBytes (every tensor storage allocated and still alive), and the peak over forward +
    backward."""
    import torch

    from pretrain.config import Config, finalize
    from pretrain.memory import LiveBytes
    from pretrain.loss import cross_entropy
    from pretrain.model import GPT
    from pretrain.parallel import apply_recompute

    d = DIMS
    cfg = Config()
    cfg.data.kind, cfg.data.seq_len = "synthetic", d["seq"]
    for k, v in dict(vocab_size=d["vocab"], hidden_size=d["hidden"], num_layers=d["layers"],
                     num_heads=d["heads"]).items():
        setattr(cfg.model, k, v)
    finalize(cfg, 1)
    dtype = torch.bfloat16 if dtype_name == "bf16" else torch.float32
    x = torch.randint(0, d["vocab"], (d["batch"], d["seq"] + 1), generator=torch.Generator().manual_seed(0))
    got = {}
    for mode in ("none", "selective", "full"):
        model = GPT(cfg.model)
        apply_recompute(model, mode)
        with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32), LiveBytes() as mem:
            loss = cross_entropy(model(x[:, :-1]), x[:, 1:])
            held = mem.current
            loss.backward()
        got[mode] = (held, mem.peak)
    print(f"saved activations after forward ({dtype_name}, batch {d['batch']} x seq {d['seq']}, {d['layers']} layers, "
          f"hidden {d['hidden']}; logits and loss included):")
    for mode, (held, peak) in got.items():
        print(f"  recompute {mode:>9}: {held / 2**20:8.2f} MiB saved ({held / got['none'][0]:.2f} of none), "
              f"peak over forward + backward {peak / 2**20:8.2f} MiB")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memory-only", action="store_true", help="only the saved-activation bytes per recompute mode")
    ap.add_argument("--memory-dtype", default="fp32", choices=["fp32", "bf16"],
                    help="compute dtype of the memory figures (bf16 matmuls are very slow on most CPUs)")
    ap.add_argument("--steps", type=int, default=15, help="timed steps per round")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": str(a.threads), "PYTHONPATH": str(ROOT)}
    import torch

    sys.path.insert(0, str(ROOT))
    activation_memory(a.memory_dtype)
    if a.memory_only:
        return 0

    print(f"dims {DIMS}; torch {torch.__version__}; {a.threads} threads; {a.rounds} rounds x {a.steps} timed steps")
    tokens = DIMS["batch"] * DIMS["seq"]
    ref, ours = [], []
    t0 = time.time()
    for r in range(a.rounds):
        ref.append(run_reference(a.steps, a.warmup, env))
        ours.append(run_ours(a.steps, a.warmup, env))
        rt, ot = tokens * len(ref[-1]) / sum(ref[-1]), tokens * len(ours[-1]) / sum(ours[-1])
        print(f"round {r + 1}: reference {rt:,.0f} tok/s, pretrain train {ot:,.0f} tok/s, ratio {ot / rt:.3f}",
              flush=True)
    per_round = [sum(f) / sum(o) for o, f in zip(ours, ref)]
    med_ref = statistics.median(x for f in ref for x in f)
    med_ours = statistics.median(x for o in ours for x in o)
    best_ref, best_ours = min(x for f in ref for x in f), min(x for o in ours for x in o)
    print(f"reference loop   {tokens / med_ref:,.0f} tok/s (median step), {tokens / best_ref:,.0f} (fastest step)")
    print(f"pretrain train   {tokens / med_ours:,.0f} tok/s (median step), {tokens / best_ours:,.0f} (fastest step)")
    print(f"ratio, median of rounds: {statistics.median(per_round):.3f}; median step: {med_ref / med_ours:.3f}; "
          f"fastest step (least disturbed by other load): {best_ref / best_ours:.3f}  (goal >= 0.95) "
          f"in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
