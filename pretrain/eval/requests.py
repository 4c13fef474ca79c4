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

Requests are held compactly (``RequestList``: every token once, as int32, in one array; a ``Request`` is built
when it is asked for): a document's windows are slices of its tokens, worked out from their index, so a long
document (or a small ``stride``) costs 4 bytes per token, not a list per window; a pair keeps at most the last
``window`` tokens of its context (all the model reads). ``prepare_task`` reads a task's file and builds its
requests in one pass: an item the model cannot score is set aside as the file is read, named by file and line,
and a task's ``limit`` counts the items scored.
"""
from __future__ import annotations

import bisect
import random
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

FEWSHOT_SEED = 1234
FEWSHOT_DELIMITER = "\n\n"  # lm-eval's fewshot_delimiter
TARGET_DELIMITER = " "  # lm-eval's target_delimiter: between a multiple-choice context and each choice


@dataclass(slots=True)
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


# ------------------------------------------------------------------------------- requests, held compactly

def _np(a: array) -> np.ndarray:
    """A copy of an ``array`` as int64 (a copy: a view would keep the array from growing)."""
    return np.frombuffer(a, dtype=np.int32 if a.typecode == "i" else np.int64).astype(np.int64) if len(a) \
        else np.zeros(0, dtype=np.int64)


class RequestList(Sequence):
    """A task's requests (``Sequence[Request]``), each built when it is asked for. ``lengths()``: every request's
    ``len(tokens)``; ``columns()``: its item, choice (window for bpb) and ``n_cont``, as arrays, without building
    the requests."""

    def __len__(self) -> int:
        raise NotImplementedError

    def _get(self, i: int) -> Request:
        raise NotImplementedError

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._get(j) for j in range(*i.indices(len(self)))]
        n = len(self)
        i = int(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"request {i} of {n}")
        return self._get(i)

    def lengths(self) -> np.ndarray:
        raise NotImplementedError

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        raise NotImplementedError


class PairRequests(RequestList):
    """(context, continuation) requests: each item's context once (its last ``window`` tokens: a request reads
    at most ``window + 1 - len(continuation)`` of them), then each continuation; a request is the context's last
    tokens and its continuation, ``window + 1`` tokens at most (what the model reads of the whole pair)."""

    def __init__(self, window: int):
        self.window = window
        self._tok = array("i")
        self._ctx = array("q")  # per request: where its context ends in _tok
        self._ctx_len = array("i")
        self._cont = array("q")  # where its continuation starts
        self._cont_len = array("i")
        self._item = array("i")
        self._choice = array("i")

    def add(self, item: int, encoded: list[tuple[list[int], list[int]]]) -> None:
        last = None
        for c, (ctx, cont) in enumerate(encoded):
            if last is None or ctx != last[0]:  # an item's choices share their context: kept once
                tail = ctx[-self.window:]
                self._tok.extend(tail)
                last = (ctx, len(self._tok), len(tail))
            self._ctx.append(last[1])
            self._ctx_len.append(last[2])
            self._cont.append(len(self._tok))
            self._cont_len.append(len(cont))
            self._tok.extend(cont)
            self._item.append(item)
            self._choice.append(c)

    def __len__(self) -> int:
        return len(self._item)

    def _get(self, i: int) -> Request:
        n = self._cont_len[i]
        keep = min(self._ctx_len[i], self.window + 1 - n)
        end, start = self._ctx[i], self._cont[i]
        tokens = self._tok[end - keep:end].tolist() + self._tok[start:start + n].tolist()
        return Request(tokens, n, self._item[i], self._choice[i])

    def lengths(self) -> np.ndarray:
        n = _np(self._cont_len)
        return np.minimum(_np(self._ctx_len), self.window + 1 - n) + n

    def columns(self):
        return _np(self._item), _np(self._choice), _np(self._cont_len)


class DocumentRequests(RequestList):
    """A document's rolling windows (``rolling_windows``), worked out from their index: its tokens are kept once,
    after the prefix token, and each window is a slice of them (the first: the prefix and up to ``window``
    tokens; every other: ``window + 1`` tokens, predicting its last ones)."""

    def __init__(self, prefix_id: int, window: int, stride: int = 0):
        self.prefix_id, self.window = prefix_id, window
        context_len = 1 if stride <= 0 else max(1, window - min(stride, window) + 1)
        self.pred_len = window - context_len + 1
        self._tok = array("i")
        self._start = array("q")  # per document: where its prefix token is in _tok
        self._n = array("q")  # its tokens
        self._item = array("i")
        self._first = array("q")  # the index of its first request
        self._count = 0

    def n_windows(self, n_tokens: int) -> int:
        first = min(self.window, n_tokens)
        return 1 + -(-(n_tokens - first) // self.pred_len)

    def add(self, item: int, tokens) -> None:
        if not len(tokens):
            raise ValueError("a document of no token has no window")
        self._start.append(len(self._tok))
        self._tok.append(self.prefix_id)
        self._tok.extend(tokens)
        self._n.append(len(tokens))
        self._item.append(item)
        self._first.append(self._count)
        self._count += self.n_windows(len(tokens))

    def __len__(self) -> int:
        return self._count

    def _window(self, d: int, w: int) -> tuple[int, int, int]:
        """(start, end, n_cont) of window ``w`` of document ``d``: its tokens are ``_tok[start:end]``."""
        s, n_tok = self._start[d], self._n[d]
        first = min(self.window, n_tok)
        if w == 0:
            return s, s + 1 + first, first
        done = first + (w - 1) * self.pred_len
        n = min(n_tok - done, self.pred_len)
        end = done + n
        return s + 1 + max(0, end - self.window - 1), s + 1 + end, n

    def _get(self, i: int) -> Request:
        d = bisect.bisect_right(self._first, i) - 1
        w = i - self._first[d]
        start, end, n = self._window(d, w)
        return Request(self._tok[start:end].tolist(), n, self._item[d], w)

    def lengths(self) -> np.ndarray:
        out = np.full(self._count, self.window + 1, dtype=np.int64)  # every window but a document's first
        out[_np(self._first)] = 1 + np.minimum(_np(self._n), self.window)
        return out

    def columns(self):
        first, n_tok = _np(self._first), _np(self._n)
        counts = np.diff(np.append(first, self._count))
        items = np.repeat(_np(self._item), counts)
        choices = np.arange(self._count, dtype=np.int64) - np.repeat(first, counts)
        n_cont = np.full(self._count, self.pred_len, dtype=np.int64)
        head = np.minimum(n_tok, self.window)
        n_cont[first] = head
        last = first + counts - 1
        more = counts > 1
        n_cont[last[more]] = (n_tok - head - (counts - 2) * self.pred_len)[more]
        return items, choices, n_cont


def scored_items(requests) -> list[int]:
    """The indices of the items that have requests (the items scored), in order."""
    if isinstance(requests, RequestList):
        return np.unique(requests.columns()[0]).tolist()
    return sorted({q.item for q in requests})


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
        encoded = [encode_pair(encode, c, t, prefix_id) for c, t in item_pairs(kind, it, prefix)]
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
    from pretrain.eval.tasks import read_items

    kind = spec.kind
    store = DocumentRequests(prefix_id, window, spec.stride) if kind == "bpb" else PairRequests(window)
    kept = 0

    def check(item: dict) -> str | None:
        nonlocal kept
        if kind == "bpb":
            tokens = encode(item["text"])
            why = document_problem(tokens)
            if why is None:
                store.add(kept, tokens)
        else:
            encoded = [encode_pair(encode, c, t, prefix_id) for c, t in item_pairs(kind, item)]
            why = pair_problem(kind, encoded, window)
            if why is None and not spec.shots:
                store.add(kept, encoded)
        if why is None:
            kept += 1
        return why

    items = read_items(spec, max_problems, check=check)
    if spec.shots:
        store, problems = build_requests(kind, items, encode, prefix_id, window, shots=spec.shots)
        return items, store, problems
    return items, store, []
