"""`pretrain ablate SPEC.toml --output DIR`: train the same proxy model on each data variant of the spec with the
same tokens and seeds, evaluate every run and say which variant is better and whether the difference is beyond
seed noise (the work: pretrain/ablate/)."""
from __future__ import annotations

import argparse
import sys

from curate.commands.argtypes import positive

EPILOG = """The spec (TOML; see docs/ablate.md): config (the train config of every run), tokens (per run), seeds,
baseline, [[variants]] (name and curated = [folders] or blend = "spec.toml"), [[tasks]] (name, kind, path as in
`pretrain eval`), and optionally tokenizer (absent: one trained on a sample of all variants).

Writes DIR/results.json (per variant: each run's final metrics, mean and std over seeds; per variant and metric:
delta against the baseline, stderr and verdict; snr per metric; contamination per variant), DIR/report.md with
the table and DIR/curves/*.png (each metric against tokens, one line per variant, a band over its seeds).

{rule}.
Signal-to-noise ratio (snr): (largest - smallest variant mean) / RMS of the variants' seed std.
Contamination: before training each variant's text is scanned for the eval items with the decontaminate
stage's 13-gram rules; the share of items found is printed and written, and a variant above
contamination_threshold is named in a warning.

Rerun the same command after an interruption: finished runs are kept, the run in progress resumes from its
checkpoint, and results.json comes out the same.

examples:
  pretrain ablate pipelines/ablate_demo.toml --output out/demo/ablate
  pretrain ablate pipelines/ablate_demo.toml --output out/demo/ablate --executor ray --ray-cpus 4
  pretrain ablate pipelines/ablate_demo.toml --output out/demo/ablate --executor ray --address 10.0.0.1:6379
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    import textwrap

    from pretrain.ablate.stats import RULE

    rule = RULE[0].upper() + RULE[1:] + (" (unpaired, not a paired test over seeds: with 2-3 seeds a paired "
                                          "error rests on 1-2 differences and can be near zero by chance)")
    parser.epilog = EPILOG.format(rule=textwrap.fill(rule, 112))
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("spec", help="the ablation spec (TOML)")
    parser.add_argument("--output", default=None, metavar="DIR",
                        help="where runs, results.json and report.md go (default: out/ablate/SPEC_NAME)")
    parser.add_argument("--force", action="store_true",
                        help="use DIR although it holds files and is not an earlier ablation's folder (default: "
                             "refuse; a rerun onto its own folder continues)")
    parser.add_argument("--executor", choices=("local", "ray"), default="local",
                        help="local: runs one after another here (default); ray: runs in parallel as Ray tasks")
    parser.add_argument("--address", default=None,
                        help="Ray cluster (HOST:PORT, ray://HOST:PORT or auto); default: a local Ray instance")
    parser.add_argument("--ray-cpus", type=positive(), default=None, help="CPUs of the local Ray instance (default: all)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from curate.config import ConfigError
    from curate.lock import LockError, OutputLock
    from pretrain.ablate.ablation import print_summary, run_ablation
    from pretrain.ablate.runs import RunFailed
    from pretrain.ablate.spec import load_spec

    for flag, value in (("--address", args.address), ("--ray-cpus", args.ray_cpus)):
        if value and args.executor != "ray":  # (--ray-cpus was ignored without a word)
            print(f"pretrain ablate: {flag} needs --executor ray", file=sys.stderr)
            return 2
    try:
        spec = load_spec(args.spec)
        out = Path(args.output or Path("out") / "ablate" / Path(args.spec).stem)
        from curate.write_guard import overwrite_problem

        problem = overwrite_problem([out], [args.spec, spec.config, spec.tokenizer]
                                    + [c for v in spec.variants for c in v.curated + [v.blend]]
                                    + [t.get("path") if isinstance(t, dict) else getattr(t, "path", None)
                                       for t in spec.tasks])
        problem = problem or output_dir_problem(out, args.force)
        if problem:
            raise ConfigError(problem)
        out.mkdir(parents=True, exist_ok=True)
        lock = OutputLock(out).acquire()
        try:
            result = run_ablation(spec, out, args.executor, args.address, args.ray_cpus, log=_say)
        finally:
            lock.release()
    except LockError as e:
        print(f"pretrain ablate: {e}", file=sys.stderr)
        return 2
    except (ConfigError, FileNotFoundError, ValueError) as e:
        print(f"pretrain ablate: {e}", file=sys.stderr)
        return 2
    except RunFailed as e:
        print(f"pretrain ablate: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\npretrain ablate: interrupted; rerun the same command to continue where it stopped", file=sys.stderr)
        return 130
    print_summary(result, out, _say)
    return 0


def is_ablation_dir(out) -> bool:
    """Whether ``out`` is a folder `pretrain ablate` wrote: its ``spec.json`` (the spec and the checksums of its
    files), or only the ``run.lock`` of a run stopped before it wrote that."""
    from pathlib import Path

    from curate.lock import LOCK_FILE
    from curate.shards import read_record

    out = Path(out)
    spec = read_record(out / "spec.json")
    if spec is not None and isinstance(spec.get("spec"), dict) and isinstance(spec.get("files"), dict):
        return True
    try:
        names = [p.name for p in out.iterdir()]
    except OSError:
        return False
    lock = read_record(out / LOCK_FILE)
    return names == [LOCK_FILE] and lock is not None and "pid" in lock


def output_dir_problem(out, force: bool = False) -> str | None:
    """A message when ``out`` cannot be the ablation's folder: a file (or below one), or (unless ``force``) a
    folder that holds files and is not an earlier ablation's (:func:`is_ablation_dir`): its results.json,
    report.md and curves/ would be written over."""
    from pathlib import Path

    from curate.write_guard import blocking_file

    out = Path(out)
    above = blocking_file(out)
    if above:
        return f"--output {out}: {above} is a file, not a folder; choose another --output"
    if force or not out.is_dir() or not any(out.iterdir()) or is_ablation_dir(out):
        return None
    names = sorted(p.name for p in out.iterdir())
    return (f"--output {out} is not empty and is not an earlier ablation's folder (it holds {', '.join(names[:5])}"
            f"{' and more' if len(names) > 5 else ''}); choose a new or empty folder, or pass --force to write "
            f"the ablation into it (files of the same names are replaced)")


def _say(text: str) -> None:
    print(text, flush=True)
