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

The requests are read as columns (item, choice, continuation length) and the scores as one array, so a task of a
million windows is summed without building a million requests.
"""
from __future__ import annotations

import math
import re

import numpy as np

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


def _columns(requests) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(item, choice, n_cont) of every request, as int64 arrays."""
    columns = getattr(requests, "columns", None)
    if columns is not None:
        return columns()
    rows = np.array([(q.item, q.choice, q.n_cont) for q in requests], dtype=np.int64).reshape(-1, 3)
    return rows[:, 0], rows[:, 1], rows[:, 2]


def _score_columns(scores) -> tuple[np.ndarray, np.ndarray]:
    """(log-likelihood float64, is_greedy bool) of every request."""
    array = getattr(scores, "array", None)
    if array is None:
        array = np.array([(float(a), float(bool(b))) for a, b in scores], dtype=np.float64).reshape(-1, 2)
    return array[:, 0], array[:, 1] > 0.5


def task_metrics(kind: str, items: list[dict], requests, scores) -> tuple[int, dict]:
    """-> (items scored, {metric: value}). ``requests`` and ``scores`` are parallel sequences (lists, or a
    ``RequestList`` and ``Scores``)."""
    item_ids, choices, n_conts = _columns(requests)
    lls, greedy = _score_columns(scores)
    if len(lls) != len(item_ids):
        raise ValueError(f"{len(item_ids)} requests but {len(lls)} scores")
    order = np.argsort(item_ids, kind="stable")  # by item, each item's requests in their order
    item_ids, choices, n_conts, lls, greedy = (a[order] for a in (item_ids, choices, n_conts, lls, greedy))
    done, starts = np.unique(item_ids, return_index=True)
    done, starts = done.tolist(), starts.tolist()
    if kind == "bpb":
        ll = sum(lls.tolist())  # left to right, item by item: the order the figures were always summed in
        tokens = int(n_conts.sum())
        n_bytes = sum(len(items[i]["text"].encode("utf-8")) for i in done)
        words = sum(len(re.split(r"\s+", items[i]["text"])) for i in done)
        return len(done), {"bits_per_byte": -ll / n_bytes / math.log(2), "byte_perplexity": _exp(-ll / n_bytes),
                           "word_perplexity": _exp(-ll / words), "token_perplexity": _exp(-ll / tokens)}
    if kind == "cloze":
        first = lls[starts].tolist()  # an item's first request (a cloze item has one)
        acc = sum(greedy[starts].tolist())
        return len(done), {"acc": acc / len(done), "perplexity": _exp(-sum(first) / len(first))}
    acc = acc_norm = 0
    ends = starts[1:] + [len(item_ids)]
    for i, a, b in zip(done, starts, ends):
        pairs = sorted(zip(choices[a:b].tolist(), lls[a:b].tolist()), key=lambda p: p[0])
        lls_i = [ll for _, ll in pairs]
        lengths = [float(len(c)) for c in items[i]["choices"]]
        gold = items[i]["label"]
        acc += _argmax(lls_i) == gold
        acc_norm += _argmax([ll / n for ll, n in zip(lls_i, lengths)]) == gold
    return len(done), {"acc": acc / len(done), "acc_norm": acc_norm / len(done)}
