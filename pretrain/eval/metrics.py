"""Each kind's metrics from its requests' scores, with lm-evaluation-harness 0.4's definitions and names.

- ``bpb`` (lm-eval's ``loglikelihood_rolling``): a document's log-likelihood is the sum over its windows;
  ``word_perplexity = exp(-sum ll / sum words)`` with words counted as ``len(re.split(r"\\s+", text))``,
  ``byte_perplexity = exp(-sum ll / sum bytes)`` (UTF-8), ``bits_per_byte = -sum ll / sum bytes / ln 2``; Quarry
  adds ``token_perplexity = exp(-sum ll / sum tokens)`` (tokenizer-dependent: compare it only between models
  with the same tokenizer).
- ``cloze`` (``loglikelihood``): ``acc`` is the share of items whose every target token is the greedy choice;
  ``perplexity = exp(-mean ll)`` over items.
- ``choice`` (``multiple_choice``): ``acc`` is the share of items whose right choice has the highest
  log-likelihood, ``acc_norm`` the same after dividing each choice's log-likelihood by its length in characters
  (ties: the first choice, as ``numpy.argmax``).
"""
from __future__ import annotations

import math
import re

METRICS = {
    "bpb": ("bits_per_byte", "byte_perplexity", "word_perplexity", "token_perplexity"),
    "cloze": ("acc", "perplexity"),
    "choice": ("acc", "acc_norm"),
}
HIGHER_IS_BETTER = {"bits_per_byte": False, "byte_perplexity": False, "word_perplexity": False,
                    "token_perplexity": False, "perplexity": False, "acc": True, "acc_norm": True}


def _exp(x: float) -> float:
    """``math.exp``, infinite where it overflows (past e^709: a perplexity per "word" of a long text without
    spaces, such as Chinese or a base64 blob, where lm-eval's own ``math.exp`` raises ``OverflowError``)."""
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _argmax(values: list[float]) -> int:
    best = 0
    for i, v in enumerate(values):
        if v > values[best]:
            best = i
    return best


def task_metrics(kind: str, items: list[dict], requests, scores: list[tuple[float, bool]]) -> tuple[int, dict]:
    """-> (items scored, {metric: value}). ``requests`` and ``scores`` are parallel lists."""
    per_item: dict[int, list] = {}
    for q, s in zip(requests, scores):
        per_item.setdefault(q.item, []).append((q, s))
    done = sorted(per_item)
    if kind == "bpb":
        ll = sum(s[0] for i in done for _, s in per_item[i])
        tokens = sum(q.n_cont for i in done for q, _ in per_item[i])
        n_bytes = sum(len(items[i]["text"].encode("utf-8")) for i in done)
        words = sum(len(re.split(r"\s+", items[i]["text"])) for i in done)
        return len(done), {"bits_per_byte": -ll / n_bytes / math.log(2), "byte_perplexity": _exp(-ll / n_bytes),
                           "word_perplexity": _exp(-ll / words), "token_perplexity": _exp(-ll / tokens)}
    if kind == "cloze":
        lls = [per_item[i][0][1][0] for i in done]
        greedy = [per_item[i][0][1][1] for i in done]
        return len(done), {"acc": sum(greedy) / len(done), "perplexity": _exp(-sum(lls) / len(lls))}
    acc = acc_norm = 0
    for i in done:
        pairs = sorted(per_item[i], key=lambda p: p[0].choice)
        lls = [s[0] for _, s in pairs]
        lengths = [float(len(c)) for c in items[i]["choices"]]
        gold = items[i]["label"]
        acc += _argmax(lls) == gold
        acc_norm += _argmax([ll / n for ll, n in zip(lls, lengths)]) == gold
    return len(done), {"acc": acc / len(done), "acc_norm": acc_norm / len(done)}
