"""`curate`: the curation command line. Each subcommand lives in its own module
(``add_arguments(parser)`` + ``run(args) -> int``); this file only dispatches."""
from __future__ import annotations

import sys

from curate.commands.dispatch import dispatch

COMMANDS = {
    "run": ("curate.commands.run", "run a curation pipeline (TOML) over raw inputs into curated shards"),
    "stats": ("curate.commands.stats", "print the funnel of a finished run: per stage, documents in, kept, dropped by reason"),
    "train-quality": ("curate.commands.train_quality", "train a fastText quality classifier from positive and negative shards"),
    "clusters": ("curate.commands.clusters", "show near-duplicate clusters found by minhash_dedup"),
    "stages": ("curate.commands.stages", "the stage reference: every stage's keys, defaults, meanings and reasons"),
    "extractor": ("curate.commands.extractor", "train the learned extraction model (the extract stage's blocks engine)"),
}

EPILOG = """Output to a pipe closed early (`... | head -1`) is dropped quietly: the command goes on, and its exit status is
its own (0 when it succeeded), not that of the closed pipe.

examples (from the repository root, after `make demo`):
  curate run pipelines/books.toml
  curate run pipelines/web.toml --input 'pipelines/sample/*.warc.gz' --output out/run1 --workers 2
  curate stats out/demo/curated/web
  curate stages gopher_quality
  curate train-quality --positive out/demo/curated/books --negative out/demo/raw/web --output quality.bin
  curate clusters out/demo/curated/web --show 5
  curate extractor train --help
"""


def main(argv: list[str] | None = None) -> int:
    return dispatch("curate", "Curation: raw web data (WARC, HTML, JSONL, Parquet) to curated Arrow shards.", COMMANDS, EPILOG, argv)


if __name__ == "__main__":
    sys.exit(main())
