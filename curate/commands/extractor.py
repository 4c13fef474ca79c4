"""`curate extractor train ...`: train the learned extraction model (the ``blocks`` engine of ``extract``).

The tools live in ``curate/extract/training/``; this module only parses their flags, so that ``curate --help``
does not import them."""
from __future__ import annotations

import argparse
from pathlib import Path

import curate.extract

DEFAULT_MODEL = Path(curate.extract.__file__).resolve().parent / "models" / "extract_blocks.json"
TRAIN_HELP = "train the block classifier on pages with gold main text (WCXB's development split, Readability's pages)"
TRAIN_EPILOG = """example (the shipped model):
  curate extractor train --warc wcxb_dev.warc.gz --gold wcxb_dev_gold.jsonl \\
      --warc readability.warc.gz --gold readability_gold.jsonl --report report.json

Cross-validates by site (--folds: the pages of one set and site share a fold), trains the final model on all
pages, prints word F1 per page type (cross-validated and in-sample) and writes the model file atomically
(default: the shipped one)."""


def add_arguments(p) -> None:
    sub = p.add_subparsers(dest="extractor_command", required=True, metavar="SUBCOMMAND")
    t = sub.add_parser("train", help=TRAIN_HELP, description=TRAIN_HELP, epilog=TRAIN_EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_train_arguments(t)


def add_train_arguments(ap) -> None:
    """The flags of ``curate extractor train`` (and ``python -m curate.extract.training.train``)."""
    ap.add_argument("--warc", required=True, action="append", help="WARC with the pages (WCXB: wcxb_dev.warc.gz); "
                    "repeat it, with one --gold each, to train on several sets")
    ap.add_argument("--gold", required=True, action="append", help="JSONL with url, main_content and page_type "
                    "(or lang) per page, for the --warc of the same place")
    ap.add_argument("--out", default=str(DEFAULT_MODEL), help="model file to write (default: the shipped one)")
    ap.add_argument("--folds", type=int, default=5, help="cross-validation folds (0: no CV)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--hidden", default="64,64,32", help="hidden layer sizes, comma-separated (all but the "
                    "first are context layers)")
    ap.add_argument("--weight-decay", type=float, default=0.05, help="AdamW weight decay (regularisation)")
    ap.add_argument("--dropout", type=float, default=0.0, help="dropout on every layer's input while training")
    ap.add_argument("--weigh-pages-equally", action="store_true",
                    help="every page weighs the same in the loss and in the threshold choice (default: every set "
                         "given by --warc/--gold weighs the same in total, however many pages it has)")
    ap.add_argument("--threshold", type=float, default=0.0,
                    help="keep threshold; 0 (default): the best on the cross-validated predictions")
    ap.add_argument("--limit", type=int, default=0, help="use only the first N pages of each set (quick runs)")
    ap.add_argument("--report", default="", help="also write the figures as JSON here")
    ap.add_argument("--oof", default="", help="also write the cross-validated page texts as JSONL here "
                    "(id, set, page_type, text): benchmarks/extract_quality.py --cv-texts reads them")


def run(args) -> int:
    if args.extractor_command == "train":
        from curate.extract.training import train

        return train.run(args)
    raise ValueError(f"unknown subcommand {args.extractor_command!r}")
