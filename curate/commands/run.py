"""`curate run PIPELINE.toml`: run or resume a curation pipeline."""
from __future__ import annotations

import os
import sys
import time

from curate.commands.stats import format_funnel
from curate.executors import make_executor
from curate.pipeline import ConfigError, load_pipeline
from curate.runner import run_pipeline


def add_arguments(p) -> None:
    p.add_argument("pipeline", help="pipeline file (TOML), e.g. pipelines/demo.toml")
    p.add_argument("--input", nargs="+", metavar="PATH", help="input files or globs; replace the file's [[sources]]")
    p.add_argument("--output", metavar="DIR", help="output folder; replaces [pipeline].output")
    p.add_argument("--workers", type=int, help="parallel worker processes (default: [pipeline].workers, else 1)")
    p.add_argument("--executor", choices=["local", "ray"], default="local",
                   help="local process pool (default) or Ray tasks on a Ray cluster")
    p.add_argument("--address", help="Ray cluster address (with --executor ray); default starts a local Ray")
    p.add_argument("--quiet", action="store_true", help="no progress bars or funnel table")


def run(args) -> int:
    if args.quiet:
        os.environ["TQDM_DISABLE"] = "1"  # also silences the bars of worker processes and global stages
    try:
        pipeline = load_pipeline(args.pipeline, inputs=args.input, output=args.output, workers=args.workers)
        executor = make_executor(args.executor, workers=pipeline.workers, address=args.address)
        t0 = time.time()
        try:
            stats = run_pipeline(pipeline, executor, progress=not args.quiet)
        finally:
            executor.close()
    except ConfigError as e:
        print(f"curate: error: {e}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(format_funnel(stats))
        print(f"done in {time.time() - t0:.1f}s: {pipeline.output}/manifest.json, {pipeline.output}/stats.json")
    return 0
