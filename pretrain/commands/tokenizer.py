"""`pretrain tokenizer train|info`: train a SentencePiece tokenizer on curated shards, or show a model's ids
(the work: pretrain/data/tokenizer.py)."""
from __future__ import annotations

import argparse
import json
import sys

from curate import json_files
from curate.commands.argtypes import positive
from pretrain.commands.blend import seed_arg
from pretrain.data.defaults import DEFAULT_MAX_BYTES

TRAIN_EXAMPLES = """  pretrain tokenizer train --input out/demo/curated/books out/demo/curated/web --vocab-size 4096 --output out/tok.model
  pretrain tokenizer train --input out/demo/curated/web --vocab-size 4096 --output out/tok.model --sample-bytes 1G --executor local --workers 2"""
INFO_EXAMPLES = """  pretrain tokenizer info out/demo/tokenizer.model"""


def _bytes(text: str) -> int:
    t = text.strip().upper().replace("_", "")
    scale = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
    try:
        if t.endswith("B"):
            t = t[:-1]
        if t and t[-1] in scale:
            return int(float(t[:-1]) * scale[t[-1]])
        return int(float(t))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a byte count: {text!r} (e.g. 100M, 2G)") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser.epilog, parser.formatter_class = f"examples (after `make demo`):\n{TRAIN_EXAMPLES}\n{INFO_EXAMPLES}", raw
    sub = parser.add_subparsers(dest="tokenizer_command", required=True, metavar="{train,info}")
    t = sub.add_parser("train", help="train a SentencePiece model on a curation output",
                       description="Train a SentencePiece tokenizer on documents sampled from curated shards.",
                       epilog=f"examples (after `make demo`):\n{TRAIN_EXAMPLES}", formatter_class=raw)
    t.add_argument("--input", required=True, nargs="+", metavar="DIR",
                   help="curation output folder(s) (each manifest.json names the shards); documents are sampled from all")
    t.add_argument("--vocab-size", type=int, required=True, help="vocabulary size, special ids included")
    t.add_argument("--output", required=True, help="PATH.model to write (special ids go to PATH.json)")
    t.add_argument("--force", action="store_true",
                   help="write PATH.model and PATH.json although one of them exists and is not a tokenizer "
                        "`pretrain tokenizer train` wrote (default: refuse; a rerun onto its own output goes ahead)")
    t.add_argument("--model-type", choices=("bpe", "unigram"), default="bpe", help="default bpe")
    t.add_argument("--max-bytes", type=_bytes, default=DEFAULT_MAX_BYTES,
                   help=f"cap on the sampled text (default {DEFAULT_MAX_BYTES // 1_000_000}M bytes; every shard is read "
                        "to draw documents uniformly)")
    t.add_argument("--sample-bytes", type=_bytes, default=None,
                   help="read a bounded, reproducible sample of about this many bytes spread over every shard (each "
                        "shard's share by its size), instead of reading every shard to sample documents (--max-bytes); "
                        "for a large corpus")
    t.add_argument("--executor", choices=("local", "ray"), default=None,
                   help="with --sample-bytes: read the shards' samples on a local process pool or a Ray cluster "
                        "(default: in this process)")
    t.add_argument("--address", default=None, help="Ray cluster address for --executor ray (default: a local Ray)")
    t.add_argument("--workers", type=positive(), default=1, help="with --executor: worker processes (default 1)")
    t.add_argument("--no-byte-fallback", dest="byte_fallback", action="store_false",
                   help="map unknown characters to UNK instead of UTF-8 byte pieces")
    t.add_argument("--character-coverage", type=float, default=0.9995, help="default 0.9995")
    t.add_argument("--seed", type=seed_arg, default=0, help="sampling and training seed (default 0)")
    t.add_argument("--threads", type=int, default=None, help="training threads (default: all cores)")
    t.add_argument("--text-column", default="text", help="default text")
    i = sub.add_parser("info", help="vocabulary size and special ids of a .model",
                       epilog=f"example (after `make demo`):\n{INFO_EXAMPLES}", formatter_class=raw)
    i.add_argument("model", help="a SentencePiece .model")


def check_train_arguments(args: argparse.Namespace) -> None:
    """Values SentencePiece would refuse only after the shards were sampled, in its own words, named here."""
    if args.vocab_size < 1:
        raise ValueError(f"--vocab-size {args.vocab_size}: must be at least 1 (real vocabularies are 32k to 256k)")
    if args.vocab_size >= 2 ** 31:
        raise ValueError(f"--vocab-size {args.vocab_size}: SentencePiece takes at most 2^31 - 1 (real vocabularies "
                         "are 32k to 256k)")
    if args.max_bytes <= 0:
        raise ValueError(f"--max-bytes {args.max_bytes}: must be > 0 (bytes of text to train on, e.g. 100M)")
    if args.sample_bytes is not None and args.sample_bytes <= 0:
        raise ValueError(f"--sample-bytes {args.sample_bytes}: must be > 0 (e.g. 1G)")
    if not 0.98 <= args.character_coverage <= 1.0:  # nan fails too
        raise ValueError(f"--character-coverage {args.character_coverage}: SentencePiece takes 0.98 to 1.0 "
                         "(0.9995 for most languages, 1.0 for small alphabets)")
    if args.threads is not None and not 1 <= args.threads <= 1024:
        raise ValueError(f"--threads {args.threads}: SentencePiece takes 1 to 1024")


def run(args: argparse.Namespace) -> int:
    from pretrain.data.tokenizer import load_tokenizer, output_problem, specials_path, train_tokenizer

    try:
        if args.tokenizer_command == "info":
            tok = load_tokenizer(args.model)
            print(json.dumps({"model": tok.model_path, "vocab_size": tok.vocab_size, **tok.specials()}, indent=2))
            return 0
        check_train_arguments(args)
        from curate.write_guard import overwrite_problem

        problem = (overwrite_problem([args.output, specials_path(args.output)], args.input)
                   or output_problem(args.output, args.force))
        if problem:
            raise ValueError(problem)
        if args.executor and args.sample_bytes is None:
            raise ValueError("--executor reads the shards of --sample-bytes: give --sample-bytes too")
        if args.address and args.executor != "ray":
            raise ValueError("--address is for --executor ray")
        executor = None
        if args.executor:
            from curate.executors import make_executor

            executor = make_executor(args.executor, args.workers, args.address)
        try:
            tok = train_tokenizer(args.input, args.vocab_size, args.output, model_type=args.model_type,
                                  max_bytes=args.max_bytes, byte_fallback=args.byte_fallback,
                                  character_coverage=args.character_coverage, seed=args.seed,
                                  threads=args.threads, text_column=args.text_column,
                                  sample_bytes=args.sample_bytes, executor=executor, force=args.force)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM (dispatch prints the one line): the workers end now
            if executor is not None:
                executor.abort()
            raise
        finally:
            if executor is not None:
                executor.close()
    except (FileNotFoundError, ValueError) as e:
        print(f"pretrain tokenizer {args.tokenizer_command}: error: {e}", file=sys.stderr)
        return 2
    meta = json_files.read_json(specials_path(tok.model_path))
    print(f"wrote {tok.model_path} ({meta['model_type']}, vocab {tok.vocab_size}; trained on "
          f"{meta['sampled_documents']:,} of {meta['documents']:,} documents, {meta['sampled_bytes']:,} bytes) "
          f"and {specials_path(tok.model_path)} (eod={tok.eod_id} bos={tok.bos_id} pad={tok.pad_id} unk={tok.unk_id})")
    return 0
