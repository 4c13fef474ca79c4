"""`pretrain tokenize`: curated shards to a Megatron-compatible .bin/.idx, or to a dataset of parts on a local pool or a
Ray cluster (the work: pretrain/data/tokenize.py, pretrain/data/tokenize_parts.py)."""
from __future__ import annotations

import argparse
import sys

INTERRUPT_HINT = "rerun the same command to resume: finished tasks are kept"  # printed on Ctrl-C (dispatch)
HANDLES_SIGTERM = True  # SIGTERM unwinds like Ctrl-C: the workers are ended with the run, none left behind (143)

EPILOG = """Without --parts, --executor ray or --merge: one PREFIX.bin/.idx, as always. With them: PREFIX/part-NNNNN.bin/.idx
and PREFIX/parts.json (a blend spec's prefix may name the folder); --merge also writes PREFIX.bin/.idx.

examples:
  pretrain tokenize --input out/demo/curated/web --tokenizer out/demo/tokenizer.model --output-prefix out/tokens/web
  pretrain tokenize --input out/demo/curated/web --tokenizer out/demo/tokenizer.model --output-prefix out/tokens/webparts --parts --workers 2
  pretrain tokenize --input /shared/curated --tokenizer /shared/tok.model --output-prefix /shared/tokens/web --executor ray --address auto --merge"""


def _bytes(text: str) -> int:
    from pretrain.commands.tokenizer import _bytes as parse

    return parse(text)


def _retries(text: str) -> int:
    """--max-retries: a whole number >= 0 (as curate's ``max_retries``)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 (0: a task whose worker died is not run again), got {value}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--input", required=True, help="curation output folder (its manifest.json names the shards)")
    parser.add_argument("--tokenizer", required=True, help="SentencePiece .model")
    parser.add_argument("--output-prefix", required=True,
                        help="writes PREFIX.bin and PREFIX.idx (with --parts: the folder PREFIX/ of parts)")
    parser.add_argument("--workers", type=int, default=1,
                        help="worker processes (default 1; with --executor ray and no --address: the local Ray's CPUs)")
    parser.add_argument("--text-column", default="text", help="default text")
    parser.add_argument("--no-progress", dest="progress", action="store_false",
                        help="no progress bar (there is none either when stderr is not a terminal)")
    parser.add_argument("--parts", action="store_true",
                        help="write a dataset of parts PREFIX/part-NNNNN.bin/.idx + PREFIX/parts.json, one task per part "
                             "(markers and a lock in PREFIX/, as curate run)")
    parser.add_argument("--executor", choices=("local", "ray"), default=None,
                        help="where the part tasks run: local (a process pool of --workers) or ray (implies --parts)")
    parser.add_argument("--address", default=None,
                        help="Ray cluster address (HOST:PORT, ray://HOST:PORT or auto; default: start a local Ray)")
    parser.add_argument("--part-bytes", type=_bytes, default=None,
                        help="curated shard bytes per part and task (default 1G; whole shards, in manifest order)")
    parser.add_argument("--max-retries", type=_retries, default=None,
                        help="runs of a task whose worker or node died before the run stops (default 3)")
    parser.add_argument("--force", action="store_true",
                        help="write over an existing PREFIX.bin/.idx/.json (with --parts: files in the folder PREFIX/) "
                             "that pretrain tokenize did not write (refused without it)")
    parser.add_argument("--merge", action="store_true",
                        help="also write PREFIX.bin/.idx from the parts (implies --parts): one Megatron file, the "
                             "bytes a one-process run writes")


def run(args: argparse.Namespace) -> int:
    if args.workers < 1:
        print("pretrain tokenize: error: --workers must be at least 1", file=sys.stderr)
        return 2
    if args.address and args.executor != "ray":
        print("pretrain tokenize: error: --address is for --executor ray", file=sys.stderr)
        return 2
    in_parts = bool(args.parts or args.merge or args.executor == "ray")
    for flag, value in (("--part-bytes", args.part_bytes), ("--max-retries", args.max_retries)):
        if value is not None and not in_parts:  # a one-file run has neither: it was ignored without a word
            print(f"pretrain tokenize: error: {flag} is for a run of parts (--parts, --merge or --executor ray)",
                  file=sys.stderr)
            return 2
    args.part_bytes = _bytes("1G") if args.part_bytes is None else args.part_bytes
    args.max_retries = 3 if args.max_retries is None else args.max_retries
    from curate.config import ConfigError
    from curate.executors import WorkerLost
    from curate.lock import LockError

    from pretrain.data.tokenize import output_prefix_problem

    problem = _tokenizer_problem(args.tokenizer) or output_prefix_problem(
        args.output_prefix, parts=bool(args.parts or args.merge or args.executor == "ray"), merge=args.merge) or \
        _overwrite_problem(args)
    if problem:
        print(f"pretrain tokenize: error: {problem}", file=sys.stderr)
        return 2
    try:
        if args.parts or args.merge or args.executor == "ray":
            return _run_parts(args)
        from pretrain.data.tokenize import tokenize_curated

        stats = tokenize_curated(args.input, args.tokenizer, args.output_prefix, args.workers,
                                 args.text_column, args.progress, force=args.force)
    except (FileNotFoundError, ValueError, ConfigError, LockError, WorkerLost) as e:
        print(f"pretrain tokenize: error: {e}", file=sys.stderr)
        return 2
    _report(f"{args.output_prefix}.bin/.idx", stats)
    return 0


def _tokenizer_problem(path: str) -> str | None:
    """--tokenizer checked first: a folder given there would otherwise be taken for an input that the output lies
    in, and the message would blame --output-prefix."""
    import os

    if os.path.isdir(path):
        return f"--tokenizer {path} is a folder, not a .model file: give the SentencePiece model (`pretrain " \
               "tokenizer train` writes one)"
    if os.path.exists(path) and not os.path.isfile(path):
        return f"--tokenizer {path} is not a regular file (a pipe or a device): give a SentencePiece .model"
    if not os.path.lexists(path):
        return f"--tokenizer {path} not found: give a SentencePiece .model (`pretrain tokenizer train` writes one)"
    return None


def _overwrite_problem(args) -> str | None:
    """The output written over an input: the curation folder (its ``manifest.json``, shards) or the tokenizer
    and its special-ids ``.json`` (``--output-prefix out/tokenizer`` would replace ``out/tokenizer.json``)."""
    from curate.write_guard import overwrite_problem
    from pretrain.data.tokenizer import specials_path

    prefix = args.output_prefix
    files = [f"{prefix}.bin", f"{prefix}.idx", f"{prefix}.json"]
    parts = args.parts or args.merge or args.executor == "ray"
    writes = ([prefix] + (files if args.merge else [])) if parts else files
    return overwrite_problem(writes, [args.input, args.tokenizer, specials_path(args.tokenizer)])


def _run_parts(args) -> int:
    from curate.executors import make_executor
    from pretrain.data.tokenize_parts import tokenize_to_parts

    executor = make_executor(args.executor or "local", args.workers, args.address, max_retries=args.max_retries)
    try:
        stats = tokenize_to_parts(args.input, args.tokenizer, args.output_prefix, executor, args.part_bytes,
                                  args.text_column, merge=args.merge, force=args.force)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM (dispatch prints the one line): the workers end now
        executor.abort()
        raise
    finally:
        executor.close()
    _report(f"{args.output_prefix}/ ({stats['parts']} parts)", stats)
    if args.merge:
        print(f"merged into {args.output_prefix}.bin/.idx")
    return 0


def _report(what: str, stats: dict) -> None:
    mb = stats["text_bytes"] / 1e6
    rate = f", {mb / stats['seconds']:.1f} MB/s" if stats.get("seconds") else ""
    print(f"wrote {what}: {stats['documents']:,} documents, {stats['tokens']:,} tokens "
          f"({stats['dtype']}){rate}; {stats['errors']} encode errors, {stats['empty']} empty documents skipped")
    named = stats.get("skipped") or []
    for e in named:
        said = f" (id {e['id']})" if "id" in e else ""
        why = "null, not text, or the tokenizer failed" if e["why"] == "encode_error" else "no token"
        print(f"  skipped: {e['shard']} batch {e['batch']} row {e['row']}{said}: {e['why']} ({why})")
    if stats["errors"] + stats["empty"] > len(named):
        print(f"  ... and {stats['errors'] + stats['empty'] - len(named):,} more (the first {len(named)} are named "
              f"in the output's record, stats.skipped)")
