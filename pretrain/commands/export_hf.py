"""`pretrain export-hf CHECKPOINT OUT`: a Hugging Face transformers model folder with the tokenizer
(the work: pretrain/export_hf.py)."""
from __future__ import annotations

import sys

from curate import json_files

EPILOG = """examples (after `make demo`):
  pretrain export-hf out/demo/checkpoints out/demo/hf
  pretrain export-hf out/demo/checkpoints out/hf --tokenizer out/demo/tokenizer.model
"""

def add_arguments(parser) -> None:
    import argparse

    parser.epilog, parser.formatter_class = EPILOG, argparse.RawDescriptionHelpFormatter
    parser.add_argument("checkpoint", help="checkpoint folder written by `pretrain train` (its latest checkpoint)")
    parser.add_argument("out", help="output folder: a transformers model folder with the tokenizer")
    parser.add_argument("--tokenizer", default=None,
                        help="sentencepiece .model (default: the data.tokenizer recorded with the checkpoint)")
    parser.add_argument("--force", action="store_true",
                        help="write into OUT although it holds files other than an earlier export "
                             "(default: refuse; files of the same names are replaced)")


def run(args) -> int:
    from pretrain.export_hf import ExportError, export_checkpoint

    try:
        out, tok_path = export_checkpoint(args.checkpoint, args.out, args.tokenizer, force=args.force)
    except (ExportError, FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    arch = json_files.read_json(out / "quarry_export.json")["architecture"]
    print(f"wrote {out}: {arch}" + (f" with the tokenizer {tok_path}" if tok_path else " (no tokenizer)"))
    return 0
