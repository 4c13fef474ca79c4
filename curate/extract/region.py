"""The main region of a prose page: a readability-style rule on the block classifier's output.

Readability and trafilatura pick one element as the article and take text from inside it. The classifier
reads each block on its own, so on a news or blog page it can also keep a second piece of prose: a live
feed's expanded item in a sidebar, a teaser with its lead, a caption block under another story. On a prose
page (less than ``PROSE_LINKS`` of the kept characters inside links; ``blocks.link_lists`` reads it too), the
**main region** is the smallest element around the largest kept block that holds ``SHARE`` of the kept
characters; a kept block outside it is dropped unless the classifier is sure of it (``SURE``).

Chosen on the cross-validated block probabilities of both sets (WCXB's development split and Readability's
pages, three training seeds; docs/benchmarks.md): word F1 +0.002 on WCXB (articles +0.003, no page type
below trafilatura), +0.003 on Readability's pages (+0.009 on those in other languages). Elements are
numbered in document order (``dom_walk``: a child after its parent), so an element's descendants are the
numbers from it to its last descendant, and one pass from the last element back gives every element's
kept characters and last descendant.
"""
from __future__ import annotations

import numba as nb
import numpy as np

PROSE_LINKS = 0.2   # a page whose kept text has less than this share inside links reads as prose (an article)
SHARE = 0.9         # the main region holds at least this share of the kept characters
SURE = 0.9          # a kept block outside it stays when the classifier gives it at least this
NEXT_TO = 1         # blocks at most between a kept block and the article's for it to sit next to it (next_to)


@nb.njit(cache=True)
def _region(parent, owner, kept_chars, top, share):
    """(first, last) element number of the smallest element above block ``top``'s owner (or that owner)
    holding ``share`` of ``kept_chars`` (per block; their owners in ``owner``, the elements' parents in
    ``parent``, -1 at the root)."""
    n = parent.size
    acc = np.zeros(n)
    last = np.arange(n)
    for b in range(owner.size):
        acc[owner[b]] += kept_chars[b]
    for e in range(n - 1, 0, -1):
        p = parent[e]
        if p >= 0:
            acc[p] += acc[e]
            if last[e] > last[p]:
                last[p] = last[e]
    need = share * kept_chars.sum()
    e = owner[top]
    while acc[e] < need and parent[e] >= 0:
        e = parent[e]
    return e, last[e]


def main_region(texts: list[str], owner, parent, links, prob, threshold: float) -> np.ndarray:
    """``prob`` with the kept blocks outside the page's main region set to 0 (see the module's doc).
    ``owner``: each block's element number; ``parent``: each element's parent (``features.Blocks``);
    ``links``: per block, the share of its characters inside links (``features.link_columns``)."""
    prob = np.asarray(prob, dtype=np.float32)
    keep = prob >= threshold
    if not keep.any() or owner is None:
        return prob
    size = np.fromiter(map(len, texts), dtype=np.float64, count=len(texts))
    kept_chars = size * keep
    kept = float(kept_chars.sum())
    if not kept or float((kept_chars * np.asarray(links, dtype=np.float64)[:, 0]).sum()) >= PROSE_LINKS * kept:
        return prob
    owner = np.asarray(owner, dtype=np.int64)
    first, last = _region(np.asarray(parent, dtype=np.int64), owner, kept_chars, int(np.argmax(kept_chars)),
                          SHARE)
    drop = keep & ((owner < first) | (owner > last)) & (prob < SURE)
    if not drop.any():
        return prob
    prob = prob.copy()
    prob[drop] = 0.0
    return prob


def next_to(keep: np.ndarray, inside: np.ndarray) -> np.ndarray:
    """Per block: whether the nearest kept block before it or after it, in page order, is a kept block
    ``inside`` (the article's) with at most ``NEXT_TO`` blocks between them (a caption, a photo credit). So
    of the kept blocks outside the article, at most the nearest one on each side of a run of the article's
    kept blocks: the kept block beyond it has that one, not the article's, as its nearest."""
    n = keep.size
    idx = np.arange(n)
    prev = np.maximum.accumulate(np.concatenate([[-1], np.where(keep, idx, -1)[:-1]]))  # nearest kept before
    nxt = np.minimum.accumulate(np.concatenate([[n], np.where(keep, idx, n)[::-1][:-1]]))[::-1]  # ... after
    out = np.zeros(n, dtype=bool)
    ok = (prev >= 0) & (idx - prev <= NEXT_TO + 1)
    out[ok] |= inside[prev[ok]]
    ok = (nxt < n) & (nxt - idx <= NEXT_TO + 1)
    out[ok] |= inside[nxt[ok]]
    return out
