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

Requests are held compactly (``pretrain.eval.request_lists``: every token once, in one array; a ``Request`` is
built when it is asked for). ``prepare_task`` reads a task's file and builds its
requests in one pass: an item the model cannot score is set aside as the file is read, named by file and line,
and a task's ``limit`` counts the items scored.
"""
from __future__ import annotations

import random

from pretrain.eval.request_lists import DocumentRequests, PairRequests, RequestList

MAX_REQUESTS = 10_000_000  # requests one task scores (choices, or a document's windows): more is an error, so set
                           # a limit (lm-eval's largest tasks have about a million)
MAX_ITEM_ENCODE_CHARS = 64 << 20  # characters one choice or cloze item has the tokenizer encode (its context, with
                                  # few-shot examples, once per choice): a longer item is set aside
FEWSHOT_SEED = 1234
FEWSHOT_DELIMITER = "\n\n"  # lm-eval's fewshot_delimiter
TARGET_DELIMITER = " "  # lm-eval's target_delimiter: between a multiple-choice context and each choice


def encode_pair(encode, context: str, continuation: str, prefix_id: int,
                cache: dict | None = None) -> tuple[list[int], list[int]]:
    """lm-eval's ``_encode_pair``. ``cache``: a dict kept across the pairs of one item, so that their shared
    context is encoded once (the same tokens: encoding is a function of the text)."""
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
    if cache is not None and cache.get("text") == context:
        ctx = cache["ids"]
    else:
        ctx = encode(context)
        if cache is not None:
            cache["text"], cache["ids"] = context, ctx
    return ctx, whole[len(ctx):]


def encode_pairs(encode, pairs: list[tuple[str, str]], prefix_id: int):
    """An item's (context, continuation) pairs encoded (``encode_pair``), its context once."""
    cache: dict = {}
    return [encode_pair(encode, c, t, prefix_id, cache) for c, t in pairs]


def encode_cost_problem(pairs: list[tuple[str, str]]) -> str | None:
    """Why an item's pairs are too costly to encode (each pair is encoded whole: its context once per choice), or
    None: at most ``MAX_ITEM_ENCODE_CHARS`` characters in all."""
    n = sum(len(c) + len(t) for c, t in pairs)
    if n <= MAX_ITEM_ENCODE_CHARS:
        return None
    return (f"{len(pairs):,} continuation(s) after a context of {len(pairs[0][0]):,} characters: {n:,} characters "
            f"to encode, more than the {MAX_ITEM_ENCODE_CHARS:,} one item may take (MAX_ITEM_ENCODE_CHARS; the "
            f"context is encoded with each choice, as lm-eval does)")


def stride_problem(stride: int, window: int) -> str | None:
    """A bpb task's ``stride`` against the model's window: 0 (lm-eval's disjoint windows) or 1 .. window - 1 (each
    window predicts ``stride`` new tokens after ``window - stride`` of context); a stride of the window or more
    would be the disjoint windows of stride 0 under another name."""
    if 0 <= stride < window:
        return None
    return (f"stride = {stride} is not below the model's window of {window} tokens: give 1 .. {window - 1} (each "
            f"window predicts stride new tokens after window - stride tokens of context, as Megatron does), or 0 "
            f"for lm-eval's disjoint rolling windows (what a stride of {window} or more would amount to)")


def too_many_requests(spec, n: int, items: int) -> str:
    how = ("set limit = N in its [[tasks]] table (or --limit N)" +
           (", or a larger stride (0: the fewest windows)" if spec.kind == "bpb" else ""))
    return (f"task {spec.name!r}: its first {items:,} item(s) of {spec.path} make {n:,} requests, more than the "
            f"{MAX_REQUESTS:,} one task scores (MAX_REQUESTS): {how}")


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


# ------------------------------------------------------------------------------- items to requests

def item_pairs(kind: str, item: dict, prefix: str = "") -> list[tuple[str, str]]:
    """A cloze or choice item's (context, continuation) texts; ``prefix``: its few-shot examples."""
    if kind == "cloze":
        return [cloze_pair(item["text"])]
    return [(prefix + item["context"], TARGET_DELIMITER + c) for c in item["choices"]]


def pair_problem(kind: str, encoded: list[tuple[list[int], list[int]]], window: int) -> str | None:
    """Why an item's encoded pairs cannot be scored (lm-eval stops on them), or None."""
    what = (lambda c: "the target") if kind == "cloze" else (lambda c: f"choice {c}")
    for c, (ctx, cont) in enumerate(encoded):
        if not cont:
            return f"{what(c)} encodes to no token after the context"
        if len(cont) > window:
            return f"{what(c)} is {len(cont)} tokens, longer than the model's {window}-token window"
        if not ctx:
            return "the context encodes to no token (only spaces?): nothing to predict the first token from"
    return None


def document_problem(tokens) -> str | None:
    return None if len(tokens) else "the text encodes to no token"


def build_requests(kind: str, items, encode, prefix_id: int, window: int, shots: int = 0,
                   stride: int = 0) -> tuple[RequestList, list[str]]:
    """-> (requests, problems): an item that cannot be scored (a continuation longer than the window) is left
    out with a reason, as lm-eval would fail on it. ``items``: a list of items, or ``TaskItems`` (then each
    reason names the item's file and line)."""
    where = getattr(items, "where", None)
    items = getattr(items, "items", items)
    if where is None:
        where = lambda i: f"item {i + 1}"  # noqa: E731
    problems: list[str] = []
    if kind == "bpb":
        out = DocumentRequests(prefix_id, window, stride)
        for i, it in enumerate(items):
            tokens = encode(it["text"])
            why = document_problem(tokens)
            if why:
                problems.append(f"{where(i)}: {why}")
            else:
                out.add(i, tokens)
        return out, problems
    out = PairRequests(window)
    for i, it in enumerate(items):
        prefix = fewshot_prefix(items, i, shots) if kind == "choice" else ""
        pairs = item_pairs(kind, it, prefix)
        why = encode_cost_problem(pairs)
        if why is None:
            encoded = encode_pairs(encode, pairs, prefix_id)
            why = pair_problem(kind, encoded, window)
        if why:
            problems.append(f"{where(i)}: {why}")
        else:
            out.add(i, encoded)
    return out, problems


def prepare_task(spec, encode, prefix_id: int, window: int, max_problems: int = 5):
    """-> (TaskItems, requests, problems): the task's items read from its file with their requests built in the
    same pass, for a model of ``window`` tokens. An item the model cannot score (a continuation longer than the
    window, a text that encodes to no token) is set aside as it is read, with the item's file and line, so that
    the task's ``limit`` counts items scored (the first N) and reading stops there. With ``shots`` (choice), the
    requests are built once every item is read (each item's examples are other items): an item scorable alone
    but not after its examples (not seen with real tokenizers) is in ``problems``."""
    from curate.config import ConfigError
    from pretrain.eval.tasks import EvalDataError, read_items

    kind = spec.kind
    if kind == "bpb":
        why = stride_problem(spec.stride, window)
        if why:  # before the file is read
            raise ConfigError(f"task {spec.name!r}: {why}")
    store = DocumentRequests(prefix_id, window, spec.stride) if kind == "bpb" else PairRequests(window)
    kept = n_requests = 0

    def check(item: dict) -> str | None:
        nonlocal kept, n_requests
        if kind == "bpb":
            tokens = encode(item["text"])
            why = document_problem(tokens)
            if why is None:
                store.add(kept, tokens)
                n_requests = len(store)
        else:
            pairs = item_pairs(kind, item)
            why = encode_cost_problem(pairs)
            if why is None:
                encoded = encode_pairs(encode, pairs, prefix_id)
                why = pair_problem(kind, encoded, window)
            if why is None:
                n_requests += len(encoded)
                if not spec.shots:
                    store.add(kept, encoded)
        if why is None:
            kept += 1
            if n_requests > MAX_REQUESTS:
                raise EvalDataError(too_many_requests(spec, n_requests, kept))
        return why

    items = read_items(spec, max_problems, check=check)
    if spec.shots:
        store, problems = build_requests(kind, items, encode, prefix_id, window, shots=spec.shots)
        return items, store, problems
    return items, store, []
