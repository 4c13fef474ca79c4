"""What training reports per step: loss, learning rate, gradient norm, tokens/s, MFU and HFU.

The loop keeps each step's loss and gradient norm on the device (``StepWindow``) and fetches them in one host
synchronisation on the first step of a run, every log.interval steps, before an evaluation or a checkpoint, and
at the end; a non-finite value then stops the run before any checkpoint is written. ``MetricsLog`` (rank 0)
appends one JSON line per step to LOG_DIR/metrics.jsonl (a resumed run appends; the last line for a step wins),
writes TensorBoard, and prints the first step of a run and every log.interval-th.

MFU is the model's FLOPs (pretrain/flops.py) over the device peak (pretrain/mfu.py). On a CPU the peak is a
matmul measured at start; when a step beats it (the machine was busier during the measurement) the figure is
not a utilisation and is printed as "n/a" with the achieved TFLOP/s (metrics.jsonl keeps the raw ratio).
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path

import torch

from pretrain.config import Config
from pretrain.flops import flops_per_iteration
from pretrain.mfu import Peak


class NonFiniteError(RuntimeError):
    """A loss or gradient norm that is not finite: training stops before any checkpoint is written."""


def check_finite(rows: list[dict], last_ckpt) -> None:
    for r in rows:
        bad = [k for k in ("loss", "grad_norm") if not math.isfinite(r[k])]
        if bad:
            what = " and ".join(f"{k} = {r[k]}" for k in bad)
            where = f"the latest checkpoint is {last_ckpt}" if last_ckpt else "no checkpoint was written"
            raise NonFiniteError(f"step {r['step']}: {what} is not finite; training stopped before writing a "
                                 f"checkpoint ({where}). Lower train.lr, raise train.warmup_steps or "
                                 f"train.grad_clip, or check the data, then resume.")


ABOVE_PEAK_NOTE = ("note: mfu n/a: the steps ran faster than the {peak}, so that figure is no utilisation (the "
                   "peak was measured at start while the machine was busier); set train.peak_tflops for one")


def utilisation_text(rec: dict, peak_name: str) -> list[str]:
    """The MFU / HFU part of a printed step line; a fraction above 1 is no utilisation: n/a."""
    if rec["mfu"] is None:
        return ["mfu unknown", "hfu unknown"]
    if rec["mfu"] > 1 or rec["hfu"] > 1:
        return [f"mfu n/a ({rec['tflops_per_device']:.3g} TFLOP/s, above the {peak_name})"]
    return [f"mfu {100 * rec['mfu']:.2f}%", f"hfu {100 * rec['hfu']:.2f}% of {peak_name}"]


class MetricsLog:
    """rank 0: stdout on the first step of a run and every log.interval steps, LOG_DIR/metrics.jsonl and
    TensorBoard one line per step (written when the loop fetches its metrics from the device)."""

    def __init__(self, cfg: Config, rank: int):
        self.enabled = rank == 0
        self.interval = max(1, cfg.log.interval)
        self.peak_name = "peak"
        self.noted_above_peak = False
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

    def step(self, rec: dict, show: bool = False) -> None:
        """Record one step; print it too when ``show``, on every log.interval-th step and with a validation loss."""
        if not self.enabled:
            return
        if self.file:
            self.file.write(json.dumps(rec) + "\n")
            self.file.flush()
        if self.tb:
            for k, v in rec.items():
                if k not in ("step", "time") and isinstance(v, (int, float)):
                    self.tb.add_scalar(("val/" if k.startswith("val_") else "train/") + k, v, rec["step"])
        if show or rec["step"] % self.interval == 0 or "val_loss" in rec:
            parts = [f"step {rec['step']}", f"loss {rec['loss']:.4f}", f"lr {rec['lr']:.3e}",
                     f"grad_norm {rec['grad_norm']:.3f}", f"tok/s {rec['tokens_per_s']:,.0f}",
                     *utilisation_text(rec, self.peak_name)]
            if "val_loss" in rec:
                parts.append(f"val_loss {rec['val_loss']:.4f}")
            print(" | ".join(parts), flush=True)
            if rec["mfu"] is not None and (rec["mfu"] > 1 or rec["hfu"] > 1) and not self.noted_above_peak:
                print(ABOVE_PEAK_NOTE.format(peak=self.peak_name), flush=True)
                self.noted_above_peak = True

    def eval(self, row: dict) -> None:
        """One evaluation pass: ``{"step", "consumed_samples", "tokens", "eval/NAME/METRIC": value, ...}`` to
        metrics.jsonl (its own line: no ``loss``), TensorBoard (``eval/NAME/METRIC`` against tokens seen) and
        stdout."""
        if not self.enabled:
            return
        if self.file:
            self.file.write(json.dumps(row) + "\n")
            self.file.flush()
        figures = {k: v for k, v in row.items() if k.startswith("eval/")}
        if self.tb:
            for k, v in figures.items():
                self.tb.add_scalar(k, v, row["tokens"])
        print(f"step {row['step']} eval | " + " | ".join(f"{k[5:]} {v:.4f}" for k, v in figures.items()), flush=True)

    def close(self) -> None:
        if self.file:
            self.file.close()
        if self.tb:
            self.tb.close()


class StepWindow:
    """The steps since the last fetch, their losses and gradient norms still on the device, and the training time
    they took (evaluation and checkpoint time left out). ``flush`` fetches them, checks them, adds throughput and
    MFU, and hands them to the log; the fetched values accumulate in ``losses`` and ``grad_norms``."""

    def __init__(self, cfg: Config, peak: Peak, world: int, log: MetricsLog, first_step: int):
        self.cfg, self.peak, self.world, self.log, self.first_step = cfg, peak, world, log, first_step
        self.pending: list[dict] = []
        self.losses: dict[int, float] = {}
        self.grad_norms: dict[int, float] = {}
        self.t0 = time.perf_counter()

    def add(self, rec: dict) -> None:
        self.pending.append(rec)

    def due(self, step: int) -> bool:
        """Fetch now: the run's first step (printed at once), or a log.interval-th."""
        return step == self.first_step or step % self.log.interval == 0

    def leave_out(self, seconds: float) -> None:
        """Time spent outside training (an evaluation) does not count towards the window's steps."""
        self.t0 += seconds

    def restart(self) -> None:
        self.t0 = time.perf_counter()

    def flush(self, last_ckpt) -> None:
        if not self.pending:
            return
        rows = self.pending
        values = torch.stack([torch.stack([r["loss"].double(), r["grad_norm"].double()]) for r in rows])
        values = values.tolist()  # the one host synchronisation of the window
        dt = (time.perf_counter() - self.t0) / len(rows)
        self.restart()
        for r, (loss, gn) in zip(rows, values):
            r["loss"], r["grad_norm"] = loss, gn
        check_finite(rows, last_ckpt)
        for r in rows:
            self.losses[r["step"]], self.grad_norms[r["step"]] = r["loss"], r["grad_norm"]
            r.update(self.throughput(r["global_batch"], dt))
            self.log.step(r, show=r["step"] == self.first_step)
        self.pending = []

    def throughput(self, gbs: int, dt: float) -> dict:
        t, seq, world = self.cfg.train, self.cfg.data.seq_len, self.world
        flops = flops_per_iteration(self.cfg.model, gbs, seq)
        hw_flops = flops_per_iteration(self.cfg.model, gbs, seq, t.recompute)
        mfu = self.peak.fraction(flops / (dt * world))
        return {"tokens_per_s": gbs * seq / dt, "mfu": mfu,
                "hfu": None if mfu is None else self.peak.fraction(hw_flops / (dt * world)),
                "step_time_s": dt, "tflops_per_device": flops / dt / world / 1e12}
