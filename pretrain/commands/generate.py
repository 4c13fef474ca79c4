"""`pretrain generate --checkpoint DIR --prompt TEXT`: print the prompt and its continuation by the model
(the work: pretrain/generate.py)."""
from __future__ import annotations

import sys

from curate.commands.argtypes import whole

EPILOG = """examples (after `make demo`):
  pretrain generate --checkpoint out/demo/checkpoints --prompt "The " --max-tokens 50 --top-k 20
  pretrain generate --checkpoint out/demo/checkpoints --prompt "The " --temperature 0
"""

def add_arguments(parser) -> None:
    import argparse

    parser.epilog, parser.formatter_class = EPILOG, argparse.RawDescriptionHelpFormatter
    parser.add_argument("--checkpoint", required=True, help="checkpoint folder written by `pretrain train`")
    parser.add_argument("--prompt", required=True, help="text to continue")
    parser.add_argument("--max-tokens", type=whole(), default=50, help="at most this many new tokens (default 50)")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature; 0: greedy (default 1)")
    parser.add_argument("--top-k", type=whole(meaning="0: all"), default=0, help="sample among the k most likely tokens; 1: greedy; "
                                                             "0: all (default)")
    parser.add_argument("--seed", type=whole(-2 ** 63, 2 ** 64 - 1, "what torch.Generator takes"), default=0, help="sampling seed (default 0)")
    parser.add_argument("--tokenizer", default=None,
                        help="sentencepiece .model (default: the data.tokenizer recorded with the checkpoint)")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                        help="auto: cuda if available (default)")


def run(args) -> int:
    from pretrain.generate import generate_text, load_for_generation, pick_device

    try:
        args.prompt.encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8 on the command line (Python keeps them as surrogates)
        print("error: --prompt holds bytes that are not UTF-8 text; give the prompt in UTF-8", file=sys.stderr)
        return 2
    try:
        pick_device(args.device)  # --device cuda where CUDA cannot be used: said before anything is loaded
        model, tokenizer = load_for_generation(args.checkpoint, args.tokenizer, args.device)
        text = generate_text(model, tokenizer, args.prompt, args.max_tokens, args.temperature, args.top_k,
                             args.seed)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(args.prompt + text)
    return 0
