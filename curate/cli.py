"""`curate`: the curation command line. Each subcommand lives in its own module
(``add_arguments(parser)`` + ``run(args) -> int``); this file only dispatches."""
from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = {
    "run": ("curate.commands.run", "run a curation pipeline (TOML) over raw inputs into curated shards"),
    "stats": ("curate.commands.stats", "print the funnel of a finished run: per stage, documents in, kept, dropped by reason"),
    "train-quality": ("curate.stages.quality_train", "train a fastText quality classifier from positive and negative shards"),
    "clusters": ("curate.stages.minhash.inspect", "show near-duplicate clusters found by minhash_dedup"),
}

EPILOG = """examples:
  curate run pipelines/demo.toml
  curate run pipelines/demo.toml --input 'data/*.warc.gz' --output out/run1 --workers 2
  curate stats out/demo/curated
  curate train-quality --positive ref/ --negative crawl/ --output quality.bin
  curate clusters out/demo/curated --show 5
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="curate", description=__doc__.splitlines()[0].strip("`: "), epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        try:
            importlib.import_module(module).add_arguments(p)
        except ModuleNotFoundError as e:  # a subcommand whose module is not built yet
            if not module.startswith(e.name or "?"):
                raise
            p.set_defaults(_missing=True)
    args = parser.parse_args(argv)
    if getattr(args, "_missing", False):
        parser.error(f"'{args.command}' is not available in this build")
    return importlib.import_module(args._module).run(args) or 0


if __name__ == "__main__":
    sys.exit(main())
