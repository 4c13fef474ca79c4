"""Token n-grams of one text: the characters of the most frequent n-gram and of repeated n-grams.

Gopher's repetition rules, as DataTrove computes them: ``top_ngrams_chars`` (the most frequent
n-gram, its length joined with spaces times its count) and ``dup_ngrams_chars`` (characters of
n-grams that repeat one seen earlier, in a left-to-right scan that jumps ``n`` tokens past each
repeat). Both number the n-grams with one hash table of distinct n-grams (``_classes``): equal
keys are compared character by character, so the result is exact (a collision only costs a
comparison). Two n-grams are equal when their tokens are, or, as DataTrove's repeated n-grams,
when their tokens glued together are (``a bc`` equals ``ab c``). Tokens are given as the code
points of the tokens glued together (``code``) and the cumulative token lengths (``cum``).
Plain Python references live in ``tests/ngram_reference.py``.
"""
from __future__ import annotations

import numba as nb
import numpy as np

BASE = np.uint64(0x9E3779B97F4A7C15)  # polynomial hash multiplier (odd: invertible modulo 2**64)
MIX = np.uint64(0xC2B2AE3D27D4EB4F)  # mixes a length or a token hash into a key


def code_points(toks: list[str]) -> np.ndarray:
    """The code points of the tokens glued together."""
    return np.frombuffer("".join(toks).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def top_ngrams_chars(toks, ns, cum: np.ndarray, min_count: int = 1, code: np.ndarray | None = None) -> list[int]:
    """For each n in ``ns``: characters covered by the most frequent n-gram (equal when their tokens
    are), its length joined with single spaces times its count; on ties the one that occurs first
    (as ``Counter.most_common``); 0 when it occurs fewer than ``min_count`` times. ``toks``: the
    tokens (only their number is read where ``code`` is given)."""
    ns = list(ns)
    if not len(toks):
        return [0] * len(ns)
    if code is None:
        code = code_points(toks)
    return _top_ngrams(code, np.ascontiguousarray(cum, dtype=np.int64), np.array(ns, dtype=np.int64),
                       min_count).tolist()


def dup_ngrams_chars(toks, ns, cum: np.ndarray, code: np.ndarray | None = None, glued: bool = True) -> dict[int, int]:
    """For each n in ``ns``: characters (without spaces) of n-grams equal to one seen earlier in
    DataTrove's scan (``find_all_duplicate``); ``glued``: n-grams are equal when their tokens glued
    together are (DataTrove's), else when their tokens are."""
    ns = list(ns)
    if not ns or not len(toks):
        return {n: 0 for n in ns}
    if code is None:
        code = code_points(toks)
    out = _dup_ngrams(code, np.ascontiguousarray(cum, dtype=np.int64), np.array(ns, dtype=np.int64), glued)
    return dict(zip(ns, out.tolist()))


@nb.njit(cache=True)
def _top_ngrams(code, cum, ns, min_count):
    out = np.zeros(len(ns), dtype=np.int64)
    ntok = len(cum) - 1
    th = _token_hashes(code, cum)
    for t in range(len(ns)):
        n = ns[t]
        m = ntok - n + 1
        if m <= 0:
            continue
        _, count, first = _classes(_token_keys(th, n, m), code, cum, n, False)
        best, pos = 0, 0
        for k in range(len(count)):  # classes in order of first occurrence: on ties the first
            if count[k] > best:
                best, pos = count[k], first[k]
        if best >= min_count:
            out[t] = (cum[pos + n] - cum[pos] + n - 1) * best
    return out


@nb.njit(cache=True)
def _dup_ngrams(code, cum, ns, glued):
    out = np.zeros(len(ns), dtype=np.int64)
    ntok = len(cum) - 1
    size = len(code) if glued else 0
    prefix = np.zeros(size + 1, dtype=np.uint64)  # prefix hashes of the glued text (glued n-grams)
    power = np.ones(size + 1, dtype=np.uint64)
    for k in range(size):
        prefix[k + 1] = prefix[k] * BASE + np.uint64(code[k])
        power[k + 1] = power[k] * BASE
    th = _token_hashes(code, cum) if not glued else np.zeros(0, dtype=np.uint64)
    for t in range(len(ns)):
        n = ns[t]
        m = ntok - n + 1
        if m <= 1:
            continue
        keys = _glued_keys(prefix, power, cum, n, m) if glued else _token_keys(th, n, m)
        cls, count, _ = _classes(keys, code, cum, n, glued)
        seen = np.zeros(len(count), dtype=np.bool_)
        total, free = 0, 0
        for p in range(m):
            c = cls[p]
            if p < free or count[c] < 2:  # jumped over, or never repeated
                continue
            if seen[c]:
                total += cum[p + n] - cum[p]
                free = p + n
            else:
                seen[c] = True
        out[t] = total
    return out


@nb.njit(cache=True)
def _classes(keys, code, cum, n, glued):
    """(class of each n-gram, count of each class, first position of each class): equal n-grams,
    equal classes, numbered in order of first occurrence; an open-addressing table of distinct
    n-grams keyed by ``keys``."""
    m = len(keys)
    cap = 4
    while cap < 2 * m:
        cap *= 2
    mask = cap - 1
    slot_key = np.zeros(cap, dtype=np.uint64)
    slot_first = np.full(cap, -1, dtype=np.int64)  # first position of the n-gram in this slot
    cls = np.empty(m, dtype=np.int64)
    count = np.zeros(m, dtype=np.int64)
    first = np.empty(m, dtype=np.int64)
    ncls = 0
    for i in range(m):
        h = keys[i]
        j = np.int64((h >> np.uint64(17)) & np.uint64(mask))
        while True:
            f = slot_first[j]
            if f < 0:
                slot_first[j] = i
                slot_key[j] = h
                cls[i] = ncls
                count[ncls] = 1
                first[ncls] = i
                ncls += 1
                break
            if slot_key[j] == h and _same_ngram(code, cum, f, i, n, glued):
                cls[i] = cls[f]
                count[cls[f]] += 1
                break
            j = (j + 1) & mask
    return cls, count[:ncls], first[:ncls]


@nb.njit(cache=True)
def _token_hashes(code, cum):
    """Each token's hash (of its characters and its length)."""
    ntok = len(cum) - 1
    th = np.empty(ntok, dtype=np.uint64)
    for i in range(ntok):
        h = np.uint64(len(code) + 1)
        for k in range(cum[i], cum[i + 1]):
            h = h * BASE + np.uint64(code[k])
        th[i] = h ^ (np.uint64(cum[i + 1] - cum[i]) * MIX)
    return th


@nb.njit(cache=True)
def _token_keys(th, n, m):
    """The key of each n-gram of tokens: its tokens' hashes combined in order."""
    keys = np.empty(m, dtype=np.uint64)
    for i in range(m):
        h = np.uint64(0)
        for k in range(n):
            h = h * MIX + th[i + k]
        keys[i] = h
    return keys


@nb.njit(cache=True)
def _glued_keys(prefix, power, cum, n, m):
    """The key of each glued n-gram: the polynomial hash of its characters, and its length."""
    keys = np.empty(m, dtype=np.uint64)
    for i in range(m):
        a, b = cum[i], cum[i + n]
        keys[i] = (prefix[b] - prefix[a] * power[b - a]) ^ (np.uint64(b - a) * MIX)
    return keys


@nb.njit(cache=True)
def _same_ngram(code, cum, f, i, n, glued) -> bool:
    """Whether the n-grams at ``f`` and ``i`` are equal (glued, or token by token)."""
    if glued:
        return _same_slice(code, cum[f], cum[f + n], cum[i], cum[i + n])
    for k in range(n):
        if not _same_slice(code, cum[f + k], cum[f + k + 1], cum[i + k], cum[i + k + 1]):
            return False
    return True


@nb.njit(cache=True)
def _same_slice(code, a, b, c, d) -> bool:
    if b - a != d - c:
        return False
    for k in range(b - a):
        if code[a + k] != code[c + k]:
            return False
    return True
