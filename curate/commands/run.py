"""`curate run PIPELINE.toml`: run or resume a curation pipeline."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import traceback

from curate.commands.argtypes import positive
from curate.commands.stats import format_funnel
from curate.executors import WorkerLost, make_executor
from curate.lock import LockError
from curate.config import ConfigError
from curate.pipeline import load_pipeline
from curate.runner import run_pipeline
from curate.chain import StageFailure
from curate.tasks import InputChanged

RESUME_HINT = "fix the cause and rerun the same command: finished tasks are kept"
INTERRUPT_HINT = "rerun the same command to resume: finished tasks are kept"  # printed by dispatch on Ctrl-C / SIGTERM
HANDLES_SIGTERM = True  # SIGTERM unwinds like Ctrl-C: the workers are ended, the lock released (exit 143)
EPILOG = """examples (from the repository root; pipelines/web.toml writes out/demo/curated/web):
  curate run pipelines/web.toml
  curate run pipelines/web.toml --input 'pipelines/sample/*.warc.gz' --output out/run1 --workers 2
  curate run pipelines/web.toml --output out/run1 --executor ray --address auto
"""


def add_arguments(p) -> None:
    p.epilog, p.formatter_class = EPILOG, argparse.RawDescriptionHelpFormatter
    p.add_argument("pipeline", help="pipeline file (TOML), e.g. pipelines/web.toml")
    p.add_argument("--input", nargs="+", metavar="PATH", help="input files or globs; replace the file's [[sources]]")
    p.add_argument("--output", metavar="DIR", help="output folder; replaces [pipeline].output")
    p.add_argument("--workers", type=positive(), help="parallel worker processes (default: [pipeline].workers, else 1)")
    p.add_argument("--executor", choices=["local", "ray"], default="local",
                   help="local process pool (default) or Ray tasks on a Ray cluster")
    p.add_argument("--address", help="Ray cluster address (with --executor ray); default starts a local Ray")
    p.add_argument("--allow-changed-inputs", action="store_true",
                   help="resume although input files changed since the folder was written: their read tasks "
                        "and everything they feed are redone (default: stop and list them)")
    p.add_argument("--quiet", action="store_true", help="no progress bars or funnel table")


def run(args) -> int:
    if args.address is not None and args.executor != "ray":  # (as pretrain tokenize, tokenizer train and ablate)
        print("curate: error: --address is for --executor ray", file=sys.stderr)
        return 2
    if args.quiet:
        os.environ["TQDM_DISABLE"] = "1"  # also silences the bars of worker processes and global stages
    try:
        pipeline = load_pipeline(args.pipeline, inputs=args.input, output=args.output, workers=args.workers)
        executor = make_executor(args.executor, workers=pipeline.workers, address=args.address,
                                 max_in_flight=pipeline.max_in_flight, max_retries=pipeline.max_retries)
        t0 = time.time()
        try:
            stats = run_pipeline(pipeline, executor, progress=not args.quiet,
                                 allow_changed_inputs=args.allow_changed_inputs)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM (dispatch prints the one line): workers end now
            executor.abort()
            raise
        finally:
            executor.close()
    except (ConfigError, LockError) as e:
        print(f"curate: error: {e}", file=sys.stderr)
        return 2
    except (StageFailure, WorkerLost, InputChanged) as e:
        print(f"curate: error: {e}\n{RESUME_HINT}", file=sys.stderr)
        return 1
    except OSError as e:  # disk full, permissions, a file system gone: not about one document
        where = f": {e.filename}" if e.filename else ""
        print(f"curate: error: {e.strerror or e}{where} ({type(e).__name__})\n{RESUME_HINT}", file=sys.stderr)
        return 1
    except Exception as e:  # a bug: one line here, the traceback in a file (CURATE_DEBUG=1 raises it)
        if os.environ.get("CURATE_DEBUG"):
            raise
        fd, path = tempfile.mkstemp(prefix="curate-error-", suffix=".txt")
        with os.fdopen(fd, "w") as f:
            traceback.print_exc(file=f)
        print(f"curate: error: {type(e).__name__}: {str(e)[:500]}\n(traceback in {path}; {RESUME_HINT})",
              file=sys.stderr)
        return 1
    if not args.quiet:
        print(format_funnel(stats))
        print(f"done in {time.time() - t0:.1f}s: {pipeline.output}/data/, {pipeline.output}/manifest.json, "
              f"{pipeline.output}/stats.json")
    return 0
