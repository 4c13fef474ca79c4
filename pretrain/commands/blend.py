"""`pretrain blend build|inspect`: prebuild a blend's index cache, or show what it draws from each dataset
(the work: pretrain/data/blend.py)."""
from __future__ import annotations

import argparse
import math
import sys

from curate.commands.argtypes import positive
from pretrain.data.defaults import DEFAULT_MAX_EPOCHS, DEFAULT_SEED, ORDERS



def _count(text: str) -> int:
    """'1e6', '2.5B', '300M', '1_000' -> int."""
    t = text.strip().replace("_", "").replace(",", "")
    scale = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12}.get(t[-1:].lower())
    try:
        value = float(t[:-1]) * scale if scale else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a count: {text!r} (e.g. 1e9, 300M, 2.5B)") from None
    if value < 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"not a count: {text!r}")
    return int(round(value))


def seed_arg(text: str) -> int:
    """A seed numpy's RandomState takes (Megatron's order), as ``train.seed``: 0 to 2**32 - 1 (the stable order
    took any integer modulo 2**64, so -1 and 2**64 - 1 built the same blend)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    from pretrain.config import SEED_LIMIT

    if not 0 <= value < SEED_LIMIT:
        raise argparse.ArgumentTypeError(f"{value} is outside [0, 2**32 - 1]")
    return value


BUILD_EXAMPLES = """examples (after `make demo`):
  pretrain blend build out/demo/blend.toml --seq-len 128 --samples 20000 --valid-samples 500 --out out/blend-cache
  pretrain blend build data_specs/demo.toml --seq-len 128 --samples 20000 --out out/blend-cache-megatron --order megatron"""
INSPECT_EXAMPLES = """examples (after `make demo`):
  pretrain blend inspect data_specs/demo.toml --tokens 2e6
  pretrain blend inspect "0.7 out/demo/tokens/web 0.3 out/demo/tokens/books" --tokens 5e6 --max-epochs 2"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = BUILD_EXAMPLES + \
        "\n" + INSPECT_EXAMPLES.split("\n", 1)[1]
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    sub = parser.add_subparsers(dest="blend_command", required=True, metavar="{build,inspect}")
    b = sub.add_parser("build", help="prebuild the index cache of a blend (as Megatron's tools/prepare_cache.py)",
                       description="Build the GPT and blend indices of every dataset of SPEC into OUT: "
                       "OUT/<name>/{document,sample,shuffle}_index.npy for each dataset and "
                       "OUT/dataset_index.npy, OUT/dataset_sample_index.npy for the blend (train split; valid and "
                       "test, when asked for, in OUT/valid/ and OUT/test/); the trainer reuses them. --order stable "
                       "(default): the first N samples are the same whatever --samples is, so a run extended to more "
                       "steps (train.steps) keeps its data order; each epoch's documents are shuffled on their own "
                       "(seeded by seed and epoch) and the samples within blocks of one epoch's worth. --order "
                       "megatron: Megatron-core's arrays byte for byte (for the same .idx, seed, sequence length, "
                       "split and sample counts), whose documents and samples are shuffled across all epochs "
                       "together, so asking for more samples than an epoch holds reshuffles everything.",
                       epilog=BUILD_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    b.add_argument("spec", help="blend spec .toml, or a Megatron string \"w1 prefix1 w2 prefix2\"")
    b.add_argument("--seq-len", type=positive(), required=True, help="tokens per sample (each sample holds seq_len + 1)")
    b.add_argument("--samples", type=_count, required=True, help="train samples")
    b.add_argument("--valid-samples", type=_count, default=0, help="validation samples (default 0: not built)")
    b.add_argument("--test-samples", type=_count, default=0, help="test samples (default 0: not built)")
    b.add_argument("--seed", type=seed_arg, default=DEFAULT_SEED, help=f"random seed (default {DEFAULT_SEED}, as Megatron)")
    b.add_argument("--split", default=None, help="override the spec's split, e.g. 969,30,1")
    b.add_argument("--out", required=True, help="cache folder")
    b.add_argument("--force", action="store_true",
                   help="write into OUT although a file the build replaces there is not an index cache's "
                        "(default: refuse; a rebuild onto its own earlier cache goes ahead)")
    b.add_argument("--order", choices=ORDERS, default="stable",
                   help="stable (default): extending --samples keeps the first samples (data.order in the train "
                        "config); megatron: Megatron-core's exact arrays, reshuffled when more epochs are needed")
    i = sub.add_parser("inspect", help="table of datasets, tokens, weights and epochs for a token budget",
                       description="Show what a blend draws from each dataset for a train token budget.",
                       epilog=INSPECT_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    i.add_argument("spec", help="blend spec .toml, or a Megatron string \"w1 prefix1 w2 prefix2\"")
    i.add_argument("--tokens", type=_count, default=None,
                   help="train token budget (default: every train token once; for a blend given wholly in epochs, "
                   "the tokens those epochs add up to)")
    i.add_argument("--max-epochs", type=float, default=DEFAULT_MAX_EPOCHS,
                   help=f"warn when a dataset is repeated more than this many epochs (default {DEFAULT_MAX_EPOCHS:g})")
    i.add_argument("--split", default=None, help="override the spec's split, e.g. 969,30,1")


def run(args: argparse.Namespace) -> int:
    from pretrain.data.blend_spec import BlendSpecError
    from pretrain.data.gpt_dataset import EmptySplitError

    try:
        if args.blend_command == "build":
            return _run_build(args)
        return _run_inspect(args)
    except (BlendSpecError, EmptySplitError, OSError, ValueError) as e:
        from curate.os_errors import machine_error

        said = machine_error(e) if isinstance(e, OSError) else None  # disk full, permissions: what and where
        print(f"pretrain blend {args.blend_command}: error: "
              + (f"{said}; fix the cause and rerun the same command" if said else str(e)), file=sys.stderr)
        return 2


def _run_build(args) -> int:
    from pretrain.data.blend import build_blend_splits, cache_dir_problem
    from pretrain.data.gpt_dataset import SPLIT_NAMES

    sizes = (args.samples, args.valid_samples, args.test_samples)
    problem = cache_dir_problem(args.spec, args.out, sizes, args.force)
    if problem:
        raise ValueError(problem)
    print(f"building indices: seq_len={args.seq_len} samples={sizes} seed={args.seed} -> {args.out}",
          file=sys.stderr)
    splits = build_blend_splits(args.spec, args.seq_len, sizes, args.seed, args.out, split=args.split,
                                verbose=True, order=args.order)
    for name, ds in zip(SPLIT_NAMES, splits):
        if ds is not None:
            print(f"{name}: {len(ds):,} samples")
    return 0


def _run_inspect(args) -> int:
    from pretrain.data.blend import format_table, inspect_blend
    from pretrain.data.blend_spec import load_blend_spec
    from pretrain.data.gpt_dataset import DEFAULT_SPLIT

    spec = load_blend_spec(args.spec)
    rows, warnings = inspect_blend(spec, args.tokens, args.split, args.max_epochs)
    budget = int(args.tokens) if args.tokens else sum(r["train_tokens"] for r in rows)
    split = args.split or spec.split or DEFAULT_SPLIT
    print(f"blend {spec.source}  (split {split}; epochs = passes over each train split for {budget:,} tokens)")
    print(format_table(rows, budget))
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    return 0
