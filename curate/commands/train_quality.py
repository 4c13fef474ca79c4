"""`curate train-quality`: train the fastText quality classifier used by ``quality_classifier``.

``--positive`` / ``--negative`` take curation output folders, shard files or JSON Lines files (see
``curate.stages.quality_train``). ``--max-docs N`` keeps a uniform random sample of N documents per side
(reservoir sampling, fixed by ``--seed``). ``--valid-fraction F`` holds out that share of each side and
prints precision, recall and accuracy of the positive label on it (score >= 0.5). ``--bucket`` sets
fastText's hash buckets for n-gram features: the model file is about ``bucket x dim x 4`` bytes.
``--threads`` above 1 trades a reproducible model for speed.

Refused before training: the same file or folder on both sides (or one inside the other), and a positive and a
negative path holding the same documents (SHA-256 of their texts); documents found on both sides are counted in
a warning. Words beginning with ``__label__`` in the texts are neutralised (``quality.neutralise_labels``):
fastText would read them as labels.

Example::

    curate train-quality --positive out/wiki/curated --negative out/crawl/curated --output quality.bin
"""
from __future__ import annotations

import argparse
import random
import sys

from curate.commands.argtypes import positive, whole
from curate.text.fasttext_model import load_fasttext_model
from curate.stages.quality_train import collect, evaluate, same_content_problem, same_input_problem, train

EPILOG = """examples (after `make demo`):
  curate train-quality --positive out/demo/curated/books --negative out/demo/raw/web --output quality.bin
  curate train-quality --positive out/demo/curated/books --negative out/demo/raw/web --output quality.bin --valid-fraction 0.1 --max-docs 5000
"""


def add_arguments(parser) -> None:
    parser.epilog, parser.formatter_class = EPILOG, argparse.RawDescriptionHelpFormatter
    parser.add_argument("--positive", nargs="+", required=True, metavar="PATH",
                        help="high-quality examples: curation output folders, .arrow/.parquet shards, .jsonl files")
    parser.add_argument("--negative", nargs="+", required=True, metavar="PATH",
                        help="low-quality examples (raw crawl), same kinds of paths")
    parser.add_argument("--output", required=True, metavar="MODEL.bin", help="where to write the fastText model")
    parser.add_argument("--epochs", type=int, default=5, help="training epochs (default 5)")
    parser.add_argument("--lr", type=float, default=0.5, help="learning rate (default 0.5)")
    parser.add_argument("--word-ngrams", type=positive(2 ** 31 - 1), default=2, help="word n-gram features (default 2)")
    parser.add_argument("--dim", type=int, default=100, help="vector size (default 100)")
    parser.add_argument("--bucket", type=int, default=200_000,
                        help="hash buckets for word n-gram features (default 200000; the model takes bucket x dim x 4 "
                             "bytes, 80 MB by default; fastText's own default of 2M makes it 800 MB)")
    parser.add_argument("--min-count", type=whole(0, 2 ** 31 - 1), default=1, help="drop words seen fewer times (default 1)")
    parser.add_argument("--chunk-words", type=int, default=64, metavar="N",
                        help="train on pieces of N words, one example each (default 64; 0: whole documents)")
    parser.add_argument("--max-docs", type=int, default=0, metavar="N",
                        help="random sample of at most N documents per side (default 0: all)")
    parser.add_argument("--seed", type=whole(0, 2 ** 31 - 1, "fastText takes a C int"), default=0, help="sampling, shuffling and training seed (default 0)")
    parser.add_argument("--valid-fraction", type=float, default=0.0, metavar="F",
                        help="hold out this share per side and print precision/recall on it (default 0)")
    parser.add_argument("--threads", type=int, default=1, help="training threads (default 1: reproducible)")


MAX_INT32 = 2 ** 31 - 1  # fastText takes its sizes as C ints
MAX_THREADS = 1024  # fastText starts every thread at once (100,000 ended in "terminate called")


def flag_problem(args) -> str | None:
    """What is wrong with the numeric flags (None: nothing), before any shard is read."""
    if not 0 <= args.valid_fraction < 1:  # nan fails too
        return "--valid-fraction must be in [0, 1)"
    for flag, value, meaning in (("--max-docs", args.max_docs, "0: all"), ("--chunk-words", args.chunk_words,
                                                                          "0: whole documents")):
        if value < 0:
            return f"{flag} {value}: must be >= 0 ({meaning})"
    for flag, value, most in (("--epochs", args.epochs, MAX_INT32), ("--threads", args.threads, MAX_THREADS),
                              ("--dim", args.dim, MAX_INT32), ("--bucket", args.bucket, MAX_INT32)):
        if value < 1:
            return f"{flag} {value}: must be from 1 to {most:,}"
    if not 0 < args.lr < float("inf"):
        return f"--lr {args.lr}: give --lr a finite number > 0 (default 0.5)"
    for flag, value in (("--dim", args.dim), ("--bucket", args.bucket), ("--epochs", args.epochs),
                        ("--word-ngrams", args.word_ngrams), ("--min-count", args.min_count)):
        if value > MAX_INT32:
            return f"{flag} {value}: fastText takes at most 2^31 - 1"
    if args.threads > MAX_THREADS:
        return f"--threads {args.threads}: at most {MAX_THREADS}"
    from curate.host_memory import available_bytes

    need = args.bucket * args.dim * 4  # the input matrix's n-gram rows alone (fastText allocates them at start)
    have = available_bytes()
    if have is not None and need > have:
        return (f"--bucket {args.bucket} x --dim {args.dim} is a {need / 2 ** 30:,.1f} GiB matrix, more than the "
                f"{have / 2 ** 30:,.1f} GiB of memory available: lower --bucket or --dim")
    from curate.write_guard import output_file_problem, overwrite_problem

    problem = output_file_problem(args.output)
    if problem:
        return f"--output {problem}"
    return (overwrite_problem([args.output], list(args.positive) + list(args.negative))
            or same_input_problem(list(args.positive), list(args.negative)))


def run(args) -> int:
    problem = flag_problem(args)
    if problem:
        print(f"train-quality: {problem}", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    pos_digests: dict = {}
    neg_digests: dict = {}
    try:
        pos = collect(args.positive, args.max_docs, rng, pos_digests)
        neg = collect(args.negative, args.max_docs, rng, neg_digests)
    except (ValueError, OSError) as e:
        print(f"train-quality: {e}", file=sys.stderr)
        return 2
    if not pos or not neg:
        print(f"train-quality: need documents on both sides (positive {len(pos)}, negative {len(neg)})", file=sys.stderr)
        return 2
    problem = same_content_problem(pos_digests, neg_digests, pos, neg)
    if problem:
        print(f"train-quality: {problem}", file=sys.stderr)
        return 2
    both = len(set(pos) & set(neg))
    if both:
        print(f"train-quality: warning: {both:,} documents are both positive and negative examples (the same text "
              "on both sides teaches the classifier nothing)", file=sys.stderr)

    held_pos, held_neg = [], []
    if args.valid_fraction:
        rng.shuffle(pos)
        rng.shuffle(neg)
        k_pos, k_neg = int(len(pos) * args.valid_fraction), int(len(neg) * args.valid_fraction)
        held_pos, pos = pos[:k_pos], pos[k_pos:]
        held_neg, neg = neg[:k_neg], neg[k_neg:]
    print(f"training on {len(pos)} positive and {len(neg)} negative documents"
          + (f"; holding out {len(held_pos)} + {len(held_neg)}" if args.valid_fraction else ""))
    try:
        train(pos, neg, args.output, epochs=args.epochs, lr=args.lr, word_ngrams=args.word_ngrams, dim=args.dim,
              bucket=args.bucket, min_count=args.min_count, chunk_words=args.chunk_words, seed=args.seed,
              threads=args.threads)
    except RuntimeError as e:
        print(f"train-quality: {e}", file=sys.stderr)
        return 1
    if held_pos or held_neg:
        m = evaluate(load_fasttext_model(args.output), held_pos, held_neg)
        print(f"held-out: precision {m['precision']:.3f}  recall {m['recall']:.3f}  accuracy {m['accuracy']:.3f}  "
              f"({m['positives']} positive, {m['negatives']} negative)")
    print(f"wrote {args.output}")
    return 0
