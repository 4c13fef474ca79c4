"""The peak that MFU is measured against, per device.

- ``train.peak_tflops`` set: that figure ("configured peak").
- CUDA: the vendor's dense (no sparsity) bf16 / fp32 tensor-core peak of the device, matched on its exact name
  (``torch.cuda.get_device_name``); a device not in the table gets no peak and MFU is printed "unknown" rather
  than a guess.
- CPU: no vendor figure applies; the matmul peak is measured at start (the best of a few square matmuls in the
  compute dtype with this process's threads) and MFU is labelled "% of measured matmul peak".
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass

import torch

# (regular expression on the lower-cased device name, label, dense bf16 TFLOP/s, fp32 (TF32 off) TFLOP/s);
# the first match wins, so the more specific names come first. Sources: NVIDIA's data sheets (sparsity halved).
CUDA_PEAKS = [
    (r"\bh100\b.*\bnvl\b", "H100 NVL", 835.0, 60.0),
    (r"\bh100\b.*\bpcie\b", "H100 PCIe", 756.0, 51.0),
    (r"\bh100\b.*(sxm|hbm3)", "H100 SXM", 989.0, 67.0),
    (r"\bh200\b.*\bnvl\b", "H200 NVL", 835.0, 60.0),
    (r"\bh200\b", "H200 SXM", 989.0, 67.0),
    (r"\ba100\b", "A100", 312.0, 19.5),
    (r"\bb200\b", "B200", 2250.0, 75.0),
]


@dataclass(frozen=True)
class Peak:
    flops: float | None  # FLOP/s per device; None: unknown
    label: str  # what the MFU figure is a percentage of

    def fraction(self, flops_per_s: float) -> float | None:
        return None if not self.flops else flops_per_s / self.flops


def cuda_peak(name: str, dtype: torch.dtype) -> Peak:
    low = name.lower()
    for pattern, label, bf16, fp32 in CUDA_PEAKS:
        if re.search(pattern, low):
            if dtype == torch.bfloat16:
                return Peak(bf16 * 1e12, f"{label} bf16 dense peak ({bf16:g} TFLOP/s)")
            return Peak(fp32 * 1e12, f"{label} fp32 peak ({fp32:g} TFLOP/s)")
    return Peak(None, f"unknown device {name!r}: MFU unknown (set train.peak_tflops)")


_MEASURED: dict = {}


def measure_matmul_peak(dtype: torch.dtype, device: torch.device = torch.device("cpu"), max_n: int = 2048,
                        reps: int = 3, budget_s: float = 0.05) -> float:
    """FLOP/s of the best of ``reps`` square matmuls in ``dtype``: the size doubles from 256 while one matmul takes
    under ``budget_s`` (so that a slow dtype, e.g. bf16 on a CPU without bf16 units, costs well under a second),
    cached per (dtype, device, threads)."""
    key = (dtype, str(device), torch.get_num_threads())
    if key not in _MEASURED:
        def timed(a, b):
            t0 = time.perf_counter()
            torch.mm(a, b)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            return time.perf_counter() - t0

        n = 256
        while True:
            a = torch.randn(n, n, device=device).to(dtype)
            b = torch.randn(n, n, device=device).to(dtype)
            torch.mm(a, b)  # warm-up
            dt = timed(a, b)
            if dt >= budget_s or n >= max_n:
                break
            n *= 2
        best = min([dt] + [timed(a, b) for _ in range(reps - 1)])
        _MEASURED[key] = 2.0 * n ** 3 / best
    return _MEASURED[key]


def device_peak(device: torch.device, dtype: torch.dtype, override_tflops: float | None = None) -> Peak:
    if override_tflops:
        return Peak(override_tflops * 1e12, f"configured peak ({override_tflops:g} TFLOP/s)")
    if device.type == "cuda":
        return cuda_peak(torch.cuda.get_device_name(device), dtype)
    flops = measure_matmul_peak(dtype, device)
    return Peak(flops, f"measured matmul peak ({flops / 1e9:.1f} GFLOP/s, {torch.get_num_threads()} threads)")
