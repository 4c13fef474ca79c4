"""`pretrain report --out DIR --curated C... --logs LOG_DIR [--checkpoint CKPT]`: funnel and loss plots and a
one-page summary (the work: pretrain/report.py)."""
from __future__ import annotations

import sys

from curate.commands.argtypes import whole

EPILOG = """examples (after `make demo`):
  pretrain report --out out/demo/report --curated out/demo/curated/web --logs out/demo/logs --checkpoint out/demo/checkpoints
  pretrain report --out out/report --curated out/demo/curated/web out/demo/curated/books --logs out/demo/logs
"""

def add_arguments(parser) -> None:
    import argparse

    parser.epilog, parser.formatter_class = EPILOG, argparse.RawDescriptionHelpFormatter
    parser.add_argument("--out", required=True, help="folder to write funnel.png, loss.png, eval.png (if the run evaluated tasks) and "
                                                  "index.md into")
    parser.add_argument("--curated", nargs="+", required=True, help="curation output folders (with stats.json)")
    parser.add_argument("--logs", required=True, help="the trainer's log folder (with metrics.jsonl)")
    parser.add_argument("--checkpoint", default=None, help="checkpoint folder: add a generated sample")
    parser.add_argument("--generate-prompt", default="The ", help="prompt for the sample (default 'The ')")
    parser.add_argument("--max-tokens", type=whole(), default=50, help="sample length in tokens (default 50)")
    parser.add_argument("--tokenizer", default=None,
                        help="sentencepiece .model for the sample (default: the one recorded with the checkpoint)")
    parser.add_argument("--force", action="store_true",
                        help="write into OUT although it holds files other than an earlier report "
                             "(default: refuse; files of the same names are replaced)")


def run(args) -> int:
    from pretrain.report import ReportError, check_out_dir, make_report

    sample = None
    try:
        check_out_dir(args.out, args.force)  # before the checkpoint is loaded: a refusal costs nothing
        if args.checkpoint:
            from pretrain.generate import generate_text, load_for_generation

            model, tokenizer = load_for_generation(args.checkpoint, args.tokenizer)
            text = generate_text(model, tokenizer, args.generate_prompt, args.max_tokens, temperature=0.0)
            sample = (args.generate_prompt, text)
        out = make_report(args.out, args.curated, args.logs, sample, force=args.force)
    except (ReportError, ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    extra = ", " + str(out / "eval.png") if (out / "eval.png").exists() else ""
    print(f"wrote {out / 'index.md'}, {out / 'funnel.png'}, {out / 'loss.png'}{extra}")
    return 0
