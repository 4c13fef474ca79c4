"""Scripts, styles, comments, SVG and templates cut out of a page before it is parsed: what makes
multi-megabyte pages (mostly inline JavaScript and JSON) cheap, and what the stage's size limit is applied to.

Both forms are used by the product: ``strip_utf8`` (one compiled scan over the UTF-8 bytes, what the stage
runs) gives up where a non-ASCII character could change the regular expression's verdict, and
``strip_html`` (the regular expression, its definition) takes over there and on ``str`` input.
"""
from __future__ import annotations

import re

import numba as nb
import numpy as np

from curate.extract.ascii import (BANG, CARRIAGE_RETURN, CASE_OFFSET, DASH, DIGIT_0, DIGIT_9, FILE_SEPARATOR, GT,
                                  LOWER_A, LOWER_Z, LT, SLASH, SPACE, TAB, UNDERSCORE, UPPER_A, UPPER_Z)

# "<script ...> ... </script>" (and style, svg, template) with the body matched as runs of non-"<" characters
# and "<" not starting the closing tag (linear in the page), and HTML comments.
_STRIP_RE = re.compile(r"<(script|style|svg|template)\b[^>]*>[^<]*(?:<(?!/\1\s*>)[^<]*)*</\1\s*>|<!--.*?-->",
                       re.S | re.I)


def strip_html(html: str) -> str:
    """The HTML without scripts, styles, comments, SVG, templates and noscript fallbacks."""
    return _STRIP_RE.sub(" ", html)


def strip_utf8(data, valid: bool = False) -> bytes | None:
    """``strip_html`` of a page given as UTF-8 bytes (``bytes`` or a uint8 array), done by one compiled scan
    over its "<" (``_strip_scan``): the same bytes as ``strip_html(data.decode()).encode()``. ``valid``: the
    caller knows the bytes are valid UTF-8 (``str.encode`` gave them, or Arrow validated the column). None
    when they are not, or when a "<" or "</" is followed by a non-ASCII character where the regular
    expression's Unicode rules could decide (``re.I`` folds "ſ" to "s" and "İ", "ı" to "i"; ``\\s`` and
    ``\\b`` know Unicode spaces and letters): the caller then takes the ``str`` path."""
    buf = data if isinstance(data, np.ndarray) else np.frombuffer(data, dtype=np.uint8)
    if not valid and not _utf8_valid(buf):
        return None
    out, size = _strip_scan(buf, np.flatnonzero(buf == LT))
    if size < 0:
        return None
    return out[:size].tobytes()


def utf8(html: str) -> bytes | None:
    """The page as UTF-8 bytes (what lexbor parses), or None when it holds lone surrogates (selectolax
    drops those when it encodes a ``str`` itself)."""
    try:
        return html.encode("utf-8")
    except UnicodeEncodeError:
        return None


@nb.njit(cache=True)
def _utf8_valid(buf):
    """Whether ``buf`` is UTF-8 that Python's strict decoder accepts (no overlong forms, no surrogates, at
    most U+10FFFF)."""
    n = buf.size
    i = 0
    while i < n:
        b = buf[i]
        if b < 0x80:
            i += 1
            continue
        if 0xC2 <= b <= 0xDF:
            k = 1
            lo, hi = 0x80, 0xBF
        elif 0xE0 <= b <= 0xEF:
            k = 2
            lo = 0xA0 if b == 0xE0 else 0x80
            hi = 0x9F if b == 0xED else 0xBF
        elif 0xF0 <= b <= 0xF4:
            k = 3
            lo = 0x90 if b == 0xF0 else 0x80
            hi = 0x8F if b == 0xF4 else 0xBF
        else:
            return False
        if i + k >= n:
            return False
        c = buf[i + 1]
        if c < lo or c > hi:
            return False
        for j in range(2, k + 1):
            c = buf[i + j]
            if c < 0x80 or c > 0xBF:
                return False
        i += k + 1
    return True


# the element names of _STRIP_RE, as lower-case ASCII bytes, in the order the alternation tries them
_STRIP_NAMES = np.array([list(b"script\0\0"), list(b"style\0\0\0"), list(b"svg\0\0\0\0\0"), list(b"template")],
                        dtype=np.uint8)
_STRIP_LENS = np.array([6, 5, 3, 8], dtype=np.int64)
_NO_MATCH = -1
_UNSURE = -2


@nb.njit(cache=True, inline="always")
def _lower(c):
    return c + CASE_OFFSET if UPPER_A <= c <= UPPER_Z else c


@nb.njit(cache=True, inline="always")
def _ascii_word(c):
    return (DIGIT_0 <= c <= DIGIT_9) or (UPPER_A <= c <= UPPER_Z) or (LOWER_A <= c <= LOWER_Z) or c == UNDERSCORE


@nb.njit(cache=True, inline="always")
def _ascii_space(c):
    # str.isspace() of the ASCII code points: \t \n \v \f \r, \x1c-\x1f and the space
    return (TAB <= c <= CARRIAGE_RETURN) or (FILE_SEPARATOR <= c <= SPACE)


@nb.njit(cache=True, inline="always")
def _name_at(buf, q, names, w, m):
    """Whether the ``m`` letters of ``names[w]`` stand at byte q (ASCII compared case-insensitively): 1 or 0;
    ``_UNSURE`` where a non-ASCII byte comes first (the regular expression's ``re.I`` folds some of those)."""
    n = buf.size
    for j in range(m):
        r = q + j
        if r >= n:
            return 0
        c = buf[r]
        if c >= 0x80:
            return _UNSURE
        if _lower(c) != names[w, j]:
            return 0
    return 1


@nb.njit(cache=True)
def _match_at(buf, lt, t, names, lens):
    """Where a match of ``_STRIP_RE`` that starts at the "<" ``lt[t]`` ends (``lt``: the positions of all
    "<"); ``_NO_MATCH``; or ``_UNSURE`` where a non-ASCII character could change the regular expression's
    verdict."""
    n = buf.size
    i = lt[t]
    for w in range(names.shape[0]):
        m = lens[w]
        at = _name_at(buf, i + 1, names, w, m)
        if at == _UNSURE:
            return _UNSURE
        if at == 0:
            continue
        q = i + 1 + m
        if q < n:
            if buf[q] >= 0x80:
                return _UNSURE
            if _ascii_word(buf[q]):
                continue  # no \b after the name
        # the opening tag ends at the first ">"
        while q < n and buf[q] != GT:
            q += 1
        if q >= n:
            return _NO_MATCH  # the name's first letter rules out a comment too
        # the first "</name\s*>" after it (name compared case-insensitively)
        u = t + 1
        while u < lt.size and lt[u] <= q:
            u += 1
        while u < lt.size:
            p = lt[u]
            u += 1
            if p + 1 < n and buf[p + 1] == SLASH:
                at = _name_at(buf, p + 2, names, w, m)
                if at == _UNSURE:
                    return _UNSURE
                if at == 1:
                    r = p + 2 + m
                    while r < n and _ascii_space(buf[r]):
                        r += 1
                    if r < n:
                        if buf[r] >= 0x80:
                            return _UNSURE
                        if buf[r] == GT:
                            return r + 1
        return _NO_MATCH
    # "<!--" ... "-->"
    if i + 3 < n and buf[i + 1] == BANG and buf[i + 2] == DASH and buf[i + 3] == DASH:
        q = i + 4
        while q + 2 < n:
            if buf[q] == DASH and buf[q + 1] == DASH and buf[q + 2] == GT:
                return q + 3
            q += 1
    return _NO_MATCH


@nb.njit(cache=True)
def _strip_scan(buf, lt):
    """``_STRIP_RE.sub(" ", ...)`` over UTF-8 bytes (``lt``: the positions of "<"): (output buffer, its
    length), length -1 when unsure. The text between matches is copied in slices."""
    n = buf.size
    out = np.empty(n, dtype=np.uint8)
    o = 0
    i = 0  # bytes before i are done
    t = 0
    while t < lt.size:
        p = lt[t]
        if p < i:  # inside the last match
            t += 1
            continue
        e = _match_at(buf, lt, t, _STRIP_NAMES, _STRIP_LENS)
        if e == _UNSURE:
            return out, -1
        if e >= 0:
            out[o:o + p - i] = buf[i:p]
            o += p - i
            out[o] = SPACE
            o += 1
            i = e
        t += 1
    out[o:o + n - i] = buf[i:n]
    o += n - i
    return out, o

