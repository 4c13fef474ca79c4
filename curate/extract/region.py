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


def main_region(texts: list[str], owner, parent, links, prob, threshold: float, size=None) -> np.ndarray:
    """``prob`` with the kept blocks outside the page's main region set to 0 (see the module's doc).
    ``owner``: each block's element number; ``parent``: each element's parent (``features.Blocks``);
    ``links``: per block, the share of its characters inside links (``features.link_columns``)."""
    prob = np.asarray(prob, dtype=np.float32)
    keep = prob >= threshold
    if not keep.any() or owner is None:
        return prob
    size = text_sizes(texts) if size is None else size
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


@nb.njit(cache=True)
def last_descendants(parent):
    """Per element (numbered in document order, ``parent`` -1 at the root): the number of its last descendant
    (itself when it has none). Its descendants are the numbers from it to that one."""
    n = parent.size
    last = np.arange(n)
    for e in range(n - 1, 0, -1):
        p = parent[e]
        if p >= 0 and last[e] > last[p]:
            last[p] = last[e]
    return last


ARTICLE_WORDS = 20  # words of kept text an article element must hold for what follows it to be read as "after"
_HEADINGS = frozenset(("h1", "h2", "h3", "h4", "h5", "h6"))
_LINKED = 0.9       # a heading with this share of its characters inside a link is a teaser's title
AFTER_SHARE = 3     # kept text after the article up to this many times the article's own: teasers, not a thread


def after_article(texts: list[str], tags: list[str], parents, links, article, prob, threshold: float,
                  words=None, size=None) -> np.ndarray:
    """``prob`` with what follows a page's ``article`` element dropped, when the page is prose (``PROSE_LINKS``)
    and its kept blocks inside ``article`` elements are one run (no kept block outside between them) holding
    ``ARTICLE_WORDS`` words or more: a kept block after that run and outside it (other stories' teasers,
    "more stories", a newsletter box) is dropped unless the classifier is sure of it (``SURE``); so is every
    kept block of a teaser card (an element after the article whose heading is a link: its title and its
    summary, however sure the classifier is), and a heading the kept text then ends with. Not where the kept
    text after the article is more than ``AFTER_SHARE`` times the article's: a thread of replies under a story
    (a forum's posts are content). ``main_region`` finds no region on such a page when the article is short:
    the teasers hold over a tenth of the kept text. ``parents``: the element above each block's owner
    (``Blocks.groups[:, 0]``); ``article``: per block, whether it lies inside an ``article`` element
    (``features.place_columns``); ``words``: a function counting a text's words in any script.
    Chosen on the cross-validated predictions of both sets (training seed 0; seed 1 as a check): WCXB +0.0004
    / +0.0002, Readability 0 / -0.0004 (one page whose gold keeps a reader's comment after the article), the
    third set unchanged. Without ``ARTICLE_WORDS`` an article element of two captions was read as the article
    (WCXB +0.0000); without ``AFTER_SHARE`` the shipped model's forum pages lost 0.004 (a story's replies)."""
    prob = np.asarray(prob, dtype=np.float32)
    keep = prob >= threshold
    art = np.asarray(article, dtype=bool)
    inside = keep & art
    if not inside.any():
        return prob
    a = np.flatnonzero(art)
    first, last = int(a[0]), int(a[-1])
    if (keep[first:last + 1] & ~art[first:last + 1]).any():
        return prob
    after = keep & ~art
    after[:last + 1] = False
    if not after.any():
        return prob
    size = text_sizes(texts) if size is None else size
    kept_chars = size * keep
    link = np.asarray(links, dtype=np.float64)[:, 0]
    if float((kept_chars * link).sum()) >= PROSE_LINKS * float(kept_chars.sum()):
        return prob
    if float(kept_chars[after].sum()) > AFTER_SHARE * float(kept_chars[inside].sum()):
        return prob  # a thread under a story (its replies), not teasers
    count = words or (lambda t: len(t.split()))
    n_words = 0.0
    for i in np.flatnonzero(inside).tolist():
        n_words += count(texts[i])
        if n_words >= ARTICLE_WORDS:
            break
    else:
        return prob
    heading = np.zeros(len(texts), dtype=bool)
    for i in np.flatnonzero(after).tolist():
        heading[i] = tags[i] in _HEADINGS
    drop = after & (prob < SURE)
    titles = heading & (link >= _LINKED)
    if titles.any():  # teaser cards: everything under the element that holds a linked title
        parents = np.asarray(parents)
        drop |= after & np.isin(parents, parents[titles])
    if not drop.any():
        return prob
    left = np.flatnonzero(keep & ~drop)  # headings of nothing: those the kept text now ends with
    k = left.size - 1
    while k >= 0 and heading[left[k]]:
        drop[left[k]] = True
        k -= 1
    prob = prob.copy()
    prob[drop] = 0.0
    return prob


def text_sizes(texts: list[str]) -> np.ndarray:
    """Characters of each text, float64 (the rules take it from ``blocks.page_text``, which counts once)."""
    return np.fromiter(map(len, texts), dtype=np.float64, count=len(texts))
