"""`pretrain`: tokenizer, tokenization, blends, training, generation and export.
Each subcommand lives in its own module under pretrain/commands/ (``add_arguments(parser)`` + ``run(args) -> int``);
this file only dispatches."""
from __future__ import annotations

import sys

from curate.commands.dispatch import dispatch

COMMANDS = {
    "tokenizer": ("pretrain.commands.tokenizer", "train a sentencepiece tokenizer from curated shards"),
    "tokenize": ("pretrain.commands.tokenize", "curated shards to a Megatron-compatible .bin/.idx indexed dataset"),
    "blend": ("pretrain.commands.blend", "build or inspect a blend of indexed datasets (data_specs/*.toml)"),
    "train": ("pretrain.commands.train", "train a GPT (one process, or under torchrun with tp/pp/dp)"),
    "eval": ("pretrain.commands.eval", "evaluate a checkpoint on local task files (bpb, cloze, choice; lm-eval's definitions)"),
    "launch": ("pretrain.commands.launch", "run pretrain train under torchrun on this node, restarted on failure"),
    "generate": ("pretrain.commands.generate", "generate text from a checkpoint"),
    "export-hf": ("pretrain.commands.export_hf", "export a checkpoint to a Hugging Face transformers model folder"),
    "report": ("pretrain.commands.report", "write the run report: funnel and loss plots, summary"),
    "config": ("pretrain.commands.config", "the training config's reference: every table's keys, types, defaults, meanings"),
    "ablate": ("pretrain.commands.ablate", "blend A vs blend B: proxy runs per data variant and seed, evaluated, with a verdict"),
}

EPILOG = """Output to a pipe closed early (`... | head -1`) is dropped quietly: the command goes on, and its exit status is
its own (0 when it succeeded), not that of the closed pipe.

examples (the paths exist after `make demo`):
  pretrain tokenizer train --input out/demo/curated/books out/demo/curated/web --vocab-size 4096 --output out/tok.model
  pretrain tokenize --input out/demo/curated/web --tokenizer out/demo/tokenizer.model --output-prefix out/tokens/web
  pretrain blend inspect data_specs/demo.toml --tokens 1e6
  pretrain config train
  pretrain train --config pretrain/configs/tiny.toml
  torchrun --nproc-per-node 4 -m pretrain train --config pretrain/configs/tiny.toml --set parallel.tp=2 --set parallel.pp=2
  pretrain eval --checkpoint out/demo/checkpoints --task bpb:pipelines/sample/evals/prose.jsonl:prose
  pretrain launch --nnodes 2 --nproc-per-node 2 --rdzv-endpoint 127.0.0.1:29500 --config pretrain/configs/tiny.toml --set data.kind=synthetic --set model.vocab_size=256
  pretrain generate --checkpoint out/demo/checkpoints --prompt "The "
  pretrain export-hf out/demo/checkpoints out/hf
  pretrain report --out out/report --curated out/demo/curated/web out/demo/curated/books --logs out/demo/logs --checkpoint out/demo/checkpoints
  pretrain ablate pipelines/ablate_demo.toml --output out/demo/ablate
"""


def main(argv: list[str] | None = None) -> int:
    return dispatch("pretrain", "Pretraining: tokenizer, indexed datasets and blends, GPT training, generation, export.", COMMANDS, EPILOG, argv)


if __name__ == "__main__":
    sys.exit(main())
