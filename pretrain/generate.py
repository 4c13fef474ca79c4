"""Generating text from a checkpoint (``pretrain generate --checkpoint DIR --prompt TEXT``).

Prints the prompt followed by the generated text. Decoding is a plain loop without a KV cache: each step runs
the model on the last ``max_seq_len`` tokens and takes the next token from the last position's logits (the
vocabulary padding columns are cut off). ``--temperature 0`` or ``--top-k 1`` is greedy decoding; otherwise the
next token is sampled from ``softmax(logits / T)`` restricted to the ``k`` most likely tokens (``--top-k 0``: all),
with a seeded generator. Generation stops after ``--max-tokens`` tokens or at the end-of-document token.
The tokenizer is ``--tokenizer`` or else the ``data.tokenizer`` of the run's config saved in the checkpoint's
``meta.json``, and must be the one the checkpoint was trained with (the sha256 meta.json records; older
checkpoints do not record one); the device is CUDA when available (``--device``).
"""
from __future__ import annotations

import math
from pathlib import Path

import torch


def is_greedy(temperature: float, top_k: int) -> bool:
    return temperature == 0 or top_k == 1


@torch.no_grad()
def next_token(logits: torch.Tensor, temperature: float, top_k: int, generator: torch.Generator | None) -> int:
    """logits: [V] (real vocabulary only)."""
    if is_greedy(temperature, top_k):
        return int(torch.argmax(logits))
    logits = logits.double()
    if 0 < top_k < logits.numel():
        kth = torch.topk(logits, top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    top = logits.max()
    if not torch.isfinite(top):
        return int(torch.argmax(logits))
    # shifted by the maximum first: every value <= 0 and the largest exactly 0, so a tiny temperature (1e-45) sends
    # the others to -inf instead of overflowing to inf / nan: sampling among the ties of the maximum (greedy)
    probs = torch.softmax((logits - top) / temperature, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))


@torch.no_grad()
def generate_ids(model: torch.nn.Module, prompt_ids: list[int], max_tokens: int, temperature: float = 1.0,
                 top_k: int = 0, eod_id: int | None = None, seed: int = 0) -> list[int]:
    """The ids generated after ``prompt_ids`` (not including them, nor the final EOD)."""
    if not math.isfinite(temperature) or temperature < 0:  # nan passes `< 0`, then sampling fails inside torch
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature}")
    if max_tokens < 0:
        raise ValueError(f"max-tokens must be >= 0, got {max_tokens}")
    if top_k < 0:
        raise ValueError(f"top-k must be >= 0, got {top_k}")
    if not -2 ** 63 <= seed < 2 ** 64:  # what torch.Generator.manual_seed takes
        raise ValueError(f"seed must be in [-2**63, 2**64 - 1], got {seed}")
    if not prompt_ids:
        if eod_id is None:
            raise ValueError("empty prompt and no end-of-document token to start from")
        prompt_ids = [eod_id]  # a document starts after an EOD
    cfg = model.config
    window, vocab = cfg.max_seq_len, cfg.vocab_size
    device = next(model.parameters()).device
    generator = None
    if not is_greedy(temperature, top_k):
        generator = torch.Generator(device=device)
        generator.manual_seed(seed)
    ids = list(prompt_ids)
    out: list[int] = []
    was_training = model.training
    model.eval()
    try:
        for _ in range(max_tokens):
            x = torch.tensor([ids[-window:]], dtype=torch.long, device=device)
            logits = model(x)[0, -1, :vocab]
            tok = next_token(logits, temperature, top_k, generator)
            if eod_id is not None and tok == eod_id:
                break
            ids.append(tok)
            out.append(tok)
    finally:
        model.train(was_training)
    return out


def generate_text(model, tokenizer, prompt: str, max_tokens: int = 50, temperature: float = 1.0, top_k: int = 0,
                  seed: int = 0) -> str:
    """The continuation of ``prompt`` as text (the prompt itself not included)."""
    prompt_ids = list(tokenizer.encode(prompt))
    new = generate_ids(model, prompt_ids, max_tokens, temperature, top_k, tokenizer.eod_id, seed)
    # decode with the prompt so that word boundaries at the join come out right, then cut the prompt off
    full, head = tokenizer.decode(prompt_ids + new), tokenizer.decode(prompt_ids)
    if prompt_ids and full.startswith(head):
        return full[len(head):]
    return tokenizer.decode(new)


def pick_device(name: str = "auto", local_rank: int = 0) -> torch.device:
    """``--device``: auto (CUDA when available), cpu or cuda; ``cuda`` where CUDA cannot be used is a ValueError
    saying why (``mesh.cuda_problem``, the check ``pretrain train`` makes of train.device), not a traceback from
    inside torch. Under torchrun, ``local_rank`` picks the process's GPU."""
    from pretrain.parallel.mesh import cuda_problem

    asked = name
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda":
        problem = cuda_problem(f"--device {asked}", local_rank)
        if problem:
            raise ValueError(f"{problem}: pass --device cpu (or auto)")
        return torch.device("cuda", local_rank)
    return torch.device(name)


def resolve_tokenizer_path(checkpoint_dir, explicit=None) -> str | None:
    """``explicit`` if given, else the ``data.tokenizer`` of the run's config saved with the checkpoint (its
    ``meta.json``; a relative path is taken from the current directory, as the trainer took it); None if neither.
    Either must be the tokenizer the checkpoint was trained with (its sha256, :func:`checkpoint.check_tokenizer`)."""
    from pretrain import checkpoint as ckpt

    d = ckpt.resolve(checkpoint_dir)
    meta = ckpt.read_meta(d) if d is not None else {}
    recorded = meta.get("config", {}).get("data", {}).get("tokenizer")
    if not explicit and recorded and not Path(str(recorded)).is_absolute() and not Path(str(recorded)).exists():
        raise FileNotFoundError(f"the tokenizer recorded with {checkpoint_dir} is {recorded}, a path relative to the "
                                f"directory training ran from, and there is no such file here ({Path.cwd()}): run "
                                f"from that directory or pass --tokenizer PATH")
    path = explicit or recorded
    if path and d is not None:
        ckpt.check_tokenizer(d, meta, str(path), "pass the tokenizer it was trained with (--tokenizer PATH)")
    return str(path) if path else None


def load_for_generation(checkpoint_dir, tokenizer=None, device="auto"):
    """-> (model, tokenizer) from a checkpoint, the tokenizer given or recorded with it; checks they agree."""
    from pretrain.checkpoint import find_intact, load_model_for_inference
    from pretrain.data.tokenizer import load_tokenizer

    if Path(checkpoint_dir).is_file():
        raise ValueError(f"{checkpoint_dir} is a file, not a checkpoint folder: pass the folder `pretrain train` "
                         "wrote (checkpoint.dir) or one of its step_* folders")
    tok_path = resolve_tokenizer_path(checkpoint_dir, tokenizer)
    if tok_path is None:
        find_intact(checkpoint_dir)  # no checkpoint there at all: say that, not that no tokenizer is recorded
        raise ValueError(f"no tokenizer recorded with {checkpoint_dir} (data.tokenizer): pass --tokenizer PATH")
    tok = load_tokenizer(tok_path)
    model, cfg = load_model_for_inference(checkpoint_dir, device=pick_device(device))
    if tok.vocab_size != cfg.vocab_size:
        raise ValueError(f"tokenizer {tok_path} has {tok.vocab_size} pieces but the model was trained with "
                         f"vocab_size {cfg.vocab_size}: pass the tokenizer it was trained with (--tokenizer)")
    return model.eval(), tok
