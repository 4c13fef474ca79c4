"""`pretrain tokenize`: curated shards to a Megatron-compatible .bin/.idx (the work: pretrain/data/tokenize.py)."""
from __future__ import annotations

import argparse
import sys

INTERRUPT_HINT = "rerun the same command to resume: finished tasks are kept"  # printed on Ctrl-C (dispatch)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--input", required=True, help="curation output folder (its manifest.json names the shards)")
    parser.add_argument("--tokenizer", required=True, help="SentencePiece .model")
    parser.add_argument("--output-prefix", required=True, help="writes PREFIX.bin and PREFIX.idx")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--text-column", default="text", help="default text")
    parser.add_argument("--no-progress", dest="progress", action="store_false",
                        help="no progress bar (there is none either when stderr is not a terminal)")


def run(args: argparse.Namespace) -> int:
    if args.workers < 1:
        print("pretrain tokenize: error: --workers must be at least 1", file=sys.stderr)
        return 2
    from pretrain.data.tokenize import tokenize_curated

    try:
        stats = tokenize_curated(args.input, args.tokenizer, args.output_prefix, args.workers,
                                 args.text_column, args.progress)
    except (FileNotFoundError, ValueError) as e:
        print(f"pretrain tokenize: error: {e}", file=sys.stderr)
        return 2
    mb = stats["text_bytes"] / 1e6
    rate = f", {mb / stats['seconds']:.1f} MB/s" if stats.get("seconds") else ""
    print(f"wrote {args.output_prefix}.bin/.idx: {stats['documents']:,} documents, {stats['tokens']:,} tokens "
          f"({stats['dtype']}){rate}; {stats['errors']} encode errors, {stats['empty']} empty documents skipped")
    return 0
