"""`pretrain train --config C.toml [--set table.key=value ...]`: train a GPT in one process, or under
`torchrun --nproc-per-node N -m pretrain train ...` with tensor (+ sequence), pipeline and data parallelism
(the work: pretrain/train.py). Per step one JSON line (step, loss, lr, grad_norm, tokens_per_s, mfu, hfu, ...)
is appended to LOG_DIR/metrics.jsonl and written to TensorBoard."""
from __future__ import annotations

import sys

INTERRUPT_HINT = "rerun the same command to resume from the newest checkpoint saved, if any"  # printed on Ctrl-C (dispatch)
HELP_EPILOG = """metrics: tokens/s, MFU and HFU per step. FLOPs per iteration = 3 x forward (a multiply-add is 2 FLOPs);
the causal attention core is counted as computed, s (s + 1) / 2 query-key pairs per head dim, not s^2; HFU adds
the forward recomputed by train.recompute = "full" ("selective" recomputes only pointwise ops: HFU = MFU). The
peak: train.peak_tflops if set; on CUDA the device's dense bf16 (or fp32) figure, matched by name (H100 SXM /
PCIe / NVL, H200, A100, B200), "MFU unknown" for another device; on CPU a matmul measured at start ("% of
measured matmul peak"; a step that beats it, the machine having been busier during the measurement, prints
"mfu n/a" with its TFLOP/s). Losses and gradient norms stay on the device and are fetched on the first step of
a run and every log.interval steps; a non-finite one stops the run (exit code 3) before any checkpoint is
written. The first step of a run is printed as soon as it is done, then every log.interval-th.

examples:
  pretrain train --config pretrain/configs/tiny.toml
  pretrain train --config pretrain/configs/tiny.toml --set data.kind=synthetic --set model.vocab_size=256
  torchrun --nproc-per-node 4 -m pretrain train --config pretrain/configs/tiny.toml --set parallel.tp=2 --set parallel.pp=2
"""


def add_arguments(parser) -> None:
    import argparse

    parser.epilog = HELP_EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--config", help="TOML config ([model] [parallel] [train] [data] [checkpoint] [log])")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="TABLE.KEY=VALUE",
                        help="override a config value, e.g. --set parallel.tp=2 --set train.steps=100")


def run(args) -> int:
    from pretrain.config import ConfigError, load_config
    from pretrain.metrics import NonFiniteError
    from pretrain.train import train

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
