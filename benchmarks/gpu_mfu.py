"""MFU of `pretrain train` on one GPU: a GPT of about 1.3B parameters (hidden 2048, 24 layers, 16 heads, seq 2048,
vocab 50257 padded to 50304), bf16 autocast over fp32 master weights, flash attention through SDPA, torch.compile
per block, fused AdamW, trained for 30 steps on synthetic tokens. Prints tokens/s, MFU and HFU against 989 TFLOP/s
(H100/H200 dense bf16) as the median over the steps after the warm-up (compilation). Goal: MFU >= 50%; the whole
run must finish within 5 minutes on one H200.

    .venv/bin/python benchmarks/gpu_mfu.py [--micro-batch 8] [--global-batch 16] [--recompute none]

Without CUDA it refuses (exit code 2): there is nothing meaningful to measure on a CPU.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PEAK_TFLOPS = 989.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5, help="first steps left out of the medians (compilation)")
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--global-batch", type=int, default=16)
    ap.add_argument("--recompute", default="none", choices=["none", "selective", "full"])
    ap.add_argument("--no-compile", action="store_true")
    a = ap.parse_args()

    import torch

    if not torch.cuda.is_available():
        print("gpu_mfu.py needs a CUDA GPU (it measures bf16 MFU against 989 TFLOP/s); torch "
              f"{torch.__version__} sees none here. Run it on a machine with an H100/H200.", file=sys.stderr)
        return 2
    from pretrain.config import load_config
    from pretrain.train import train

    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        sets = {
            "model.vocab_size": 50257, "model.hidden_size": 2048, "model.num_layers": 24, "model.num_heads": 16,
            "data.kind": "synthetic", "data.seq_len": 2048,
            "train.steps": a.steps, "train.micro_batch": a.micro_batch, "train.global_batch": a.global_batch,
            "train.lr": 2e-4, "train.min_lr": 2e-5, "train.warmup_steps": 5, "train.eval_interval": 0,
            "train.precision": "bf16", "train.device": "cuda", "train.compile": not a.no_compile,
            "train.recompute": a.recompute, "train.peak_tflops": PEAK_TFLOPS,
            "log.dir": f"{tmp}/log", "log.interval": 5, "log.tensorboard": False,
        }
        cfg = load_config(None, [])
        for key, value in sets.items():
            table, k = key.split(".")
            setattr(getattr(cfg, table), k, value)
        train(cfg)
        rows = [json.loads(line) for line in (Path(tmp) / "log" / "metrics.jsonl").read_text().splitlines()]
    timed = rows[a.warmup:]
    from pretrain.model import GPT, num_params

    with torch.device("meta"):
        n = num_params(GPT(cfg.model))
    tps = statistics.median(r["tokens_per_s"] for r in timed)
    mfu = statistics.median(r["mfu"] for r in timed)
    hfu = statistics.median(r["hfu"] for r in timed)
    print(f"device {torch.cuda.get_device_name()}; {n / 1e9:.2f}B parameters; micro-batch {a.micro_batch}, "
          f"global batch {a.global_batch} x 2048 tokens; recompute {a.recompute}; compile {not a.no_compile}")
    print(f"tokens/s {tps:,.0f}  MFU {100 * mfu:.1f}%  HFU {100 * hfu:.1f}%  (median of steps {a.warmup + 1}-"
          f"{a.steps} against {PEAK_TFLOPS:g} TFLOP/s; goal MFU >= 50%: {'met' if mfu >= 0.5 else 'NOT met'})")
    print(f"final loss {rows[-1]['loss']:.3f}; peak memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB; "
          f"wall {time.time() - t0:.0f} s (limit 300 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
