"""How deep ``<div>`` / ``<span>`` tags nest, counted from the tags without parsing: lexbor's tree building
costs O(elements x depth) in C, where no signal reaches, so a page nested deeper than real pages go is sent
to a linear path before it is parsed."""
from __future__ import annotations

import numba as nb
import numpy as np

from curate.extract.ascii import CASE_OFFSET, LT, SLASH, UPPER_A, UPPER_Z
from curate.extract.chars import is_word as _is_word
from curate.extract.jit import NO_REFCOUNTS

_D, _I, _V = map(ord, "div")
_S, _P, _A, _N = map(ord, "span")
_UD, _UI, _UV = map(ord, "DIV")
_DOTTED_I, _DOTLESS_I, _LONG_S = 0x130, 0x131, 0x17F  # re.I folds these to "i", "i", "s"
_US = ord("S")
_LONG_S_LEAD = "\u017f".encode()[0]

# code point -> lower-case ASCII letter for the letters of "div" and "span" (re.I also folds U+0130 and
# U+0131 to "i", U+017F to "s")
_FOLD = np.arange(128, dtype=np.uint32)
_FOLD[UPPER_A:UPPER_Z + 1] += CASE_OFFSET


def _folded(cps: np.ndarray) -> np.ndarray:
    out = np.where(cps < 128, _FOLD[np.minimum(cps, 127)], cps)
    out[(out == _DOTTED_I) | (out == _DOTLESS_I)] = _I
    out[out == _LONG_S] = _S
    return out


def too_deep(html: str, limit: int) -> bool:
    """Whether ``<div>`` / ``<span>`` elements nest more than ``limit`` deep (counted from the tags, without
    parsing). lexbor's tree building costs O(elements x depth) in C, where no signal reaches; real pages nest
    10-40 deep. The tags are the matches of ``</?(?:div|span)\\b``
    (case-insensitive), found with numpy over the page's code points (faster than the regular expression)."""
    cps = np.frombuffer(html.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    lt = np.flatnonzero(cps == LT)
    if lt.size <= limit:
        return False
    cps = np.concatenate([cps, np.zeros(6, dtype=np.uint32)])
    # exact "<div", "<span", "<DIV" first: at most `limit` of them, and the page passes (a cheap bound)
    c = [cps[lt + k] for k in range(1, 6)]
    exact = (((c[0] == _D) & (c[1] == _I) & (c[2] == _V)) | ((c[0] == _UD) & (c[1] == _UI) & (c[2] == _UV))
             | ((c[0] == _S) & (c[1] == _P) & (c[2] == _A) & (c[3] == _N)))
    if int(exact.sum()) <= limit:
        return False
    closing = c[0] == SLASH
    f = [_folded(np.where(closing, c[k + 1], c[k])) for k in range(4)]
    after_div = np.where(closing, c[4], c[3])
    after_span = np.where(closing, cps[lt + 6], c[4])
    div = (f[0] == _D) & (f[1] == _I) & (f[2] == _V) & ~_is_word(after_div)
    span = (f[0] == _S) & (f[1] == _P) & (f[2] == _A) & (f[3] == _N) & ~_is_word(after_span)
    tags = div | span
    if int(tags.sum()) <= limit:
        return False
    step = np.where(closing[tags], -1, 1).astype(np.int64)
    return int(np.cumsum(step).max()) > limit


# the counts of ``too_deep_utf8`` for one page (the bytes object itself, and its counts), as the page-shape scan
# found them while it read the page (``shape.bound_shape``, which the stage runs first): asked about that same
# object, ``too_deep_utf8`` answers from them instead of reading the page again
_KNOWN: tuple = (None, ())


def remember_depth(data: bytes, n_lt: int, n_exact: int, n_tags: int, n_kept: int, deepest: int) -> None:
    """What ``too_deep_utf8`` counts on ``data``: "<", exact "<div" / "<DIV" / "<span", div / span tags, those
    not followed by a word character, the deepest they nest."""
    global _KNOWN
    _KNOWN = (data, (n_lt, n_exact, n_tags, n_kept, deepest))


def too_deep_utf8(data: bytes, limit: int) -> bool:
    """``too_deep`` of the page given as its UTF-8 bytes: the same tag matches, found by one compiled scan
    over the bytes (``_tag_scan``); only the character after each ``div`` / ``span`` goes through
    ``_is_word``. From ``remember_depth``'s counts when they are this page's."""
    known = _KNOWN
    if known[0] is data:
        return all(count > limit for count in known[1])
    n_lt, n_exact, m, closing, after = _tag_scan(np.frombuffer(data, dtype=np.uint8))
    if n_lt <= limit or n_exact <= limit or m <= limit:
        return False
    keep = ~_is_word(after[:m])
    if int(keep.sum()) <= limit:
        return False
    step = np.where(closing[:m][keep], -1, 1).astype(np.int64)
    return int(np.cumsum(step).max()) > limit


@nb.njit(cache=True, inline="always")
def _cp_at(buf, i):
    """(code point starting at byte i of valid UTF-8, next byte); past the end: (0, i), as the NUL padding
    of ``too_deep``."""
    n = buf.size
    if i >= n:
        return 0, i
    b0 = np.int64(buf[i])
    if b0 < 0x80:
        return b0, i + 1
    if b0 < 0xE0:
        return ((b0 & 0x1F) << 6) | (np.int64(buf[i + 1]) & 0x3F), i + 2
    if b0 < 0xF0:
        return ((b0 & 0x0F) << 12) | ((np.int64(buf[i + 1]) & 0x3F) << 6) | (np.int64(buf[i + 2]) & 0x3F), i + 3
    return (((b0 & 0x07) << 18) | ((np.int64(buf[i + 1]) & 0x3F) << 12) | ((np.int64(buf[i + 2]) & 0x3F) << 6)
            | (np.int64(buf[i + 3]) & 0x3F)), i + 4


@nb.njit(cache=True, inline="always")
def _fold1(cp):
    if UPPER_A <= cp <= UPPER_Z:
        return cp + CASE_OFFSET
    if cp == _DOTTED_I or cp == _DOTLESS_I:
        return _I
    if cp == _LONG_S:
        return _S
    return cp


@nb.njit(cache=True)
def count_lt(buf):
    """How many "<" the UTF-8 bytes ``buf`` hold."""
    c = 0
    for i in range(buf.size):
        c += buf[i] == LT
    return c


@nb.njit(cache=True)
def _tag_scan(buf):
    """One pass over UTF-8 bytes for ``too_deep``: the number of "<", of exact "<div" / "<DIV" / "<span",
    and the candidate tags ``</?(?:div|span)`` (letters folded as ``_folded`` does): how many, whether each
    closes, and the code point after its name (whether that one is a word character is decided outside)."""
    cap = count_lt(buf) + 1  # one candidate per "<" at most (arrays sized by the page's bytes cost more)
    closing = np.zeros(cap, dtype=np.bool_)
    after = np.zeros(cap, dtype=np.uint32)
    n_lt = 0
    n_exact = 0
    m = 0
    # eight bytes at a time: a word without a "<" is passed over whole (most are)
    n8 = buf.size // 8
    words = buf[:n8 * 8].view(np.uint64)
    for k in range(n8):
        v = words[k] ^ _LT8
        if (v - _ONES8) & ~v & _HIGH8 == 0:  # no byte of the word is "<" (no zero byte in v)
            continue
        for i in range(8 * k, 8 * k + 8):
            if buf[i] == LT:
                m, n_exact = _tag_at(buf, i, m, n_exact, closing, after)
                n_lt += 1
    for i in range(8 * n8, buf.size):
        if buf[i] == LT:
            m, n_exact = _tag_at(buf, i, m, n_exact, closing, after)
            n_lt += 1
    return n_lt, n_exact, m, closing, after


_ONES8 = np.uint64(0x0101010101010101)
_HIGH8 = np.uint64(0x8080808080808080)
_LT8 = np.uint64(LT) * _ONES8


@nb.njit(**NO_REFCOUNTS)
def _tag_at(buf, i, m, n_exact, closing, after):
    """``_tag_scan`` at the "<" at byte i: (candidates so far, exact tags so far), a candidate recorded in
    ``closing`` / ``after`` (called per "<": compiled without reference counts, ``jit.NO_REFCOUNTS``)."""
    # the first letter of a name that folds to "div" or "span": d, D, s, S or U+017F (lead byte 0xC5); most
    # tags start otherwise and are passed over without decoding
    b = buf[i + 1] if i + 1 < buf.size else 0
    if b == SLASH:
        b = buf[i + 2] if i + 2 < buf.size else 0
    if not (b == _D or b == _UD or b == _S or b == _US or b == _LONG_S_LEAD):
        return m, n_exact
    c0, j = _cp_at(buf, i + 1)
    c1, j = _cp_at(buf, j)
    c2, j = _cp_at(buf, j)
    c3, j = _cp_at(buf, j)
    c4, j = _cp_at(buf, j)
    if (c0 == _D and c1 == _I and c2 == _V) or (c0 == _UD and c1 == _UI and c2 == _UV) \
            or (c0 == _S and c1 == _P and c2 == _A and c3 == _N):
        n_exact += 1
    close = c0 == SLASH
    if close:
        c5, j = _cp_at(buf, j)
        f0, f1, f2, f3 = _fold1(c1), _fold1(c2), _fold1(c3), _fold1(c4)
        a_div, a_span = c4, c5
    else:
        f0, f1, f2, f3 = _fold1(c0), _fold1(c1), _fold1(c2), _fold1(c3)
        a_div, a_span = c3, c4
    if f0 == _D and f1 == _I and f2 == _V:
        closing[m] = close
        after[m] = a_div
        m += 1
    elif f0 == _S and f1 == _P and f2 == _A and f3 == _N:
        closing[m] = close
        after[m] = a_span
        m += 1
    return m, n_exact


def parsed_depth(html: bytes) -> int:
    """How deep the tree lexbor builds from ``html`` goes (the document node is 1): what the scans above and
    ``shape.bound_shape`` stand in for, measured (tests and ``benchmarks/shape_fuzz.py``; it parses the page)."""
    from selectolax.lexbor import LexborHTMLParser

    best, stack = 0, [(LexborHTMLParser(html).root, 1)]
    while stack:
        node, depth = stack.pop()
        best = max(best, depth)
        child = node.child
        while child is not None:
            stack.append((child, depth + 1))
            child = child.next
    return best
