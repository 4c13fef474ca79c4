"""Items to scoring requests, token for token as lm-evaluation-harness 0.4 builds them for a causal model.

A request is a token sequence and how many of its last tokens are scored: the model reads
``tokens[:-1]`` (the last ``window`` of them) and the log-probabilities of the last ``n_cont`` tokens are summed.
- A (context, continuation) pair (``cloze``, ``choice``): trailing spaces of the context move to the
  continuation; ``context + continuation`` is encoded whole and the continuation's tokens are what follows the
  context's own encoding (lm-eval's ``_encode_pair``). An empty context is the prefix token (the end-of-document
  token, what every training document starts after).
- A document (``bpb``): lm-eval's rolling windows over its tokens, the first one after the prefix token, each
  window predicting up to ``window`` tokens it has not predicted before (``stride = 0``); ``stride = N`` predicts
  N new tokens per window with the window's other tokens as context (Megatron's overlapping windows: more
  context per token, lower perplexity, more windows).
"""
from __future__ import annotations

import random
from dataclasses import dataclass

FEWSHOT_SEED = 1234
FEWSHOT_DELIMITER = "\n\n"  # lm-eval's fewshot_delimiter
TARGET_DELIMITER = " "  # lm-eval's target_delimiter: between a multiple-choice context and each choice


@dataclass
class Request:
    tokens: list[int]
    n_cont: int
    item: int  # index of the item in its task
    choice: int = 0  # choice index (choice), window index (bpb)


def encode_pair(encode, context: str, continuation: str, prefix_id: int) -> tuple[list[int], list[int]]:
    if context == "":
        cont = encode(continuation)
        if cont and cont[0] == prefix_id:
            return cont[:1], cont[1:]
        return [prefix_id], cont
    n_spaces = len(context) - len(context.rstrip())
    if n_spaces:
        continuation = context[-n_spaces:] + continuation
        context = context[:-n_spaces]
    whole = encode(context + continuation)
    ctx = encode(context)
    return ctx, whole[len(ctx):]


def rolling_windows(tokens: list[int], prefix_id: int, window: int, stride: int = 0):
    """(context, continuation) token pairs covering ``tokens`` once (lm-eval's ``get_rolling_token_windows``
    followed by ``make_disjoint_window``; ``context_len = window - stride + 1`` when a stride is given)."""
    if not tokens:
        return
    context_len = 1 if stride <= 0 else max(1, window - min(stride, window) + 1)
    pred_len = window - context_len + 1
    first = min(window, len(tokens))
    pairs = [([prefix_id] + tokens[:first - 1], tokens[:first])]
    done = first
    while done < len(tokens):
        n = min(len(tokens) - done, pred_len)
        end = done + n
        pairs.append((tokens[max(0, end - window - 1):end - 1], tokens[end - n:end]))
        done = end
    for a, b in pairs:
        yield a[:len(a) - (len(b) - 1)], b


def cloze_pair(text: str) -> tuple[str, str]:
    """LAMBADA's split: the context is the text before the last space, the target the last word with its space."""
    words = text.split(" ")
    return " ".join(words[:-1]), " " + words[-1]


def fewshot_prefix(items: list[dict], i: int, shots: int, seed: int = FEWSHOT_SEED) -> str:
    """``shots`` other items of the same file, each its context, a space and its right choice, each followed by a
    blank line (lm-eval's layout of labeled examples); fixed by ``seed`` and the item's index."""
    if shots <= 0:
        return ""
    rng = random.Random(f"{seed}:{i}")
    pool = [j for j in range(len(items)) if j != i]
    picked = rng.sample(pool, shots)
    return "".join(items[j]["context"] + TARGET_DELIMITER + items[j]["choices"][items[j]["label"]] + FEWSHOT_DELIMITER
                   for j in picked)


def build_requests(kind: str, items: list[dict], encode, prefix_id: int, window: int, shots: int = 0,
                   stride: int = 0) -> tuple[list[Request], list[str]]:
    """-> (requests, problems): an item that cannot be scored (a continuation longer than the window) is left
    out with a reason, as lm-eval would fail on it."""
    out: list[Request] = []
    problems: list[str] = []
    for i, it in enumerate(items):
        if kind == "bpb":
            for w, (ctx, cont) in enumerate(rolling_windows(encode(it["text"]), prefix_id, window, stride)):
                out.append(Request(ctx + cont, len(cont), i, w))
            continue
        if kind == "cloze":
            pairs = [cloze_pair(it["text"])]
        else:
            context = fewshot_prefix(items, i, shots) + it["context"]
            pairs = [(context, TARGET_DELIMITER + c) for c in it["choices"]]
        encoded = [encode_pair(encode, c, t, prefix_id) for c, t in pairs]
        if any(len(cont) > window for _, cont in encoded) or any(not cont for _, cont in encoded):
            problems.append(f"item {i}: a continuation is empty or longer than the model's {window}-token window")
            continue
        out.extend(Request(ctx + cont, len(cont), i, c) for c, (ctx, cont) in enumerate(encoded))
    return out, problems
