"""`curate extractor train ...`: train the learned extraction model (the ``blocks`` engine of ``extract``).

The tools live in ``curate/extract/training/``; this module only parses their flags, so that ``curate --help``
does not import them."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import curate.extract

DEFAULT_MODEL = Path(curate.extract.__file__).resolve().parent / "models" / "extract_blocks.json"
TRAIN_HELP = "train the block classifier on pages with gold main text (WCXB's development split, Readability's pages)"
TRAIN_EPILOG = """Checks every gold record before any training (url, id, main_content strings; page_type, lang, source_url
strings when given) and refuses gold with no main content, cross-validates by site (--folds: the pages of one
set and site share a fold), trains the final model on all pages, prints word F1 per page type (cross-validated
and in-sample) and writes the model file atomically to --out (required: the shipped model is written only when
--out names it).

examples:
  # a model of your own, for the extract stage's model = "my_model.json":
  curate extractor train --warc pages.warc.gz --gold gold.jsonl --out my_model.json
  # rebuild the shipped model (--out must name it):
  curate extractor train --warc wcxb_dev.warc.gz --gold wcxb_dev_gold.jsonl \\
      --warc readability.warc.gz --gold readability_gold.jsonl \\
      --out curate/extract/models/extract_blocks.json --report report.json"""
EPILOG = """examples:
  curate extractor train --warc pages.warc.gz --gold gold.jsonl --out my_extract_model.json
  curate extractor train --help"""


def add_arguments(p) -> None:
    p.epilog, p.formatter_class = EPILOG, argparse.RawDescriptionHelpFormatter
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
    ap.add_argument("--out", required=True, metavar="MODEL.json",
                    help="model file to write (required; the shipped model, which every run's extract stage loads "
                         "without a model = path, is replaced only when --out names it: "
                         "curate/extract/models/extract_blocks.json)")
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


MAX_HIDDEN = 4096  # units per layer: the shipped model has 64; 10^8 asked for 150 GB


def train_flag_problem(a) -> str | None:
    """What is wrong with ``curate extractor train``'s numeric flags (None: nothing), before any page is read:
    PyTorch refused some only after the features were built, in its words (``Expected positive integer
    total_steps``), and others (``--threshold 2``, ``--dropout 1``) trained and wrote a model that keeps nothing or
    that the stage then refuses to load."""
    import math

    try:
        hidden = [int(h) for h in a.hidden.split(",") if h.strip()]
    except ValueError:
        return f"--hidden {a.hidden!r}: give layer sizes as integers separated by commas, e.g. 64,64,32"
    if any(not 1 <= h <= MAX_HIDDEN for h in hidden):
        return f"--hidden {a.hidden!r}: each layer has 1 to {MAX_HIDDEN} units"
    if a.folds == 1 or a.folds < 0:
        return f"--folds {a.folds}: 0 (no cross-validation) or at least 2"
    if a.oof and a.folds < 2:
        return "--oof writes the cross-validated texts: give --folds 2 or more"
    if a.epochs < 1:
        return f"--epochs {a.epochs}: at least 1"
    if not (math.isfinite(a.weight_decay) and a.weight_decay >= 0):
        return f"--weight-decay {a.weight_decay}: a finite number >= 0 (e.g. 0.05)"
    if not 0 <= a.dropout < 1:  # nan fails too
        return f"--dropout {a.dropout}: in [0, 1) (1 drops every input)"
    if not (a.threshold == 0 or 0 < a.threshold < 1):
        return f"--threshold {a.threshold}: a probability in (0, 1), or 0 for the best on the cross-validation"
    if a.limit < 0:
        return f"--limit {a.limit}: pages per set, >= 0 (0: all)"
    if not 0 <= a.seed < 2 ** 32:
        return f"--seed {a.seed}: in [0, 2**32 - 1]"
    from curate.write_guard import output_file_problem, overwrite_problem

    outputs = [("--out", a.out), ("--report", a.report), ("--oof", a.oof)]
    for flag, path in outputs:
        problem = output_file_problem(path)
        if problem:
            return f"{flag} {problem}"
    given = [(flag, path) for flag, path in outputs if path]
    for i, (flag, path) in enumerate(given):
        for flag2, path2 in given[i + 1:]:
            if os.path.realpath(path) == os.path.realpath(path2):
                return f"{flag} and {flag2} are the same file ({path}): give each its own"
    return overwrite_problem([a.out, a.report, a.oof], list(a.warc) + list(a.gold))


def run(args) -> int:
    if args.extractor_command == "train":
        from curate.extract.training import train

        return train.run(args)
    raise ValueError(f"unknown subcommand {args.extractor_command!r}")
