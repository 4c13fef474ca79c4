"""MFU of `pretrain train` on one GPU, for two shapes:

- 1.3b: a GPT of about 1.3B parameters (hidden 2048, 24 layers, 16 heads, GeLU MLP, learned positions, seq 2048,
  vocab 50257 padded to 50304);
- 7b-shape: Llama-2-7B's layer shape (hidden 4096, 32 heads, SwiGLU 11008, RMSNorm, RoPE, no biases, untied head,
  vocab 32000, seq 2048) with fewer layers (--layers-7b, default 4) so that it fits one GPU.

Both train in bf16 (autocast over fp32 master weights, fp32 gradient reduction), flash attention through SDPA,
torch.compile per block / norm / head / loss, fused AdamW, chunked cross entropy, on synthetic tokens. Printed per
shape: tokens/s, MFU and HFU (median over the steps after the warm-up, which pays for compilation) against the
device's dense bf16 peak (pretrain/mfu.py: H100 SXM / PCIe / NVL, H200, A100, B200 matched by name; another device
prints "MFU unknown"), and the peak GPU memory. FLOPs: 3 x forward, causal attention counted as computed
(s (s + 1) / 2 query-key pairs), HFU adds the forward recomputed by --recompute full. Goal: MFU >= 50% at 1.3B
on one H100/H200.

    .venv/bin/python benchmarks/gpu_mfu.py [--shapes 1.3b 7b-shape] [--micro-batch 8] [--global-batch 16]
    .venv/bin/python benchmarks/gpu_mfu.py --cpu-smoke     # tiny shapes on the CPU: the script runs end to end

Without CUDA (and without --cpu-smoke) it refuses with exit code 2: there is nothing meaningful to measure.
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHAPES = {
    "1.3b": {"model.vocab_size": 50257, "model.hidden_size": 2048, "model.num_layers": 24, "model.num_heads": 16,
             "data.seq_len": 2048},
    "7b-shape": {"model.vocab_size": 32000, "model.hidden_size": 4096, "model.num_layers": 4, "model.num_heads": 32,
                 "model.ffn_hidden_size": 11008, "model.mlp": "swiglu", "model.norm": "rmsnorm",
                 "model.position": "rope", "model.bias": False, "model.tie_embeddings": False,
                 "data.seq_len": 2048},
}
SMOKE = {"model.hidden_size": 64, "model.num_heads": 4, "data.seq_len": 64}


def run_shape(name: str, a, device: str) -> dict:
    import torch

    from pretrain.config import load_config
    from pretrain.model import GPT, num_params
    from pretrain.train import train

    sets = dict(SHAPES[name])
    if name == "7b-shape":
        sets["model.num_layers"] = a.layers_7b
    if a.cpu_smoke:
        sets.update(SMOKE)
        sets["model.num_layers"] = 2
        sets["model.vocab_size"] = 512
        if "model.ffn_hidden_size" in sets:
            sets["model.ffn_hidden_size"] = 192
    with tempfile.TemporaryDirectory() as tmp:
        sets.update({
            "data.kind": "synthetic", "train.steps": a.steps, "train.micro_batch": a.micro_batch,
            "train.global_batch": a.global_batch, "train.lr": 2e-4, "train.min_lr": 2e-5, "train.warmup_steps": 5,
            "train.eval_interval": 0, "train.precision": "fp32" if a.cpu_smoke else "bf16", "train.device": device,
            "train.compile": not a.no_compile, "train.recompute": a.recompute,
            "log.dir": f"{tmp}/log", "log.interval": a.log_interval, "log.tensorboard": False,
        })
        if a.peak_tflops:
            sets["train.peak_tflops"] = a.peak_tflops
        cfg = load_config(None, [])
        for key, value in sets.items():
            table, k = key.split(".")
            setattr(getattr(cfg, table), k, value)
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        t0 = time.time()
        train(cfg)
        wall = time.time() - t0
        rows = [json.loads(line) for line in (Path(tmp) / "log" / "metrics.jsonl").read_text().splitlines()]
    timed = rows[a.warmup:] or rows
    with torch.device("meta"):
        n = num_params(GPT(cfg.model))

    def med(key):
        vals = [r[key] for r in timed if r.get(key) is not None]
        return statistics.median(vals) if vals else None

    if device == "cuda":
        mem = f"peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB"
    else:
        mem = f"peak process RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB (CPU)"
    return {"name": name, "params": n, "layers": cfg.model.num_layers, "tps": med("tokens_per_s"),
            "mfu": med("mfu"), "hfu": med("hfu"), "loss": rows[-1]["loss"], "mem": mem, "wall": wall}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10, help="first steps left out of the medians (compilation)")
    ap.add_argument("--log-interval", type=int, default=5, help="steps between metric fetches (host syncs)")
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--global-batch", type=int, default=16)
    ap.add_argument("--layers-7b", type=int, default=4, help="layers of the 7b-shape model")
    ap.add_argument("--recompute", default="none", choices=["none", "selective", "full"])
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--peak-tflops", type=float, default=None, help="override the device's peak (unknown devices)")
    ap.add_argument("--cpu-smoke", action="store_true",
                    help="tiny shapes (hidden 64, 2 layers, seq 64) in fp32 on the CPU, no compile: proves the script "
                         "runs end to end; MFU is then %% of the measured CPU matmul peak")
    a = ap.parse_args()

    import torch

    if a.cpu_smoke:
        device = "cpu"
        a.no_compile = True
        a.steps, a.warmup, a.micro_batch, a.global_batch, a.log_interval = 6, 2, 2, 4, 2
    elif not torch.cuda.is_available():
        print("gpu_mfu.py needs a CUDA GPU (it measures bf16 MFU against the device's dense peak); torch "
              f"{torch.__version__} sees none here. Run it on a machine with an H100/H200, or pass --cpu-smoke to "
              "check that it runs end to end on tiny shapes.", file=sys.stderr)
        return 2
    else:
        device = "cuda"
    from pretrain.mfu import device_peak

    dev = torch.device(device)
    peak = device_peak(dev, torch.float32 if a.cpu_smoke else torch.bfloat16, a.peak_tflops)
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    print(f"device {name}; MFU against the {peak.label}; micro-batch {a.micro_batch}, global batch "
          f"{a.global_batch}; recompute {a.recompute}; compile {not a.no_compile}")
    results = [run_shape(s, a, device) for s in a.shapes]
    print()
    for r in results:
        util = ("MFU unknown" if r["mfu"] is None else
                f"MFU {100 * r['mfu']:.1f}%  HFU {100 * r['hfu']:.1f}%")
        goal = ""
        if r["name"] == "1.3b" and r["mfu"] is not None and not a.cpu_smoke:
            goal = f"  (goal MFU >= 50%: {'met' if r['mfu'] >= 0.5 else 'NOT met'})"
        size = f"{r['params'] / 1e9:.2f}B" if r["params"] >= 1e8 else f"{r['params'] / 1e6:.2f}M"
        print(f"{r['name']:>9}: {size} parameters, {r['layers']} layers; tokens/s "
              f"{r['tps']:,.0f}  {util}{goal}; {r['mem']}; final loss {r['loss']:.3f}; wall {r['wall']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
