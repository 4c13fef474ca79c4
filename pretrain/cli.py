"""`pretrain`: tokenizer, tokenization, blends, training, generation and export.
Each subcommand lives in its own module (``add_arguments(parser)`` + ``run(args) -> int``);
this file only dispatches."""
from __future__ import annotations

import sys

from curate.commands.dispatch import dispatch

COMMANDS = {
    "tokenizer": ("pretrain.data.tokenizer", "train a sentencepiece tokenizer from curated shards"),
    "tokenize": ("pretrain.data.tokenize", "curated shards to a Megatron-compatible .bin/.idx indexed dataset"),
    "blend": ("pretrain.data.blend", "build or inspect a blend of indexed datasets (data_specs/*.toml)"),
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
  pretrain report --out out/report --curated out/demo/curated/web --logs out/demo/logs --checkpoint out/ckpt
"""


def main(argv: list[str] | None = None) -> int:
    return dispatch("pretrain", "Pretraining: tokenizer, indexed datasets and blends, GPT training, generation, export.", COMMANDS, EPILOG, argv)


if __name__ == "__main__":
    sys.exit(main())
