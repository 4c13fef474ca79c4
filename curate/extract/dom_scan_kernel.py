"""The compiled walks of ``dom_scan``, each one numba pass that writes the blocks of ``dom_walk.walk`` as
arrays: ``walk_nodes`` over lexbor's nodes in memory, and ``scan_body`` over lexbor's serialization of a
page's body where the nodes' layout could not be checked (see ``dom_scan`` for what they read and when they
give up).

One file with the byte-level helpers both use: numba's cache keys a compiled function on its own file, so a helper
changed in another file would leave a stale cached kernel behind.

The helpers called per tag, attribute or text run take arrays: they are compiled without reference counts
(``jit.NO_REFCOUNTS``) and allocate nothing.
"""
from __future__ import annotations

import numba as nb
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from curate.extract.ascii import (AMPERSAND, BANG, CARRIAGE_RETURN, CASE_OFFSET, DASH, EQUALS, FILE_SEPARATOR, GT, LT,
                                  NEWLINE, QUESTION, QUOTE, SLASH, SPACE, TAB, UPPER_A, UPPER_Z)
from curate.extract.jit import NO_REFCOUNTS

OK = 0
GIVE_UP = 1
NEED_ROOM = 2  # more blocks or elements than the buffers hold: the caller grows them and runs again

# ``tags.HIDDEN_BIT``, the ancestor bit of hidden elements, written here: numba's cache would not see a change
# made in tags.py (``dom_scan`` checks at import that the two agree)
HIDDEN_BIT = 1 << 33

# what the tag table says of a tag, besides its category
FLAG_VOID = 1
FLAG_RAW = 2
FLAG_PLAINTEXT = 4


def _b(s: str) -> np.ndarray:
    return np.frombuffer(s.encode(), dtype=np.uint8).copy()


# attribute names the scan reads, and what ``tags.is_hidden`` looks for in a style
_CLASS, _ID, _HIDDEN, _STYLE, _ROLE = _b("class"), _b("id"), _b("hidden"), _b("style"), _b("role")
_NONE, _DISPLAY_NONE, _VISIBILITY_HIDDEN = _b("none"), _b("display:none"), _b("visibility:hidden")
_BODY = _b("body")
_SHORTEST_BODY = len("<body></body>")
# the entities the serializer writes (what follows the "&")
_LT_ENTITY, _GT_ENTITY, _AMP_ENTITY = _b("lt;"), _b("gt;"), _b("amp;")
_NBSP_ENTITY, _QUOT_ENTITY = _b("nbsp;"), _b("quot;")
_NBSP_LEAD, _NBSP_TRAIL = "\u00a0".encode()  # U+00A0 in UTF-8
_DOTTED_I_LEAD, _DOTTED_I_TRAIL = "\u0130".encode()  # U+0130: lower-cases to "i" and a combining dot
_KELVIN_0, _KELVIN_1, _KELVIN_2 = "\u212a".encode()  # U+212A: lower-cases to "k"
_LOWER_I, _LOWER_K = ord("i"), ord("k")
_OTHER = 0x80  # stands for a non-ASCII character: no class word holds it


@nb.njit(cache=True, inline="always")
def _is_space_at(buf, i, end):
    """(whether the character at byte i is white space for ``str.split``, its length in bytes)."""
    c = buf[i]
    if c < 0x80:
        return (TAB <= c <= CARRIAGE_RETURN) or (FILE_SEPARATOR <= c <= SPACE), 1
    if c < 0xE0:
        if i + 1 < end and c == 0xC2 and (buf[i + 1] == 0x85 or buf[i + 1] == 0xA0):
            return True, 2
        return False, 2
    if c < 0xF0:
        if i + 2 < end:
            c1 = buf[i + 1]
            c2 = buf[i + 2]
            if c == 0xE1 and c1 == 0x9A and c2 == 0x80:  # U+1680
                return True, 3
            if c == 0xE2 and c1 == 0x80 and (c2 <= 0x8A or c2 == 0xA8 or c2 == 0xA9 or c2 == 0xAF):
                return True, 3  # U+2000-U+200A, U+2028, U+2029, U+202F
            if c == 0xE2 and c1 == 0x81 and c2 == 0x9F:  # U+205F
                return True, 3
            if c == 0xE3 and c1 == 0x80 and c2 == 0x80:  # U+3000
                return True, 3
        return False, 3
    return False, 4


@nb.njit(cache=True, inline="always")
def _entity(buf, i, end, attr):
    """The byte an entity at byte i (an "&") stands for and its length; (0, 0) for U+00A0; (-1, 0) for an
    entity the serializer does not write."""
    if _starts(buf, i + 1, end, _LT_ENTITY):
        return LT, 4
    if _starts(buf, i + 1, end, _GT_ENTITY):
        return GT, 4
    if _starts(buf, i + 1, end, _AMP_ENTITY):
        return AMPERSAND, 5
    if _starts(buf, i + 1, end, _NBSP_ENTITY):
        return 0, 6
    if attr and _starts(buf, i + 1, end, _QUOT_ENTITY):
        return QUOTE, 6
    return -1, 0


@nb.njit(cache=True, inline="always")
def _starts(buf, s, end, pat):
    """Whether ``pat`` stands at byte s, within buf[:end]."""
    if s + pat.size > end:
        return False
    for j in range(pat.size):
        if buf[s + j] != pat[j]:
            return False
    return True


@nb.njit(**NO_REFCOUNTS)
def _unescape(buf, s, e, out):
    """The attribute value buf[s:e] with its entities replaced, into ``out``: its length, or -1."""
    o = 0
    i = s
    while i < e:
        c = buf[i]
        if c == AMPERSAND:
            v, k = _entity(buf, i, e, True)
            if k == 0:
                return -1
            if v == 0:
                out[o] = _NBSP_LEAD
                out[o + 1] = _NBSP_TRAIL
                o += 2
            else:
                out[o] = v
                o += 1
            i += k
        else:
            out[o] = c
            o += 1
            i += 1
    return o


@nb.njit(**NO_REFCOUNTS)
def _contains(a, n, pat):
    m = pat.size
    for i in range(n - m + 1):
        j = 0
        while j < m and a[i + j] == pat[j]:
            j += 1
        if j == m:
            return True
    return False


@nb.njit(**NO_REFCOUNTS)
def _class_bits(v, n, wbytes, wlen, wbit, pair_first, scratch, cm):
    """OR into ``cm`` the class words that ``_CLASS_WORD_RE.findall(value.lower())`` finds in the unescaped
    value v[:n]: lower-case ASCII; U+0130 lower-cases to "i" and a combining dot, U+212A to "k"; any other
    non-ASCII character to one that no class word holds."""
    m = 0
    i = 0
    while i < n:
        c = v[i]
        if c < 0x80:
            scratch[m] = c + CASE_OFFSET if UPPER_A <= c <= UPPER_Z else c
            m += 1
            i += 1
            continue
        k = 2 if c < 0xE0 else (3 if c < 0xF0 else 4)
        if c == _DOTTED_I_LEAD and i + 1 < n and v[i + 1] == _DOTTED_I_TRAIL:
            scratch[m] = _LOWER_I
            scratch[m + 1] = _OTHER
            m += 2
        elif c == _KELVIN_0 and i + 2 < n and v[i + 1] == _KELVIN_1 and v[i + 2] == _KELVIN_2:
            scratch[m] = _LOWER_K
            m += 1
        else:
            scratch[m] = _OTHER
            m += 1
        i += k
    p = 0
    while p + 1 < m:
        key = np.int64(scratch[p]) * 256 + scratch[p + 1]
        lo = pair_first[key]
        hi = pair_first[key + 1]
        if lo == hi:  # no class word starts with these two bytes
            p += 1
            continue
        hit = 0
        for w in range(lo, hi):
            L = wlen[w]
            if p + L > m:
                continue
            j = 2
            while j < L and scratch[p + j] == wbytes[w, j]:
                j += 1
            if j == L:
                b = wbit[w]
                cm[b >> 6] |= np.uint64(1) << np.uint64(b & 63)
                hit = L
                break
        p += hit if hit else 1


@nb.njit(**NO_REFCOUNTS)
def _equals(buf, a, n, pat):
    """Whether buf[a:a+n] is ``pat``."""
    if n != pat.size:
        return False
    for j in range(n):
        if buf[a + j] != pat[j]:
            return False
    return True


@nb.njit(**NO_REFCOUNTS)
def _same(buf, a, b, n):
    for j in range(n):
        if buf[a + j] != buf[b + j]:
            return False
    return True


@nb.njit(**NO_REFCOUNTS)
def _lookup(buf, s, n, k1, k2, klen):
    """Index of the tag name buf[s:s+n] in the table, or -1."""
    if n > 16:
        return -1
    a = np.uint64(0)
    b = np.uint64(0)
    for j in range(n):
        if j < 8:
            a |= np.uint64(buf[s + j]) << np.uint64(8 * j)
        else:
            b |= np.uint64(buf[s + j]) << np.uint64(8 * (j - 8))
    i = np.searchsorted(k1, a)
    while i < k1.size and k1[i] == a:
        if k2[i] == b and klen[i] == n:
            return i
        i += 1
    return -1


# columns of the block table and of the owner stack
B_CS, B_CE, B_LINK, B_EL, B_OWN, B_ANC, B_DEPTH, B_TAG = range(8)   # blk (int64); bbits: near words, any words
E_PARENT, E_CHARS, E_LINK = range(3)                               # els (int64)
O_EI, O_OWN, O_ANC, O_DEPTH, O_TAG = range(5)                      # own (int64); obits: near, any, own class


@nb.njit(**NO_REFCOUNTS)
def _end_block(out, o, cp, bs, cs, nonws, pre, link, k, blk, bbits, els, own, obits, ot, extra_anc, extra_near):
    """The text written since the last boundary (bytes bs..o, code points cs..cp) ends: it becomes block k
    of the current owner ``own[ot]`` unless it is blank (``walk``'s ``_flush``), and the inline elements'
    class words in ``extra_near`` are cleared. Returns (blocks, o, cp)."""
    if pre:  # strip("\n") at the end (the start was stripped as it came)
        while o > bs and out[o - 1] == NEWLINE:
            o -= 1
            cp -= 1
    nw = extra_near.size
    if not nonws or cp == cs:
        extra_near[:] = 0
        return k, bs, cs
    n = cp - cs
    lk = link if link < n else n
    ei = own[ot, O_EI]
    blk[k, B_CS] = cs
    blk[k, B_CE] = cp
    blk[k, B_LINK] = lk
    blk[k, B_EL] = ei
    blk[k, B_OWN] = own[ot, O_OWN]
    blk[k, B_ANC] = own[ot, O_ANC] | extra_anc
    blk[k, B_DEPTH] = own[ot, O_DEPTH]
    blk[k, B_TAG] = own[ot, O_TAG]
    for q in range(nw):
        bbits[k, q] = obits[ot, q] | extra_near[q]
        bbits[k, nw + q] = obits[ot, nw + q] | extra_near[q]
    els[ei, E_CHARS] += n
    els[ei, E_LINK] += lk
    extra_near[:] = 0
    return k + 1, o, cp


@nb.njit(**NO_REFCOUNTS)
def _text_run(buf, i, j, raw, out, o, cp, cs, link, in_link, pending, nonws, pre):
    """Append the text buf[i:j] (entities decoded unless ``raw``; when not ``raw``, up to the first "<" before
    j) to the block being written (code points from cs): white space collapsed as ``" ".join(raw.split())``
    does, or kept in a ``pre`` block (its leading newlines stripped). ``pending``: what goes before the next
    character that is not white space (0: nothing, 1: a space, 2: a newline, after a ``br``). Returns (ok, o,
    cp, link, pending, nonws, where it stopped); ok is False at an entity the serializer does not write."""
    k = i
    while k < j:
        c = np.int64(buf[k])
        if c == LT and not raw:
            break
        s0 = k
        if c == AMPERSAND and not raw:
            v, L = _entity(buf, k, j, False)
            if L == 0:
                return False, o, cp, link, pending, nonws, k
            k += L
            if v == 0:  # U+00A0: white space for str.split
                w = True
                m = 2
                s0 = -1
            else:
                c = v
                w = False
                m = 1
        elif c < 0x80:
            w = (TAB <= c <= CARRIAGE_RETURN) or (FILE_SEPARATOR <= c <= SPACE)
            m = 1
            k += 1
        else:
            w, m = _is_space_at(buf, k, j)
            k += m
        if in_link:
            link += 1
        if pre:
            if cp == cs and c == NEWLINE:
                continue  # strip("\n") at the start
            nonws = nonws or not w
        elif w:
            if pending == 0 and cp > cs:
                pending = 1
            continue
        else:
            if pending:
                out[o] = SPACE if pending == 1 else NEWLINE
                o += 1
                cp += 1
                pending = 0
            nonws = True
        if m == 1:
            out[o] = c
        elif s0 < 0:
            out[o] = _NBSP_LEAD
            out[o + 1] = _NBSP_TRAIL
        else:
            for q in range(m):
                out[o + q] = buf[s0 + q]
        o += m
        cp += 1
    return True, o, cp, link, pending, nonws, k


@nb.njit(**NO_REFCOUNTS)
def _style_hides(value, m, scratch) -> bool:
    """Whether the style value[:m] hides its element as ``tags.is_hidden`` reads it: ``display:none`` or
    ``visibility:hidden`` once spaces are out and ASCII is lower-cased."""
    if not (_contains(value, m, _NONE) or _contains(value, m, _HIDDEN)):
        return False
    r = 0
    for q in range(m):
        ch = value[q]
        if ch != SPACE:
            scratch[r] = ch + CASE_OFFSET if UPPER_A <= ch <= UPPER_Z else ch
            r += 1
    return _contains(scratch, r, _DISPLAY_NONE) or _contains(scratch, r, _VISIBILITY_HIDDEN)


@nb.njit(**NO_REFCOUNTS)
def _add_role(value, m, rbytes, rlen, rbits, cm) -> None:
    """OR into ``cm`` the bits of the ARIA role value[:m] (an exact match)."""
    for rr in range(rlen.size):
        if rlen[rr] == m:
            q = 0
            while q < m and value[q] == rbytes[rr, q]:
                q += 1
            if q == m:
                for w in range(cm.size):
                    cm[w] |= rbits[rr, w]


@nb.njit(**NO_REFCOUNTS)
def _push_owner(own, obits, ot, ei, own_index, anc, t, cm, cls_any) -> None:
    """Element ``ei`` (tag row t) becomes the block owner above ``own[ot]``: its ancestor bits ``anc``, its
    near class words its own and its owner's own, its any class words those above and its own."""
    nw = cm.size
    own[ot + 1, O_EI] = ei
    own[ot + 1, O_OWN] = own_index
    own[ot + 1, O_ANC] = anc
    own[ot + 1, O_DEPTH] = own[ot, O_DEPTH] + 1
    own[ot + 1, O_TAG] = t
    for q in range(nw):
        obits[ot + 1, q] = cm[q] | obits[ot, 2 * nw + q]
        obits[ot + 1, nw + q] = cls_any[q] | cm[q]
        obits[ot + 1, 2 * nw + q] = cm[q]


@nb.njit(**NO_REFCOUNTS)
def _add_to_parents(els, ne) -> None:
    """Each element's chars and link chars counted into its ancestors' (children come after their parent)."""
    for e in range(ne - 1, 0, -1):
        p = els[e, E_PARENT]
        els[p, E_CHARS] += els[e, E_CHARS]
        els[p, E_LINK] += els[e, E_LINK]


@nb.njit(cache=True)
def _owner_stack(els, info, body_tag, depth, nw):
    """The stack of block owners, with the body at 0 (element 0 in ``els``): (own, obits)."""
    els[0, E_PARENT] = -1
    els[0, E_CHARS] = 0
    els[0, E_LINK] = 0
    own = np.zeros((depth, 5), dtype=np.int64)
    obits = np.zeros((depth, 3 * nw), dtype=np.uint64)
    own[0, O_OWN] = info[body_tag, 3]
    own[0, O_TAG] = body_tag
    return own, obits


@nb.njit(cache=True, inline="always")
def _line_break(out, o, cp, cs, pending, pre):
    """A ``br`` in the block being written: a newline in a ``pre`` block (none before its first character),
    else one before the block's next text. Returns (o, cp, pending)."""
    if pre:
        if cp > cs:
            out[o] = NEWLINE
            o += 1
            cp += 1
    elif cp > cs:
        pending = 2
    return o, cp, pending


# One function: the scan's state (open elements, block owners, the block being written) lives in its locals;
# split into calls, that state would cross a function boundary per tag of the page.
@nb.njit(cache=True)
def scan_body(buf, out, blk, bbits, els, scratch, scratch2, tables, max_depth):
    """The scan (see ``dom_scan``'s doc) of the serialized body ``buf`` with the tag and class-word tables
    ``tables`` (``dom_scan.TABLES``). Writes the blocks' texts into ``out``, the block table into ``blk`` /
    ``bbits`` and the elements into ``els``, and returns (OK, GIVE_UP or NEED_ROOM, bytes of text, blocks,
    elements)."""
    (k1, k2, klen, info, default, wbytes, wlen, wbit, pair_first, rbytes, rlen, rbits, body_tag, pre_tag,
     widget) = tables
    n = buf.size
    NW = rbits.shape[1]
    nb_ = 0
    ne = 1
    D = max_depth + 2
    own, obits = _owner_stack(els, info, body_tag, D, NW)
    ot = 0
    # open elements: the state to restore when they end, and where their name is
    f_anc = np.empty(D, dtype=np.int64)
    f_any = np.zeros((D, NW), dtype=np.uint64)
    f_link = np.empty(D, dtype=np.bool_)
    f_block = np.empty(D, dtype=np.bool_)
    f_ns = np.empty(D, dtype=np.int64)
    f_nl = np.empty(D, dtype=np.int64)
    sp = 0
    skip_at = -1  # the open elements from this depth on are skipped (hidden or a skipped tag)
    # the walk's state
    anc = 0
    cls_any = np.zeros(NW, dtype=np.uint64)
    in_link = False
    extra_anc = 0
    extra_near = np.zeros(NW, dtype=np.uint64)
    link = 0
    has_parts = False
    # the block being written: bytes from bs, code points from cs; pending space or newline; any non-space character
    o = 0
    cp = 0
    bs = 0
    cs = 0
    pending = 0
    nonws = False
    cm = np.zeros(NW, dtype=np.uint64)
    # "<body" and its attributes (the body's own class is not read, as in ``walk``)
    if n < _SHORTEST_BODY or buf[0] != LT or buf[1] != _BODY[0]:
        return GIVE_UP, 0, 0, 0
    i = 0
    while i < n and buf[i] != GT:
        i += 1
    i += 1
    status = GIVE_UP
    while i < n:
        c = buf[i]
        if c != LT:  # a run of text up to the next "<"
            if skip_at < 0:
                has_parts = True
                ok, o, cp, link, pending, nonws, j = _text_run(buf, i, n, False, out, o, cp, cs, link, in_link,
                                                               pending, nonws, own[ot, O_TAG] == pre_tag)
                if not ok:
                    return GIVE_UP, 0, 0, 0
            else:
                j = i
                while j < n and buf[j] != LT:
                    j += 1
            i = j
            continue
        # a tag, a comment or a processing instruction (each writes at most one block and one element)
        if i + 1 >= n:
            break
        if nb_ + 2 >= blk.shape[0] or ne + 2 >= els.shape[0]:
            return NEED_ROOM, 0, nb_, ne
        c1 = buf[i + 1]
        if c1 == BANG:  # "<!--" ... "-->"
            if not (i + 3 < n and buf[i + 2] == DASH and buf[i + 3] == DASH):
                break
            j = i + 4
            while j + 2 < n and not (buf[j] == DASH and buf[j + 1] == DASH and buf[j + 2] == GT):
                j += 1
            if j + 2 >= n:
                break
            i = j + 3
            continue
        if c1 == QUESTION:  # "<?" ... ">"
            j = i + 2
            while j < n and buf[j] != GT:
                j += 1
            i = j + 1
            continue
        if c1 == SLASH:  # an end tag: it closes the innermost open element
            ns = i + 2
            j = ns
            while j < n and buf[j] != GT:
                j += 1
            nl = j - ns
            i = j + 1
            if sp == 0:
                if _equals(buf, ns, nl, _BODY):
                    status = OK if i == n else GIVE_UP
                break
            sp -= 1
            if f_nl[sp] != nl or not _same(buf, f_ns[sp], ns, nl):
                break
            if skip_at >= 0:
                if sp == skip_at:
                    skip_at = -1
                continue
            if f_block[sp]:
                if has_parts:  # the block of this element (as ``walk`` when it leaves a block element)
                    nb_, o, cp = _end_block(out, o, cp, bs, cs, nonws, own[ot, O_TAG] == pre_tag, link, nb_, blk,
                                            bbits, els, own, obits, ot, extra_anc, extra_near)
                    bs, cs, pending, nonws, has_parts, link, extra_anc = o, cp, 0, False, False, 0, 0
                ot -= 1
            anc = f_anc[sp]
            for q in range(NW):
                cls_any[q] = f_any[sp, q]
            in_link = f_link[sp]
            continue
        # a start tag: its name, then name="value" pairs
        ns = i + 1
        j = ns
        while j < n and buf[j] != SPACE and buf[j] != GT:
            j += 1
        nl = j - ns
        t = _lookup(buf, ns, nl, k1, k2, klen)
        if t >= 0:
            cat = info[t, 0]
            bit = info[t, 1]
            is_a = info[t, 2] != 0
            own_index = info[t, 3]
            flags = info[t, 4]
        else:
            cat = default[0]
            bit = default[1]
            is_a = default[2] != 0
            own_index = default[3]
            flags = 0
        if flags & FLAG_PLAINTEXT:  # plaintext: its text may hold its own end tag
            break
        cm[:] = 0
        hidden = False
        while j < n and buf[j] == SPACE:
            a0 = j + 1  # the first character of a name is a name character even if it is "="
            e = a0 + 1
            while e < n and buf[e] != EQUALS:
                e += 1
            if e + 1 >= n or buf[e + 1] != QUOTE:
                break
            v0 = e + 2
            v1 = v0
            while v1 < n and buf[v1] != QUOTE:
                v1 += 1
            if v1 >= n:
                break
            al = e - a0
            if skip_at < 0 and cat < 3:
                if _equals(buf, a0, al, _CLASS) or _equals(buf, a0, al, _ID):
                    m = _unescape(buf, v0, v1, scratch2)
                    if m < 0:
                        return GIVE_UP, 0, 0, 0
                    _class_bits(scratch2, m, wbytes, wlen, wbit, pair_first, scratch, cm)
                elif _equals(buf, a0, al, _HIDDEN):
                    hidden = True
                elif _equals(buf, a0, al, _STYLE):
                    m = _unescape(buf, v0, v1, scratch2)
                    if m < 0:
                        return GIVE_UP, 0, 0, 0
                    hidden = hidden or _style_hides(scratch2, m, scratch)
                elif _equals(buf, a0, al, _ROLE):
                    m = _unescape(buf, v0, v1, scratch2)
                    if m < 0:
                        return GIVE_UP, 0, 0, 0
                    _add_role(scratch2, m, rbytes, rlen, rbits, cm)
            j = v1 + 1
        if j >= n or buf[j] != GT:
            break
        i = j + 1
        void = (flags & FLAG_VOID) != 0
        raw_end = i
        if flags & FLAG_RAW:  # raw text up to "</name>"
            raw_end = i
            while raw_end + nl + 2 < n:
                if buf[raw_end] == LT and buf[raw_end + 1] == SLASH and buf[raw_end + nl + 2] == GT \
                        and _same(buf, raw_end + 2, ns, nl):
                    break
                raw_end += 1
            if raw_end + nl + 2 >= n:
                break
        if skip_at >= 0:  # inside a skipped element: only the nesting counts
            if not void:
                if sp >= D - 1:
                    break
                f_ns[sp] = ns
                f_nl[sp] = nl
                sp += 1
                i = raw_end
            continue
        if hidden:  # inside a tab or accordion widget: read like the rest, marked (as ``walk`` does)
            for q in range(NW):
                if (cm[q] | cls_any[q]) & widget[q]:
                    hidden = False
            if not hidden:
                bit |= HIDDEN_BIT
        if cat >= 3 or hidden:
            if cat == 4 and not hidden:  # br: a line break in the block
                has_parts = True
                o, cp, pending = _line_break(out, o, cp, cs, pending, own[ot, O_TAG] == pre_tag)
            if not void:
                if sp >= D - 1:
                    break
                f_ns[sp] = ns
                f_nl[sp] = nl
                skip_at = sp
                sp += 1
                i = raw_end
            continue
        if sp + 1 > max_depth:
            break  # deeper than ``walk`` reads element by element
        if cat == 1 and has_parts:  # a block starts: the text before it is a block of its own
            nb_, o, cp = _end_block(out, o, cp, bs, cs, nonws, own[ot, O_TAG] == pre_tag, link, nb_, blk, bbits,
                                    els, own, obits, ot, extra_anc, extra_near)
            bs, cs, pending, nonws, has_parts, link, extra_anc = o, cp, 0, False, False, 0, 0
        if cat == 1:
            els[ne, E_PARENT] = own[ot, O_EI]
            els[ne, E_CHARS] = 0
            els[ne, E_LINK] = 0
            if not void:  # a new block owner
                _push_owner(own, obits, ot, ne, own_index, anc | bit, t, cm, cls_any)
                ot += 1
            ne += 1
        else:
            for q in range(NW):
                extra_near[q] |= cm[q]
            extra_anc |= bit
        if void:
            continue
        f_anc[sp] = anc
        for q in range(NW):
            f_any[sp, q] = cls_any[q]
            cls_any[q] |= cm[q]
        f_link[sp] = in_link
        f_block[sp] = cat == 1
        f_ns[sp] = ns
        f_nl[sp] = nl
        sp += 1
        anc |= bit
        in_link = in_link or is_a
        if flags & FLAG_RAW and raw_end > i:  # the element's text, as it is
            has_parts = True
            _, o, cp, link, pending, nonws, _ = _text_run(buf, i, raw_end, True, out, o, cp, cs, link, in_link,
                                                          pending, nonws, own[ot, O_TAG] == pre_tag)
            i = raw_end
    if status != OK:
        return GIVE_UP, 0, 0, 0
    if has_parts:  # the text after the last block: a block of the body
        nb_, o, cp = _end_block(out, o, cp, bs, cs, nonws, False, link, nb_, blk, bbits, els, own, obits, 0,
                                extra_anc, extra_near)
    _add_to_parents(els, ne)
    return OK, o, nb_, ne


# ------------------------------------------------------------------------------------------ lexbor's nodes
# The same walk over lexbor's tree in memory: the nodes' fields read at their offsets in lexbor's structs
# (``lexbor_layout.layout_ok`` checks them against selectolax before this is used), no serialization to write
# and read again. Offsets in bytes, for 64-bit builds of lexbor 2.x:
N_LOCAL_NAME, N_NEXT, N_FIRST_CHILD, N_TYPE = 8, 40, 64, 88  # lxb_dom_node_t (type: a 32-bit enum)
T_DATA, T_LENGTH = 96, 104                                  # lxb_dom_character_data_t: its lexbor_str_t
E_QUALIFIED_NAME, E_FIRST_ATTR = 104, 120                    # lxb_dom_element_t
A_QUALIFIED_NAME, A_VALUE, A_NEXT = 104, 112, 128            # lxb_dom_attr_t (value: a lexbor_str_t *)
H_LENGTH = 24           # lexbor_hash_entry_t: its name's length; names of up to 16 bytes are stored at its start
SHORT_NAME = 16
ELEMENT_NODE, TEXT_NODE = 1, 3
# tag and attribute ids below this are lexbor's own (an index into its tables); above, the address of the
# name's hash entry in the document
STATIC_IDS = 1 << 16
# what the walk reads of an attribute (``lexbor_layout.node_tables`` maps lexbor's own ids to these)
ATTR_OTHER, ATTR_CLASS, ATTR_ID, ATTR_HIDDEN, ATTR_STYLE, ATTR_ROLE = range(6)


@intrinsic
def _word(typingctx, addr):
    """The 64-bit word at memory address ``addr``."""
    def codegen(context, builder, signature, args):
        return builder.load(builder.inttoptr(args[0], ir.IntType(64).as_pointer()))
    return types.int64(types.int64), codegen


@intrinsic
def _word32(typingctx, addr):
    """The 32-bit word at memory address ``addr``, zero-extended."""
    def codegen(context, builder, signature, args):
        v = builder.load(builder.inttoptr(args[0], ir.IntType(32).as_pointer()))
        return builder.zext(v, ir.IntType(64))
    return types.int64(types.int64), codegen


@intrinsic
def _byte_pointer(typingctx, addr):
    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], ir.IntType(8).as_pointer())
    return types.CPointer(types.uint8)(types.int64), codegen


@nb.njit(cache=True, inline="always")
def _bytes_at(addr, n):
    """The n bytes at ``addr`` as an array (a view: lexbor's memory, alive while the tree is)."""
    return nb.carray(_byte_pointer(addr), n)


@nb.njit(cache=True, inline="always")
def _name_of(name_id):
    """(address, length) of the name of a tag or attribute whose id is its hash entry's address; length -1 for
    a name too long to be stored in the entry (no name the walk looks for is)."""
    n = _word(name_id + H_LENGTH)
    return name_id, n if n <= SHORT_NAME else -1


@nb.njit(cache=True, inline="always")
def _attr_kind(attr, attr_kinds):
    """What the attribute at ``attr`` is to the walk (``ATTR_*``), by its qualified name as selectolax keys
    ``node.attributes``."""
    name_id = _word(attr + A_QUALIFIED_NAME)
    if name_id == 0:
        name_id = _word(attr + N_LOCAL_NAME)
    if name_id < STATIC_IDS:
        return attr_kinds[name_id] if name_id < attr_kinds.size else ATTR_OTHER
    addr, n = _name_of(name_id)
    if n < 2 or n > 6:
        return ATTR_OTHER
    name = _bytes_at(addr, n)
    if _equals(name, 0, n, _CLASS):
        return ATTR_CLASS
    if _equals(name, 0, n, _ID):
        return ATTR_ID
    if _equals(name, 0, n, _HIDDEN):
        return ATTR_HIDDEN
    if _equals(name, 0, n, _STYLE):
        return ATTR_STYLE
    if _equals(name, 0, n, _ROLE):
        return ATTR_ROLE
    return ATTR_OTHER


@nb.njit(cache=True, inline="always")
def _tag_row(node, tag_rows, k1, k2, klen):
    """The row of the element's tag in the tag table, or -1 (a tag the table does not hold): by lexbor's id
    for the tags it knows, by the element's qualified name (what ``node.tag`` gives) for the others."""
    tid = _word(node + N_LOCAL_NAME)
    if tid < STATIC_IDS:
        return tag_rows[tid] if tid < tag_rows.size else -1
    name_id = _word(node + E_QUALIFIED_NAME)
    if name_id < STATIC_IDS:  # none (0): the local name
        name_id = tid
    addr, n = _name_of(name_id)
    if n < 0:
        return -1
    return _lookup(_bytes_at(addr, n), 0, n, k1, k2, klen)


# One function, as ``scan_body``: the walk's state lives in its locals.
@nb.njit(cache=True)
def walk_nodes(body, out, blk, bbits, els, scratch, tables, tag_rows, attr_kinds, max_depth):
    """``dom_walk.walk`` of the tree whose body node is at address ``body``: the blocks' texts into ``out``,
    the block table into ``blk`` / ``bbits`` and the elements into ``els``, as ``scan_body`` writes them.
    ``tag_rows``: the tag table's row of each of lexbor's own tag ids (-1: none); ``attr_kinds``: ``ATTR_*``
    of each of its own attribute ids. Returns (OK, GIVE_UP or NEED_ROOM, bytes of text, blocks, elements);
    NEED_ROOM when a buffer is too small (the caller grows them all and runs again)."""
    (k1, k2, klen, info, default, wbytes, wlen, wbit, pair_first, rbytes, rlen, rbits, body_tag, pre_tag,
     widget) = tables
    NW = rbits.shape[1]
    nb_ = 0
    ne = 1
    D = max_depth + 2
    own, obits = _owner_stack(els, info, body_tag, D, NW)
    ot = 0
    # open elements: the node, and the state to restore when the walk leaves it
    f_node = np.empty(D, dtype=np.int64)
    f_anc = np.empty(D, dtype=np.int64)
    f_any = np.zeros((D, NW), dtype=np.uint64)
    f_link = np.empty(D, dtype=np.bool_)
    f_block = np.empty(D, dtype=np.bool_)
    sp = 0
    anc = 0
    cls_any = np.zeros(NW, dtype=np.uint64)
    in_link = False
    extra_anc = 0
    extra_near = np.zeros(NW, dtype=np.uint64)
    link = 0
    has_parts = False
    o = 0
    cp = 0
    bs = 0
    cs = 0
    pending = 0
    nonws = False
    cm = np.zeros(NW, dtype=np.uint64)
    c = _word(body + N_FIRST_CHILD)
    while True:
        if nb_ + 2 >= blk.shape[0] or ne + 2 >= els.shape[0]:
            return NEED_ROOM, 0, nb_, ne
        if c == 0:  # the open element's children are done: leave it
            if sp == 0:
                break
            sp -= 1
            if f_block[sp]:
                if has_parts:  # the block of this element
                    nb_, o, cp = _end_block(out, o, cp, bs, cs, nonws, own[ot, O_TAG] == pre_tag, link, nb_, blk,
                                            bbits, els, own, obits, ot, extra_anc, extra_near)
                    bs, cs, pending, nonws, has_parts, link, extra_anc = o, cp, 0, False, False, 0, 0
                ot -= 1
            anc = f_anc[sp]
            for q in range(NW):
                cls_any[q] = f_any[sp, q]
            in_link = f_link[sp]
            c = _word(f_node[sp] + N_NEXT)
            continue
        node_type = _word32(c + N_TYPE)
        if node_type == TEXT_NODE:
            n = _word(c + T_LENGTH)
            if n > 0:
                if o + n + 1 > out.size:  # a run writes at most its bytes and a line break before them
                    return NEED_ROOM, 0, nb_, ne
                has_parts = True
                _, o, cp, link, pending, nonws, _ = _text_run(_bytes_at(_word(c + T_DATA), n), 0, n, True, out, o,
                                                              cp, cs, link, in_link, pending, nonws,
                                                              own[ot, O_TAG] == pre_tag)
            c = _word(c + N_NEXT)
            continue
        if node_type != ELEMENT_NODE:  # a comment (``walk`` skips its tag)
            c = _word(c + N_NEXT)
            continue
        t = _tag_row(c, tag_rows, k1, k2, klen)
        if t >= 0:
            cat = info[t, 0]
            bit = info[t, 1]
            is_a = info[t, 2] != 0
            own_index = info[t, 3]
        else:
            cat = default[0]
            bit = default[1]
            is_a = default[2] != 0
            own_index = default[3]
        if cat >= 3:  # skipped, its subtree too
            if cat == 4:  # br: a line break in the block
                has_parts = True
                o, cp, pending = _line_break(out, o, cp, cs, pending, own[ot, O_TAG] == pre_tag)
            c = _word(c + N_NEXT)
            continue
        cm[:] = 0
        hidden = False
        a = _word(c + E_FIRST_ATTR)
        while a != 0:
            kind = _attr_kind(a, attr_kinds)
            if kind == ATTR_HIDDEN:
                hidden = True
            elif kind != ATTR_OTHER:
                v = _word(a + A_VALUE)
                m = _word(v + 8) if v != 0 else 0  # lexbor_str_t: data, then length
                if m > 0:
                    if 2 * m + 8 > scratch.size:
                        return NEED_ROOM, 0, nb_, ne
                    value = _bytes_at(_word(v), m)
                    if kind == ATTR_CLASS or kind == ATTR_ID:
                        _class_bits(value, m, wbytes, wlen, wbit, pair_first, scratch, cm)
                    elif kind == ATTR_STYLE:
                        hidden = hidden or _style_hides(value, m, scratch)
                    else:
                        _add_role(value, m, rbytes, rlen, rbits, cm)
            a = _word(a + A_NEXT)
        if hidden:  # skipped, unless inside a tab or accordion widget: read like the rest, marked
            for q in range(NW):
                if (cm[q] | cls_any[q]) & widget[q]:
                    hidden = False
            if hidden:
                c = _word(c + N_NEXT)
                continue
            bit |= HIDDEN_BIT
        if sp + 1 > max_depth:
            return GIVE_UP, 0, 0, 0  # deeper than ``walk`` reads element by element
        if cat == 1 and has_parts:  # a block starts: the text before it is a block of its own
            nb_, o, cp = _end_block(out, o, cp, bs, cs, nonws, own[ot, O_TAG] == pre_tag, link, nb_, blk, bbits,
                                    els, own, obits, ot, extra_anc, extra_near)
            bs, cs, pending, nonws, has_parts, link, extra_anc = o, cp, 0, False, False, 0, 0
        first = _word(c + N_FIRST_CHILD)
        if cat == 1:
            els[ne, E_PARENT] = own[ot, O_EI]
            els[ne, E_CHARS] = 0
            els[ne, E_LINK] = 0
            if first != 0:  # a new block owner
                _push_owner(own, obits, ot, ne, own_index, anc | bit, t, cm, cls_any)
                ot += 1
            ne += 1
        else:
            for q in range(NW):
                extra_near[q] |= cm[q]
            extra_anc |= bit
        if first == 0:
            c = _word(c + N_NEXT)
            continue
        f_node[sp] = c
        f_anc[sp] = anc
        for q in range(NW):
            f_any[sp, q] = cls_any[q]
            cls_any[q] |= cm[q]
        f_link[sp] = in_link
        f_block[sp] = cat == 1
        sp += 1
        anc |= bit
        in_link = in_link or is_a
        c = first
    if has_parts:  # the text after the last block: a block of the body
        nb_, o, cp = _end_block(out, o, cp, bs, cs, nonws, False, link, nb_, blk, bbits, els, own, obits, 0,
                                extra_anc, extra_near)
    _add_to_parents(els, ne)
    return OK, o, nb_, ne
