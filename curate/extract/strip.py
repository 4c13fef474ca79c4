"""Scripts, styles, comments, SVG and templates cut out of a page before it is parsed: what makes
multi-megabyte pages (mostly inline JavaScript and JSON) cheap, and what the stage's size limit is applied to.

Both forms are used by the product: ``strip_utf8`` (one compiled scan over the UTF-8 bytes, what the stage
runs) gives up where a non-ASCII character could change the regular expression's verdict, and ``strip_html``
(the same scan over a ``str``, with the regular expression's own Unicode rules) takes over there and on ``str``
input. ``strip_regex`` is the definition both give the output of: ``_STRIP_RE.sub(" ", html)``.

Cost: linear in the page. The regular expression alone is not: at every opening tag that is never closed
(``<template>`` repeated, ``<!--`` without ``-->``) it reads on to the end of the page before it gives up,
so a page of 20,000 such tags took minutes (0.2 MB of ``<template>``: 84 s). Both scans remember, per name,
where they last looked for a closing tag and what they found, and the next opening tag starts from there.
"""
from __future__ import annotations

import re

import numba as nb
import numpy as np

from curate.extract.ascii import (BANG, CARRIAGE_RETURN, CASE_OFFSET, DASH, DIGIT_0, DIGIT_9, FILE_SEPARATOR, GT,
                                  LOWER_A, LOWER_Z, LT, SLASH, SPACE, TAB, UNDERSCORE, UPPER_A, UPPER_Z)
from curate.extract.jit import NO_REFCOUNTS

# "<script ...> ... </script>" (and style, svg, template) with the body matched as runs of non-"<" characters
# and "<" not starting the closing tag (linear in the page), and HTML comments.
_STRIP_RE = re.compile(r"<(script|style|svg|template)\b[^>]*>[^<]*(?:<(?!/\1\s*>)[^<]*)*</\1\s*>|<!--.*?-->",
                       re.S | re.I)


def strip_regex(html: str) -> str:
    """The definition of ``strip_html``: the regular expression itself (quadratic on unclosed tags)."""
    return _STRIP_RE.sub(" ", html)


_START_RE = re.compile(r"<(script|style|svg|template)\b|<!--", re.I)
_SAME_NAME_RE = re.compile(r"([^\x00]*)\x00\1", re.I)  # the group's backreference rule, on its own
_SPACES_GT_RE = re.compile(r"\s*>")


def strip_html(html: str) -> str:
    """The HTML without scripts, styles, comments, SVG and templates: ``strip_regex(html)``, in linear time.

    At an opening tag ``<name`` (as the regular expression finds it, with its Unicode rules) the match runs
    to the first ">" and then to the first ``</name\\s*>`` after it, the name compared as the expression's
    backreference compares it; ``<!--`` runs to the first ``-->``. Where none follows, the tag stays and the
    scan goes on after its "<". Each search starts where the previous one of its kind left off when that one
    found nothing before this point, so no character is read more than a few times."""
    out: list[str] = []
    done = 0                 # characters before this are written (or cut)
    pos = 0
    n = len(html)
    gt = (n + 1, -1)         # (searched from, first ">" found there or -1: none up to the end)
    comment = (n + 1, -1)    # the same for "-->"
    closes: dict[str, tuple[int, int, int]] = {}  # name as written (folded when ASCII) -> (from, at, end)
    while True:
        m = _START_RE.search(html, pos)
        if m is None:
            break
        start = m.start()
        end = -1
        name = m.group(1)
        if name is None:  # "<!--"
            q = start + 4
            if not comment[0] <= q <= (comment[1] if comment[1] >= 0 else n):
                comment = (q, html.find("-->", q))
            if comment[1] >= 0:
                end = comment[1] + 3
        else:
            q = m.end()
            if not gt[0] <= q <= (gt[1] if gt[1] >= 0 else n):
                gt = (q, html.find(">", q))
            if gt[1] >= 0:
                end = _close_end(html, name, gt[1] + 1, closes)
        if end < 0:
            pos = start + 1
            continue
        out.append(html[done:start])
        out.append(" ")
        done = pos = end
    if not out:
        return html
    out.append(html[done:])
    return "".join(out)


def _close_end(html: str, name: str, q: int, closes: dict) -> int:
    """End of the first ``</name\\s*>`` at or after ``q`` (``name`` compared as ``_STRIP_RE``'s backreference
    compares it), or -1; ``closes`` remembers the last search per name."""
    key = name.lower() if name.isascii() else name
    n = len(html)
    last = closes.get(key)
    if last is not None and last[0] <= q and (last[1] < 0 or last[1] >= q):
        return last[2]
    c = q
    found = (-1, -1)
    while c < n:
        c = html.find("</", c)
        if c < 0:
            break
        k = c + 2 + len(name)
        if _SAME_NAME_RE.fullmatch(name + "\x00" + html[c + 2:k]):
            m = _SPACES_GT_RE.match(html, k)
            if m is not None:
                found = (c, m.end())
                break
        c += 2
    closes[key] = (q, found[0], found[1])
    return found[1]


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
    ranges, count = _strip_scan(buf, np.flatnonzero(buf == LT))
    if count < 0:
        return None
    if count > _JOIN_MAX:  # a crafted page of many matches: no Python object per match
        return _between(buf, ranges, count).tobytes()
    # the text between the matches, a space for each match, copied once (into the bytes object)
    view = memoryview(buf)
    cuts = ranges[:count].ravel().tolist()
    return b" ".join([view[a:b] for a, b in zip([0] + cuts[1::2], cuts[0::2] + [buf.size])])


_JOIN_MAX = 4096  # matches a page's stripping joins in Python (real pages have tens)


@nb.njit(cache=True)
def _between(buf, ranges, count):
    """The bytes of ``buf`` between the ``count`` ``ranges``, a space for each range."""
    cut = 0
    for k in range(count):
        cut += ranges[k, 1] - ranges[k, 0]
    out = np.empty(buf.size - cut + count, dtype=np.uint8)
    o = 0
    i = 0
    for k in range(count + 1):
        stop = ranges[k, 0] if k < count else buf.size
        for x in range(i, stop):
            out[o] = buf[x]
            o += 1
        if k < count:
            out[o] = SPACE
            o += 1
            i = ranges[k, 1]
    return out


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


# slots of _match_at's memory (one array per scan): where the last search for ">" / "-->" started and what it
# found (n: nothing up to the end); per name, where the last search for its closing tag started, where that
# tag's "<" is (n: none) and where the match ends
_GT_FROM, _GT_AT, _CMT_FROM, _CMT_AT, _CLOSE_FROM, _CLOSE_AT, _CLOSE_END = 0, 1, 2, 3, 4, 8, 12
_MEMO_SLOTS = 16


@nb.njit(**NO_REFCOUNTS)
def _match_at(buf, lt, t, names, lens, memo):
    """Where a match of ``_STRIP_RE`` that starts at the "<" ``lt[t]`` ends (``lt``: the positions of all
    "<"); ``_NO_MATCH``; or ``_UNSURE`` where a non-ASCII character could change the regular expression's
    verdict. ``memo`` (``_MEMO_SLOTS``, filled with n + 1 at first): the last searches, reused while the
    next one starts between where that one started and what it found (starts only move forward)."""
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
        if memo[_GT_FROM] <= q <= memo[_GT_AT]:
            q = memo[_GT_AT]
        else:
            memo[_GT_FROM] = q
            while q < n and buf[q] != GT:
                q += 1
            memo[_GT_AT] = q
        if q >= n:
            return _NO_MATCH  # the name's first letter rules out a comment too
        # the first "</name\s*>" after it (name compared case-insensitively)
        if memo[_CLOSE_FROM + w] <= q < memo[_CLOSE_AT + w]:
            return memo[_CLOSE_END + w]
        memo[_CLOSE_FROM + w] = q
        memo[_CLOSE_AT + w] = n
        memo[_CLOSE_END + w] = _NO_MATCH
        u = np.searchsorted(lt, q, side="right")
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
                            memo[_CLOSE_AT + w] = p
                            memo[_CLOSE_END + w] = r + 1
                            return r + 1
        return _NO_MATCH
    # "<!--" ... "-->"
    if i + 3 < n and buf[i + 1] == BANG and buf[i + 2] == DASH and buf[i + 3] == DASH:
        q = i + 4
        if memo[_CMT_FROM] <= q <= memo[_CMT_AT]:
            q = memo[_CMT_AT]
        else:
            memo[_CMT_FROM] = q
            while q + 2 < n and not (buf[q] == DASH and buf[q + 1] == DASH and buf[q + 2] == GT):
                q += 1
            if q + 2 >= n:
                q = n
            memo[_CMT_AT] = q
        if q < n:
            return q + 3
    return _NO_MATCH


@nb.njit(cache=True)
def _strip_scan(buf, lt):
    """The matches of ``_STRIP_RE`` in UTF-8 bytes (``lt``: the positions of "<"), in order: ([start, end)
    per match, their count); count -1 when unsure. ``_STRIP_RE.sub(" ", ...)`` is the bytes between them
    with a space for each."""
    ranges = np.empty((16, 2), dtype=np.int64)  # grown as matches come (a page has tens)
    count = 0
    memo = np.full(_MEMO_SLOTS, buf.size + 1, dtype=np.int64)
    i = 0  # bytes before i are done
    for t in range(lt.size):
        p = lt[t]
        if p < i:  # inside the last match
            continue
        e = _match_at(buf, lt, t, _STRIP_NAMES, _STRIP_LENS, memo)
        if e == _UNSURE:
            return ranges, -1
        if e >= 0:
            if count == ranges.shape[0]:
                grown = np.empty((2 * count, 2), dtype=np.int64)
                grown[:count] = ranges
                ranges = grown
            ranges[count, 0] = p
            ranges[count, 1] = e
            count += 1
            i = e
    return ranges, count
