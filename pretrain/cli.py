"""`pretrain`: tokenizer, tokenization, blends, training, generation and export.
Each subcommand lives in its own module (``add_arguments(parser)`` + ``run(args) -> int``);
this file only dispatches."""
from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = {
    "tokenizer": ("pretrain.tokenizer", "train a sentencepiece tokenizer from curated shards"),
    "tokenize": ("pretrain.tokenize", "curated shards to a Megatron-compatible .bin/.idx indexed dataset"),
    "blend": ("pretrain.blend", "build or inspect a blend of indexed datasets (data_specs/*.toml)"),
    "train": ("pretrain.train", "train a GPT (one process, or under torchrun with tp/pp/dp)"),
    "generate": ("pretrain.generate", "generate text from a checkpoint"),
    "export-hf": ("pretrain.export_hf", "export a checkpoint to a Hugging Face transformers model folder"),
    "report": ("pretrain.report", "write the run report: funnel and loss plots, summary"),
}

EPILOG = """examples:
  pretrain tokenizer train --input out/demo/curated --vocab-size 4096 --output out/tok.model
  pretrain tokenize --input out/demo/curated --tokenizer out/tok.model --output-prefix out/tokens/web
  pretrain blend inspect data_specs/demo.toml --tokens 1e6
  pretrain train --config pretrain/configs/tiny.toml
  torchrun --nproc-per-node 4 -m pretrain train --config pretrain/configs/tiny.toml --set parallel.tp=2 --set parallel.pp=2
  pretrain generate --checkpoint out/ckpt --prompt "The "
  pretrain export-hf out/ckpt out/hf
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="pretrain", description=__doc__.splitlines()[0].strip("`: "), epilog=EPILOG,
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
