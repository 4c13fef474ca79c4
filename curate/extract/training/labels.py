"""The WCXB-style word F1, and block labels from gold main text (for training the block classifier).

**Word F1** (WCXB's definition): lower-cased ``\\w+`` tokens of the output and of the gold text, as
multisets; precision = overlap / output tokens, recall = overlap / gold tokens, F1 per page, then the mean
over pages. An empty output scores 0 (unless the gold is empty too: 1).

**Block labels.** A block's label is the share of its tokens that the gold text covers. Token *t* of the
page (all blocks' tokens in page order) is covered when a word 3-gram holding it (*t-2..t*, *t-1..t+1* or
*t..t+2*, across block edges) occurs in the gold text. A short block ("Home", "Platform") is therefore only
covered when it sits in the page in the same order as in the gold, not because the gold happens to use the
word somewhere. Pages whose gold has fewer than three tokens use single tokens.
"""
from __future__ import annotations

import re
from collections import Counter

import numpy as np

_WORD = re.compile(r"\w+")


def tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def word_prf(output: str, gold: str) -> tuple[float, float, float]:
    """(precision, recall, F1) of one page."""
    o, g = Counter(tokens(output)), Counter(tokens(gold))
    no, ng = sum(o.values()), sum(g.values())
    if ng == 0 and no == 0:
        return 1.0, 1.0, 1.0
    if ng == 0 or no == 0:
        return 0.0, 0.0, 0.0
    common = sum((o & g).values())
    p, r = common / no, common / ng
    return p, r, (2 * p * r / (p + r) if common else 0.0)


def word_f1(output: str, gold: str) -> float:
    return word_prf(output, gold)[2]


def block_labels(texts: list[str], gold: str) -> tuple[np.ndarray, np.ndarray]:
    """(label in [0, 1], token count) per block."""
    gt = tokens(gold)
    btoks = [tokens(t) for t in texts]
    counts = np.array([len(b) for b in btoks], dtype=np.float32)
    flat = [w for b in btoks for w in b]
    owner = np.repeat(np.arange(len(texts)), counts.astype(np.int64))
    if not flat:
        return np.zeros(len(texts), np.float32), counts
    if len(gt) < 3:
        gs = set(gt)
        covered = np.array([w in gs for w in flat], dtype=bool)
    else:
        grams = set(zip(gt, gt[1:], gt[2:]))
        n = len(flat)
        hit = np.zeros(max(n - 2, 0), dtype=bool)
        for i, g in enumerate(zip(flat, flat[1:], flat[2:])):
            if g in grams:
                hit[i] = True
        covered = np.zeros(n, dtype=bool)
        if n >= 3:
            covered[:n - 2] |= hit
            covered[1:n - 1] |= hit
            covered[2:] |= hit
        else:
            gs = set(gt)
            covered = np.array([w in gs for w in flat], dtype=bool)
    cov = np.bincount(owner, weights=covered.astype(np.float32), minlength=len(texts)).astype(np.float32)
    return cov / np.maximum(counts, 1), counts


_ENGLISH = {"the", "and", "of", "to", "a", "in", "is", "that", "it", "for", "with", "on", "as", "was", "this"}


def language_group(lang: str | None, gold: str) -> str:
    """The language group of a page with gold text but no page type (Mozilla Readability's test pages):
    ``en`` / ``other`` by its ``lang`` attribute when it has one; without one, ``lorem`` for the synthetic
    pages of Lorem ipsum, ``en`` when English function words are at least 8% of the gold's tokens (English
    prose: about 25%), else ``other``."""
    lang = (lang or "").strip().lower()
    if lang:
        return "en" if lang.startswith("en") else "other"
    t = tokens(gold)
    if "lorem" in t or "ipsum" in t:
        return "lorem"
    return "en" if sum(w in _ENGLISH for w in t) >= 0.08 * max(len(t), 1) else "other"
