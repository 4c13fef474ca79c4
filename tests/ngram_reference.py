"""Plain n-gram references for the tests: what ``curate.text.ngrams``'s compiled engine must equal.

``ngram_stats`` numbers token n-grams exactly (no hashing), ``glued_ngram_ids`` numbers DataTrove's
glued n-grams; ``top_ngram_chars`` and ``dup_ngram_chars`` compute the two Gopher measures from them.
"""
from __future__ import annotations

import numpy as np


def ngram_stats(toks: list[str], ns: range, stop_early: bool = True):
    """For each n in ``ns`` (increasing, from 2): ``(n, gram, counts, first)`` where ``gram[i]``
    numbers the n-gram starting at token i (equal n-grams, equal numbers: exact, no hashing),
    ``counts[g]`` is how often n-gram g occurs and ``first[g]`` where it first occurs. With
    ``stop_early``, stops once no n-gram occurs twice (then no longer one can)."""
    size = len(toks)
    # a token's number: where it first occurs (< size)
    gram = np.fromiter(map({}.setdefault, toks, range(size)), dtype=np.int64, count=size)
    ids = gram
    for n in range(2, ns.stop):
        if n > size:
            return
        # an n-gram is an (n-1)-gram followed by a token: pair their numbers (< size * size), renumber
        gram = gram[:-1] * size + ids[n - 1:]
        _, first, gram, counts = np.unique(gram, return_index=True, return_inverse=True, return_counts=True)
        if n >= ns.start:
            yield n, gram, counts, first
        if stop_early and counts.max() < 2:
            return


def glued_ngram_ids(toks: list[str], n: int, cum: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """DataTrove's n-gram identity, ``"".join(toks[i:i + n])``, as (``gram``, ``counts``) like
    ``ngram_stats`` (equal glued strings, equal numbers)."""
    glued = "".join(toks)
    number: dict[str, int] = {}
    c = cum.tolist()
    gram = np.array([number.setdefault(glued[c[i]:c[i + n]], len(number)) for i in range(len(toks) - n + 1)],
                    dtype=np.int64)
    return gram, np.bincount(gram, minlength=1)


def top_ngram_chars(n: int, counts: np.ndarray, first: np.ndarray, cum: np.ndarray, min_count: int = 2) -> int:
    """Characters covered by the most frequent n-gram: its length joined with single spaces, times
    its count; on ties the one that occurs first (as ``Counter.most_common``); 0 when it occurs
    fewer than ``min_count`` times."""
    top = counts.max()
    if top < min_count:
        return 0
    tied = np.flatnonzero(counts == top)
    pos = int(first[tied].min())
    return int(cum[pos + n] - cum[pos] + n - 1) * int(top)


def dup_ngram_chars(n: int, gram: np.ndarray, counts: np.ndarray, cum: np.ndarray) -> int:
    """Characters (without spaces) of n-grams equal to an n-gram seen earlier in a left-to-right
    scan that jumps ``n`` tokens past each repeat (DataTrove's ``find_all_duplicate``). Only
    n-grams that occur twice or more can repeat, so only their positions are visited."""
    pos = np.flatnonzero(counts[gram] >= 2)
    if not len(pos):
        return 0
    chars = (cum[pos + n] - cum[pos]).tolist()
    seen: set[int] = set()
    total, free = 0, 0
    for p, g, c in zip(pos.tolist(), gram[pos].tolist(), chars):
        if p < free:  # jumped over
            continue
        if g in seen:
            total += c
            free = p + n
        else:
            seen.add(g)
    return total
