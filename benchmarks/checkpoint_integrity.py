"""What checkpoint integrity costs: for GPTs of a few sizes (one process, CPU), the time of a plain DCP save, of
Quarry's save (non-finite check + DCP + RNG JSON + SHA-256 manifest), and of verifying a checkpoint against its
manifest (what every process does once on resume), with the checkpoint's size and the hashing rate.

Then what a background save (checkpoint.async_save) saves: the same training steps (forward, backward, AdamW)
with a checkpoint every few steps, written in the foreground (training waits for the DCP files and the manifest)
and in the background (training waits only for the copy into host memory), as the mean time of a step that
saves and of all steps, side by side.

    python benchmarks/checkpoint_integrity.py                # hidden 256, 512, 768; async: hidden 768
    python benchmarks/checkpoint_integrity.py --hidden 512 1024 --layers 4 --async-hidden 1024

Timings are noisy on a shared machine; the ratios are measured side by side in one run.
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import torch


def _best(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def measure(hidden: int, layers: int, repeats: int, tmp: Path) -> dict:
    import torch.distributed.checkpoint as dcp

    from pretrain import checkpoint as ckpt
    from pretrain.checkpoint import manifest
    from pretrain.config import Config, finalize
    from pretrain.model import GPT

    cfg = Config()
    cfg.model.vocab_size, cfg.model.hidden_size, cfg.model.num_layers = 8192, hidden, layers
    cfg.model.num_heads = max(1, hidden // 64)
    cfg.data.seq_len = 256
    finalize(cfg, 1)
    torch.manual_seed(0)
    model = GPT(cfg.model)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.randint(0, 8192, (1, 16))).sum().backward()
    opt.step()  # optimizer state exists, as in a real checkpoint
    meta = {"step": 1, "consumed_samples": 1, "scheduler": {"step": 1}, "world_size": 1}

    def plain():
        out = tmp / "plain"
        shutil.rmtree(out, ignore_errors=True)
        _, optim = ckpt.optim_state([model], [opt])
        with ckpt.save_load._quiet():
            dcp.save({"model": ckpt.model_state([model]), "optim": optim}, checkpoint_id=str(out))

    def quarry():
        ckpt.save(tmp / "quarry", 1, [model], [opt], meta, cfg.model)

    t_plain = _best(plain, repeats)
    t_save = _best(quarry, repeats)
    d = ckpt.step_dir(tmp / "quarry", 1)
    size = sum(p.stat().st_size for p in d.rglob("*") if p.is_file())
    t_verify = _best(lambda: manifest.problems(d), repeats)
    assert manifest.problems(d) == []
    return {"hidden": hidden, "params": sum(p.numel() for p in model.parameters()), "mb": size / 1e6,
            "plain_s": t_plain, "save_s": t_save, "verify_s": t_verify}


def measure_async(hidden: int, layers: int, steps: int, every: int, tmp: Path) -> dict:
    """Training steps with a checkpoint every ``every`` steps, sync then async: seconds per step."""
    from pretrain import checkpoint as ckpt
    from pretrain.config import Config, finalize
    from pretrain.model import GPT

    cfg = Config()
    cfg.model.vocab_size, cfg.model.hidden_size, cfg.model.num_layers = 8192, hidden, layers
    cfg.model.num_heads = max(1, hidden // 64)
    cfg.data.seq_len = 128
    finalize(cfg, 1)
    out = {"params": 0}
    for mode in ("sync", "async"):
        torch.manual_seed(0)
        model = GPT(cfg.model)
        opt = torch.optim.AdamW(model.parameters())
        out["params"] = sum(p.numel() for p in model.parameters())
        tokens = torch.randint(0, 8192, (2, 129))
        saving, plain = [], []
        for step in range(1, steps + 1):
            t0 = time.perf_counter()
            loss = torch.nn.functional.cross_entropy(model(tokens[:, :-1]).flatten(0, 1), tokens[:, 1:].flatten())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if step % every == 0:
                meta = {"step": step, "consumed_samples": step, "scheduler": {}, "world_size": 1}
                ckpt.save(tmp / mode, step, [model], [opt], meta, cfg.model, async_save=mode == "async")
                saving.append(time.perf_counter() - t0)
            else:
                plain.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        ckpt.wait_async()
        tail = time.perf_counter() - t0  # the last background save, waited for at the end of the run
        out[mode] = {"saving": sum(saving) / len(saving), "plain": sum(plain[1:]) / max(1, len(plain) - 1),
                     "all": (sum(saving) + sum(plain) + tail) / steps}
        shutil.rmtree(tmp / mode, ignore_errors=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hidden", type=int, nargs="+", default=[256, 512, 768], help="hidden sizes (default 256 512 768)")
    ap.add_argument("--layers", type=int, default=4, help="layers (default 4)")
    ap.add_argument("--repeats", type=int, default=3, help="best of N (default 3)")
    ap.add_argument("--async-hidden", type=int, default=768, help="hidden size of the async comparison (default "
                    "768; 0: skip it)")
    ap.add_argument("--async-steps", type=int, default=12, help="training steps per mode (default 12)")
    ap.add_argument("--async-every", type=int, default=3, help="a checkpoint every N steps (default 3)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    print(f"{'hidden':>6} {'params':>11} {'ckpt MB':>8} {'DCP save s':>10} {'Quarry save s':>13} {'ratio':>6} "
          f"{'verify s':>8} {'verify MB/s':>11}")
    with tempfile.TemporaryDirectory(prefix="quarry-ckpt-bench-") as tmp:
        for h in args.hidden:
            r = measure(h, args.layers, args.repeats, Path(tmp))
            print(f"{r['hidden']:>6} {r['params']:>11,} {r['mb']:>8.1f} {r['plain_s']:>10.3f} {r['save_s']:>13.3f} "
                  f"{r['save_s'] / r['plain_s']:>6.2f} {r['verify_s']:>8.3f} {r['mb'] / r['verify_s']:>11.0f}")
        if args.async_hidden:
            r = measure_async(args.async_hidden, args.layers, args.async_steps, args.async_every, Path(tmp))
            print(f"\nstep time with a checkpoint every {args.async_every} steps (hidden {args.async_hidden}, "
                  f"{r['params']:,} parameters, {args.async_steps} steps, seconds):")
            print(f"{'checkpoint':>10} {'step w/o save':>13} {'step w/ save':>12} {'mean step':>9}")
            for mode in ("sync", "async"):
                m = r[mode]
                print(f"{mode:>10} {m['plain']:>13.3f} {m['saving']:>12.3f} {m['all']:>9.3f}")
            print(f"async/sync: step with a save {r['async']['saving'] / r['sync']['saving']:.2f}, "
                  f"mean step {r['async']['all'] / r['sync']['all']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
