"""Requests held compactly: a task's requests as a ``Sequence[Request]`` that keeps every token once, as int32, in
one array, and builds a ``Request`` when it is asked for. A document's rolling windows (``DocumentRequests``) are
slices of its tokens worked out from their index, so a long document (or a small ``stride``) costs 4 bytes per
token, not a list per window; a pair (``PairRequests``) keeps at most the last ``window`` tokens of its context
(all the model reads). ``pretrain.eval.requests`` builds them from a task's items."""
from __future__ import annotations

import bisect
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(slots=True)
class Request:
    tokens: list[int]
    n_cont: int
    item: int  # index of the item in its task
    choice: int = 0  # choice index (choice), window index (bpb)


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
