"""`pretrain eval --checkpoint DIR --task KIND:PATH[:NAME] ...`: zero-shot (and few-shot) evaluation of a
checkpoint with lm-evaluation-harness 0.4's definitions (the work: pretrain/eval/)."""
from __future__ import annotations

import sys
from pathlib import Path

DESCRIPTION = """Evaluate a checkpoint on local task files, with the definitions and metric names of
lm-evaluation-harness 0.4. Kinds:
  bpb     JSONL {"text": ...} (or a .txt file: one document): bits_per_byte (the headline: it compares models
          with different tokenizers), byte_perplexity, word_perplexity, token_perplexity. Documents longer than
          the model's context are scored in lm-eval's disjoint rolling windows; a task's stride = N (in --tasks
          FILE; 1 .. the model's window - 1) uses overlapping windows predicting N new tokens each, as Megatron
          does: more context per token, lower perplexity, not comparable with lm-eval's figure.
  cloze   JSONL {"text": ...}, LAMBADA-style: the target is the last word (after the last space): acc (every
          target token is the greedy choice), perplexity.
  choice  JSONL {"context": ..., "choices": [...], "label": i}: acc, acc_norm (log-likelihood / choice length
          in characters); shots = k (in --tasks FILE) puts k other items of the file before each.
Items that are not of their kind are set aside, counted and named; a file with none valid is an error.
Runs in one process, or under torchrun (--tp/--pp; the rest is data parallel: the items are spread over the
ranks, same figures). --write-lm-eval-tasks DIR writes lm-eval task YAMLs for the same files, so that
  lm_eval --model hf --model_args pretrained=EXPORT --include_path DIR --tasks NAME
on `pretrain export-hf`'s folder computes the same figures (0-shot)."""

EPILOG = """examples (the paths exist after `make demo`):
  pretrain eval --checkpoint out/demo/checkpoints --task bpb:pipelines/sample/evals/prose.jsonl:prose --task choice:pipelines/sample/evals/choice.jsonl
  pretrain eval --checkpoint out/demo/checkpoints --tasks pipelines/sample/evals/tasks.toml --output out/eval.json
  torchrun --nproc-per-node 2 -m pretrain eval --checkpoint out/demo/checkpoints --tasks pipelines/sample/evals/tasks.toml --tp 2
  pretrain eval --write-lm-eval-tasks out/lm-eval-tasks --tasks pipelines/sample/evals/tasks.toml
"""


def add_arguments(parser) -> None:
    import argparse

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.description = DESCRIPTION
    parser.epilog = EPILOG
    parser.add_argument("--checkpoint", help="checkpoint folder written by `pretrain train` (its latest step, "
                                             "or a step_* folder)")
    parser.add_argument("--step", type=int, default=None, help="evaluate this step's checkpoint (default: latest)")
    parser.add_argument("--task", action="append", default=[], metavar="KIND:PATH[:NAME]",
                        help="a task: kind bpb|cloze|choice, a local file, a name (default: the file's stem); "
                             "repeatable")
    parser.add_argument("--tasks", metavar="FILE", help="a TOML file of [[tasks]] tables (name, kind, path, "
                                                        "shots, stride, limit)")
    parser.add_argument("--output", help="write the results JSON here (atomically)")
    parser.add_argument("--force", action="store_true",
                        help="write --output, or --write-lm-eval-tasks' NAME.yaml and NAME.jsonl, over existing "
                             "files that `pretrain eval` did not write (default: refuse; its own earlier output "
                             "is written over)")
    parser.add_argument("--write-lm-eval-tasks", metavar="DIR",
                        help="write lm-eval task YAMLs (+ their data) for the tasks into DIR and stop; with "
                             "--checkpoint only the items its model can score (the ones `pretrain eval` scores)")
    parser.add_argument("--tokenizer", help="sentencepiece .model (default: the one recorded with the checkpoint)")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                        help="auto: cuda if available (default)")
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel size under torchrun (default 1)")
    parser.add_argument("--pp", type=int, default=1, help="pipeline-parallel size under torchrun (default 1)")
    parser.add_argument("--limit", type=int, default=0, help="at most N items per task (the first N the model "
                                                              "can score; 0: all, or each task's own limit)")
    parser.add_argument("--batch-size", type=int, default=8, help="sequences per forward on a rank (default 8)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def _specs(args):
    from curate.config import load_toml
    from pretrain.eval.tasks import parse_task_arg, task_specs_from_tables

    specs = [parse_task_arg(t) for t in args.task]
    if args.tasks:
        raw = load_toml(args.tasks, what="tasks file")
        unknown = sorted(set(raw) - {"tasks"})
        if unknown:
            from curate.config import ConfigError

            raise ConfigError(f"{args.tasks}: unknown key(s) {', '.join(unknown)}; a tasks file holds [[tasks]] tables")
        specs += task_specs_from_tables(raw.get("tasks", []), f"{args.tasks}: [[tasks]]")
    if args.limit < 0 or (args.step is not None and args.step < 0):
        from curate.config import ConfigError

        raise ConfigError(f"--limit {args.limit}: must be >= 0" if args.limit < 0 else
                          f"--step {args.step}: a checkpoint's step is >= 0")
    if args.limit:
        for s in specs:
            s.limit = min(s.limit, args.limit) if s.limit else args.limit
    from pretrain.eval.tasks import check_distinct_names

    check_distinct_names(specs, "the tasks")
    return specs


def _scorable(args, specs) -> dict:
    """{task: the items the checkpoint's model scores} (its tokenizer and window; a task's limit counts them)."""
    from pretrain import checkpoint as ckpt
    from pretrain.data.tokenizer import load_tokenizer
    from pretrain.eval.request_lists import scored_items
    from pretrain.eval.run import prepare_tasks
    from pretrain.generate import resolve_tokenizer_path

    d = ckpt.find_intact(ckpt.step_dir(args.checkpoint, args.step) if args.step is not None else args.checkpoint)
    tok = load_tokenizer(resolve_tokenizer_path(d, args.tokenizer))
    tasks = prepare_tasks(specs, tok, ckpt.read_model_config(d).max_seq_len)
    return {t.spec.name: [t.items.items[i] for i in scored_items(t.requests)] for t in tasks}


def _overwrite_problem(args, specs) -> str | None:
    """``--output`` or a file ``--write-lm-eval-tasks`` writes (``NAME.jsonl``, ``NAME.yaml``) that is an input:
    a task file (``--task bpb:evals/prose.jsonl --write-lm-eval-tasks evals`` wrote its converted rows over
    ``evals/prose.jsonl``), the tasks file, the checkpoint, the tokenizer."""
    from curate.write_guard import overwrite_problem

    reads = [args.checkpoint, args.tasks, args.tokenizer] + [s.path for s in specs]
    writes = [args.output]
    if args.write_lm_eval_tasks:
        writes += [Path(args.write_lm_eval_tasks) / f"{s.name}.{ext}" for s in specs for ext in ("jsonl", "yaml")]
    return overwrite_problem(writes, reads)


RESULT_KEYS = ("checkpoint", "step", "tasks")  # what every results JSON of `pretrain eval` holds


def is_results_file(path) -> bool:
    """Whether ``path`` is a results JSON `pretrain eval --output` wrote: an object with the checkpoint, its step
    and the tasks' results."""
    from curate.shards import read_record

    res = read_record(path)  # None: missing, not a regular file, not JSON, not an object
    return res is not None and all(k in res for k in RESULT_KEYS) and isinstance(res["tasks"], dict)


def _results_problem(path, force: bool) -> str | None:
    """``--output`` an existing file that is not an earlier results JSON (unless ``force``): refused at start,
    before the checkpoint is loaded."""
    import os

    if not path or force or not os.path.lexists(path) or is_results_file(path):
        return None
    return (f"--output {path} exists and is not a results file `pretrain eval` wrote: choose another --output, "
            f"or pass --force to overwrite it")


def writable_problem(path, what: str, folder: bool = False) -> str | None:
    """A message when ``path`` (a file to write; ``folder``: a folder to write files in) cannot be written, found
    at start by making and removing a file where it goes: in its folder, or where that folder is missing, in the
    nearest folder above it that exists (the missing ones are made when the results are written, as `curate run`,
    `pretrain train` and `pretrain ablate` make their output folders). Without it a read-only folder, or /proc,
    failed only after the whole evaluation, its figures lost. ``what``: the option, for the message."""
    import os
    import tempfile

    if not path:
        return None
    p = os.path.abspath(path if folder else os.path.dirname(os.path.abspath(path)))
    while not os.path.lexists(p):
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    if not os.path.isdir(p):
        return None  # a file where a folder goes: output_file_problem / output_problem say it
    try:
        fd, probe = tempfile.mkstemp(prefix=".pretrain-eval-", suffix=".probe", dir=p)
    except OSError as e:
        return f"{what} {path}: cannot write in {p} ({e.strerror or e}): choose another {what}"
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError:
        pass
    return None


def lm_eval_command(include_path, names) -> str:
    """The lm_eval line that scores the tasks written into ``include_path`` on an export (``EXPORT``: the folder of
    `pretrain export-hf`), every argument quoted for a POSIX shell (a folder with spaces or ``$`` in its name)."""
    import shlex

    return shlex.join(["lm_eval", "--model", "hf", "--model_args", "pretrained=EXPORT", "--include_path",
                       str(include_path), "--tasks", ",".join(names)])


def run(args) -> int:
    from curate.config import ConfigError
    from pretrain.checkpoint import CheckpointError
    from curate.write_guard import output_file_problem
    from pretrain.eval.tasks import EvalDataError

    try:
        specs = _specs(args)
        if not specs:
            raise ConfigError("no task: give --task KIND:PATH[:NAME] or --tasks FILE")
        problem = _overwrite_problem(args, specs)
        if problem:
            raise ConfigError(problem)
        problem = output_file_problem(args.output)
        if problem:
            raise ConfigError(f"--output {problem}")
        problem = _results_problem(args.output, args.force) or writable_problem(args.output, "--output")
        if problem:
            raise ConfigError(problem)
        if args.write_lm_eval_tasks:
            from pretrain.eval.lm_eval_tasks import output_problem, write_lm_eval_tasks

            problem = (output_problem(specs, args.write_lm_eval_tasks, args.force)  # before the checkpoint is read
                       or writable_problem(args.write_lm_eval_tasks, "--write-lm-eval-tasks", folder=True))
            if problem:
                raise ConfigError(problem)
            keep = _scorable(args, specs) if args.checkpoint else None
            for path in write_lm_eval_tasks(specs, args.write_lm_eval_tasks, keep, force=args.force):
                print(path)
            print("run: " + lm_eval_command(args.write_lm_eval_tasks, [s.name for s in specs]))
            return 0
        if not args.checkpoint:
            raise ConfigError("--checkpoint DIR is required (or --write-lm-eval-tasks DIR)")
        if args.batch_size < 1 or args.tp < 1 or args.pp < 1:
            raise ConfigError("--batch-size, --tp and --pp must be >= 1")
        from pretrain.generate import pick_device
        from pretrain.parallel.mesh import check_launch_env

        # torchrun's variables (a stale WORLD_SIZE, RANK=abc) named at start, as `pretrain train` names them
        _, local_rank, _ = check_launch_env(need_store=True)
        pick_device(args.device, local_rank)  # --device cuda without CUDA: said before the checkpoint is read
        from pretrain.eval.run import evaluate_checkpoint, table

        lock = _lock_output(args.output)  # a second eval onto the same --output: refused, naming the first
        try:
            res = evaluate_checkpoint(args.checkpoint, specs, step=args.step, tokenizer=args.tokenizer,
                                      device=args.device, tp=args.tp, pp=args.pp, batch_size=args.batch_size,
                                      show_progress=not args.quiet, log=lambda m: print(m, file=sys.stderr))
            _write_results(res, args, lock)
        finally:
            if lock is not None:
                lock.release()
    except (ConfigError, EvalDataError, CheckpointError, ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


def _lock_output(output, make_folder: bool = False):
    """The lock of ``--output`` (``FILE.lock`` beside it, ``curate.lock.OutputLock``), taken by the process that
    writes it (rank 0); None without ``--output``, on the other ranks, or while its folder does not exist yet and
    ``make_folder`` is false (no folder is made at start: the lock is then taken when the results are written).
    Two evals onto one file had both printed their tables and left one's results."""
    import os

    if not output or os.environ.get("RANK", "0") != "0":
        return None
    from pathlib import Path

    from curate.lock import OutputLock

    path = Path(output).absolute()
    if not path.parent.is_dir():
        if not make_folder:
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
    return OutputLock(path.parent, path.name + ".lock").acquire()


def _write_results(res: dict, args, lock) -> None:
    """Rank 0 prints the table and writes ``--output`` (strict JSON: an overflowing perplexity is null)."""
    import torch.distributed as dist

    if not dist.is_initialized() or dist.get_rank() == 0:
        print(f"{res['checkpoint']}: step {res['step']}, {res['tokens_seen']:,} tokens seen")
        from pretrain.eval.run import table

        print(table(res["tasks"]))
        if args.output:
            from pathlib import Path

            from curate.shards import write_json

            # under the lock taken at start; where the folder did not exist then, it is made now and locked
            own = None if lock is not None else _lock_output(args.output, make_folder=True)
            try:
                write_json(res, Path(args.output).absolute())
            finally:
                if own is not None:
                    own.release()
