"""The block walk of ``extract_features.walk``, compiled: one numba pass over lexbor's serialization of the body.

``walk`` visits lexbor's tree node by node from Python (~2,400 nodes on a typical page, ~1.3 us each).
Here lexbor serializes the body (C, ~0.6 ms a page) and one compiled scan reads that serialization, which
is the tree written out: every element opened and closed (void elements have no end tag), text with ``&``,
``<``, ``>`` and U+00A0 escaped (in attribute values ``"`` too), the text of ``xmp`` / ``noembed`` /
``noframes`` / ``iframe`` / ``script`` / ``style`` as it is. The scan keeps the same state as ``walk`` (the
block owner, ancestor tag bits, class-word bits, link chars) and writes the same blocks, element parents
and chars as arrays, the block texts already white-space collapsed (``" ".join(raw.split())``; ``pre``
blocks ``raw.strip("\\n")``) into one UTF-8 buffer.

Where the serialization is not what the scan expects (an end tag that does not close the open element, an
entity other than those five, ``plaintext``, a page deeper than ``MAX_DEPTH``), it gives up and
``walk_arrays`` runs ``walk`` itself: the result is ``walk``'s in every case
(``tests/test_extract_dom.py`` compares the two on real and generated pages).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numba as nb
import numpy as np

from curate.stages import extract_features as F

OK = 0
GIVE_UP = 1
NEED_ROOM = 2  # more blocks or elements than the buffers hold: the caller grows them and runs again

# tags: the lexbor serializer writes no end tag for these, and the text inside these as it is
VOID_TAGS = ("area", "base", "basefont", "bgsound", "br", "col", "embed", "frame", "hr", "img", "input", "keygen",
             "link", "meta", "param", "source", "track", "wbr")
RAW_TEXT_TAGS = ("xmp", "noembed", "noframes", "iframe", "script", "style")
_FLAG_VOID = 1
_FLAG_RAW = 2
_FLAG_PLAINTEXT = 4
N_WORDS = (len(F.CLASS_WORDS) + 63) // 64  # uint64 words of a class-word bit set


def _b(s: str) -> np.ndarray:
    return np.frombuffer(s.encode(), dtype=np.uint8).copy()


# attribute names the scan reads, and what ``extract_features._is_hidden`` looks for in a style
_CLASS, _ID, _HIDDEN, _STYLE, _ROLE = _b("class"), _b("id"), _b("hidden"), _b("style"), _b("role")
_NONE, _DISPLAY_NONE, _VISIBILITY_HIDDEN = _b("none"), _b("display:none"), _b("visibility:hidden")


def _pack(name: bytes) -> tuple[int, int]:
    b = name.ljust(16, b"\0")
    return int.from_bytes(b[:8], "little"), int.from_bytes(b[8:16], "little")


def _split_bits(v: int) -> list[int]:
    return [(v >> (64 * k)) & 0xFFFFFFFFFFFFFFFF for k in range(N_WORDS)]


def _tables():
    """The constant arrays the scan reads (built once)."""
    names = sorted(set(F._TAG_INFO) | set(VOID_TAGS) | set(RAW_TEXT_TAGS) | {"plaintext"})
    names = [t for t in names if not t.startswith("-") and len(t) <= 16]
    keys = sorted((_pack(t.encode()), t) for t in names)
    k1 = np.array([k[0][0] for k in keys], dtype=np.uint64)
    k2 = np.array([k[0][1] for k in keys], dtype=np.uint64)
    tag_names = [k[1] for k in keys]
    klen = np.array([len(t) for t in tag_names], dtype=np.int64)
    info = np.zeros((len(tag_names), 5), dtype=np.int64)  # category, ancestor bit, is a link, own index, flags
    for i, t in enumerate(tag_names):
        cat, bit, is_a, _tag, own = F._info(t)
        flags = (_FLAG_VOID if t in VOID_TAGS else 0) | (_FLAG_RAW if t in RAW_TEXT_TAGS else 0)
        flags |= _FLAG_PLAINTEXT if t == "plaintext" else 0
        info[i] = (cat, bit, int(is_a), own, flags)
    default = np.array([*F._INLINE[:2], int(F._INLINE[2]), F._SPAN_OTHER, 0], dtype=np.int64)
    # class words: bytes, grouped by first byte, longest first (the regular expression's alternation order)
    words = sorted(enumerate(F.CLASS_WORDS), key=lambda iw: (iw[1][0], -len(iw[1])))
    wbytes = np.zeros((len(words), max(len(w) for w in F.CLASS_WORDS)), dtype=np.uint8)
    wlen = np.zeros(len(words), dtype=np.int64)
    wbit = np.zeros(len(words), dtype=np.int64)
    first = np.zeros(257, dtype=np.int64)  # words[first[c]:first[c + 1]] start with byte c
    for j, (i, w) in enumerate(words):
        wbytes[j, :len(w)] = np.frombuffer(w.encode(), dtype=np.uint8)
        wlen[j] = len(w)
        wbit[j] = i
    counts = np.bincount([w.encode()[0] for _, w in words], minlength=256)
    first[1:] = np.cumsum(counts)
    pairs = np.zeros(256 * 256, dtype=np.bool_)  # the first two bytes of some class word (all have two or more)
    for w in F.CLASS_WORDS:
        assert len(w) >= 2, w
        pairs[w.encode()[0] * 256 + w.encode()[1]] = True
    roles = list(F._ROLE_BITS)
    rbytes = np.zeros((len(roles), max(map(len, roles))), dtype=np.uint8)
    rlen = np.zeros(len(roles), dtype=np.int64)
    rbits = np.zeros((len(roles), N_WORDS), dtype=np.uint64)
    for j, r in enumerate(roles):
        rbytes[j, :len(r)] = np.frombuffer(r.encode(), dtype=np.uint8)
        rlen[j] = len(r)
        rbits[j] = _split_bits(F._ROLE_BITS[r])
    body = tag_names.index("body")
    pre = tag_names.index("pre")
    return (k1, k2, klen, info, default, wbytes, wlen, wbit, first, pairs, rbytes, rlen, rbits, body, pre), tag_names


TABLES, TAG_NAMES = _tables()


# ------------------------------------------------------------------------------------------ compiled


@nb.njit(cache=True, inline="always")
def _is_space_at(buf, i, end):
    """(whether the character at byte i is white space for ``str.split``, its length in bytes)."""
    c = buf[i]
    if c < 0x80:
        return (9 <= c <= 13) or (28 <= c <= 32), 1
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
    if i + 3 < end and buf[i + 2] == 116 and buf[i + 3] == 59:  # &lt; &gt;
        if buf[i + 1] == 108:
            return 60, 4
        if buf[i + 1] == 103:
            return 62, 4
    if i + 4 < end and buf[i + 1] == 97 and buf[i + 2] == 109 and buf[i + 3] == 112 and buf[i + 4] == 59:
        return 38, 5
    if (i + 5 < end and buf[i + 1] == 110 and buf[i + 2] == 98 and buf[i + 3] == 115 and buf[i + 4] == 112
            and buf[i + 5] == 59):
        return 0, 6
    if (attr and i + 5 < end and buf[i + 1] == 113 and buf[i + 2] == 117 and buf[i + 3] == 111
            and buf[i + 4] == 116 and buf[i + 5] == 59):
        return 34, 6
    return -1, 0


@nb.njit(cache=True)
def _unescape(buf, s, e, out):
    """The attribute value buf[s:e] with its entities replaced, into ``out``: its length, or -1."""
    o = 0
    i = s
    while i < e:
        c = buf[i]
        if c == 38:
            v, k = _entity(buf, i, e, True)
            if k == 0:
                return -1
            if v == 0:
                out[o] = 0xC2
                out[o + 1] = 0xA0
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


@nb.njit(cache=True)
def _contains(a, n, pat):
    m = pat.size
    for i in range(n - m + 1):
        j = 0
        while j < m and a[i + j] == pat[j]:
            j += 1
        if j == m:
            return True
    return False


@nb.njit(cache=True)
def _class_bits(v, n, wbytes, wlen, wbit, first, pairs, scratch, cm):
    """OR into ``cm`` the class words that ``_CLASS_WORD_RE.findall(value.lower())`` finds in the unescaped
    value v[:n]: lower-case ASCII; U+0130 lower-cases to "i" and a combining dot, U+212A to "k"; any other
    non-ASCII character to one that no class word holds."""
    m = 0
    i = 0
    while i < n:
        c = v[i]
        if c < 0x80:
            scratch[m] = c + 32 if 65 <= c <= 90 else c
            m += 1
            i += 1
            continue
        k = 2 if c < 0xE0 else (3 if c < 0xF0 else 4)
        if c == 0xC4 and i + 1 < n and v[i + 1] == 0xB0:
            scratch[m] = 105
            scratch[m + 1] = 0x80
            m += 2
        elif c == 0xE2 and i + 2 < n and v[i + 1] == 0x84 and v[i + 2] == 0xAA:
            scratch[m] = 107
            m += 1
        else:
            scratch[m] = 0x80
            m += 1
        i += k
    p = 0
    while p + 1 < m:
        c = scratch[p]
        if not pairs[c * 256 + scratch[p + 1]]:  # no class word starts with these two bytes
            p += 1
            continue
        hit = 0
        for w in range(first[c], first[c + 1]):
            L = wlen[w]
            if p + L > m:
                continue
            j = 1
            while j < L and scratch[p + j] == wbytes[w, j]:
                j += 1
            if j == L:
                b = wbit[w]
                cm[b >> 6] |= np.uint64(1) << np.uint64(b & 63)
                hit = L
                break
        p += hit if hit else 1


@nb.njit(cache=True)
def _equals(buf, a, n, pat):
    """Whether buf[a:a+n] is ``pat``."""
    if n != pat.size:
        return False
    for j in range(n):
        if buf[a + j] != pat[j]:
            return False
    return True


@nb.njit(cache=True)
def _same(buf, a, b, n):
    for j in range(n):
        if buf[a + j] != buf[b + j]:
            return False
    return True


@nb.njit(cache=True)
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


@nb.njit(cache=True, inline="always")
def _end_block(out, o, cp, bs, cs, nonws, pre, link, k, blk, bbits, els, own, obits, ot, extra_anc, extra_near):
    """The text written since the last boundary (bytes bs..o, code points cs..cp) ends: it becomes block k
    of the current owner ``own[ot]`` unless it is blank (``walk``'s ``_flush``), and the inline elements'
    class words in ``extra_near`` are cleared. Returns (blocks, o, cp)."""
    if pre:  # strip("\n") at the end (the start was stripped as it came)
        while o > bs and out[o - 1] == 10:
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


@nb.njit(cache=True)
def _text_run(buf, i, j, raw, out, o, cp, cs, link, in_link, pending, nonws, pre):
    """Append the text buf[i:j] (entities decoded unless ``raw``) to the block being written (code points
    from cs): white space collapsed as ``" ".join(raw.split())`` does, or kept in a ``pre`` block (its
    leading newlines stripped). Returns (ok, o, cp, link, pending, nonws); ok is False at an entity the
    serializer does not write."""
    k = i
    while k < j:
        c = np.int64(buf[k])
        s0 = k
        if c == 38 and not raw:
            v, L = _entity(buf, k, j, False)
            if L == 0:
                return False, o, cp, link, pending, nonws
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
            w = (9 <= c <= 13) or (28 <= c <= 32)
            m = 1
            k += 1
        else:
            w, m = _is_space_at(buf, k, j)
            k += m
        if in_link:
            link += 1
        if pre:
            if cp == cs and c == 10:
                continue  # strip("\n") at the start
            nonws = nonws or not w
        elif w:
            pending = pending or cp > cs
            continue
        else:
            if pending:
                out[o] = 32
                o += 1
                cp += 1
                pending = False
            nonws = True
        if m == 1:
            out[o] = c
        elif s0 < 0:
            out[o] = 0xC2
            out[o + 1] = 0xA0
        else:
            for q in range(m):
                out[o + q] = buf[s0 + q]
        o += m
        cp += 1
    return True, o, cp, link, pending, nonws


@nb.njit(cache=True)
def _walk(buf, out, blk, bbits, els, scratch, scratch2, k1, k2, klen, info, default, wbytes, wlen, wbit, first,
          pairs, rbytes, rlen, rbits, body_tag, pre_tag, max_depth):
    """The scan (see the module's doc). Writes the blocks' texts into ``out``, the block table into ``blk`` /
    ``bbits`` and the elements into ``els``, and returns (OK, GIVE_UP or NEED_ROOM, bytes of text, blocks,
    elements)."""
    n = buf.size
    NW = rbits.shape[1]
    nb_ = 0
    els[0, E_PARENT] = -1  # element 0: the body
    els[0, E_CHARS] = 0
    els[0, E_LINK] = 0
    ne = 1
    # block owners: a stack (the body at 0)
    D = max_depth + 2
    own = np.zeros((D, 5), dtype=np.int64)
    obits = np.zeros((D, 3 * NW), dtype=np.uint64)
    ot = 0
    own[0, O_OWN] = info[body_tag, 3]
    own[0, O_TAG] = body_tag
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
    # the block being written: bytes from bs, code points from cs; pending space; any non-space character
    o = 0
    cp = 0
    bs = 0
    cs = 0
    pending = False
    nonws = False
    cm = np.zeros(NW, dtype=np.uint64)
    # "<body" and its attributes (the body's own class is not read, as in ``walk``)
    if n < 13 or buf[0] != 60 or buf[1] != 98:
        return GIVE_UP, 0, 0, 0
    i = 0
    while i < n and buf[i] != 62:
        i += 1
    i += 1
    status = GIVE_UP
    while i < n:
        c = buf[i]
        if c != 60:  # a run of text up to the next "<"
            j = i
            while j < n and buf[j] != 60:
                j += 1
            if skip_at < 0:
                has_parts = True
                ok, o, cp, link, pending, nonws = _text_run(buf, i, j, False, out, o, cp, cs, link, in_link,
                                                            pending, nonws, own[ot, O_TAG] == pre_tag)
                if not ok:
                    return GIVE_UP, 0, 0, 0
            i = j
            continue
        # a tag, a comment or a processing instruction (each writes at most one block and one element)
        if i + 1 >= n:
            break
        if nb_ + 2 >= blk.shape[0] or ne + 2 >= els.shape[0]:
            return NEED_ROOM, 0, nb_, ne
        c1 = buf[i + 1]
        if c1 == 33:  # "<!--" ... "-->"
            if not (i + 3 < n and buf[i + 2] == 45 and buf[i + 3] == 45):
                break
            j = i + 4
            while j + 2 < n and not (buf[j] == 45 and buf[j + 1] == 45 and buf[j + 2] == 62):
                j += 1
            if j + 2 >= n:
                break
            i = j + 3
            continue
        if c1 == 63:  # "<?" ... ">"
            j = i + 2
            while j < n and buf[j] != 62:
                j += 1
            i = j + 1
            continue
        if c1 == 47:  # an end tag: it closes the innermost open element
            ns = i + 2
            j = ns
            while j < n and buf[j] != 62:
                j += 1
            nl = j - ns
            i = j + 1
            if sp == 0:
                if nl == 4 and buf[ns] == 98 and buf[ns + 1] == 111 and buf[ns + 2] == 100 and buf[ns + 3] == 121:
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
                    bs, cs, pending, nonws, has_parts, link, extra_anc = o, cp, False, False, False, 0, 0
                ot -= 1
            anc = f_anc[sp]
            for q in range(NW):
                cls_any[q] = f_any[sp, q]
            in_link = f_link[sp]
            continue
        # a start tag: its name, then name="value" pairs
        ns = i + 1
        j = ns
        while j < n and buf[j] != 32 and buf[j] != 62:
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
        if flags & _FLAG_PLAINTEXT:  # plaintext: its text may hold its own end tag
            break
        cm[:] = 0
        hidden = False
        while j < n and buf[j] == 32:
            a0 = j + 1  # the first character of a name is a name character even if it is "="
            e = a0 + 1
            while e < n and buf[e] != 61:
                e += 1
            if e + 1 >= n or buf[e + 1] != 34:
                break
            v0 = e + 2
            v1 = v0
            while v1 < n and buf[v1] != 34:
                v1 += 1
            if v1 >= n:
                break
            al = e - a0
            if skip_at < 0 and cat < 3:
                if _equals(buf, a0, al, _CLASS) or _equals(buf, a0, al, _ID):
                    m = _unescape(buf, v0, v1, scratch2)
                    if m < 0:
                        return GIVE_UP, 0, 0, 0
                    _class_bits(scratch2, m, wbytes, wlen, wbit, first, pairs, scratch, cm)
                elif _equals(buf, a0, al, _HIDDEN):
                    hidden = True
                elif _equals(buf, a0, al, _STYLE):
                    m = _unescape(buf, v0, v1, scratch2)
                    if m < 0:
                        return GIVE_UP, 0, 0, 0
                    if _contains(scratch2, m, _NONE) or _contains(scratch2, m, _HIDDEN):
                        r = 0
                        for q in range(m):
                            ch = scratch2[q]
                            if ch != 32:
                                scratch[r] = ch + 32 if 65 <= ch <= 90 else ch
                                r += 1
                        if _contains(scratch, r, _DISPLAY_NONE) or _contains(scratch, r, _VISIBILITY_HIDDEN):
                            hidden = True
                elif _equals(buf, a0, al, _ROLE):
                    m = _unescape(buf, v0, v1, scratch2)
                    if m < 0:
                        return GIVE_UP, 0, 0, 0
                    for rr in range(rlen.size):
                        if rlen[rr] == m:
                            q = 0
                            while q < m and scratch2[q] == rbytes[rr, q]:
                                q += 1
                            if q == m:
                                for w in range(NW):
                                    cm[w] |= rbits[rr, w]
            j = v1 + 1
        if j >= n or buf[j] != 62:
            break
        i = j + 1
        void = (flags & _FLAG_VOID) != 0
        raw_end = i
        if flags & _FLAG_RAW:  # raw text up to "</name>"
            raw_end = i
            while raw_end + nl + 2 < n:
                if buf[raw_end] == 60 and buf[raw_end + 1] == 47 and buf[raw_end + nl + 2] == 62 \
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
        if cat >= 3 or hidden:
            if cat == 4 and not hidden:  # br: a line break in the block
                has_parts = True
                if own[ot, O_TAG] == pre_tag:
                    if cp > cs:
                        out[o] = 10
                        o += 1
                        cp += 1
                elif cp > cs:
                    pending = True
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
            bs, cs, pending, nonws, has_parts, link, extra_anc = o, cp, False, False, False, 0, 0
        if cat == 1:
            els[ne, E_PARENT] = own[ot, O_EI]
            els[ne, E_CHARS] = 0
            els[ne, E_LINK] = 0
            if not void:  # a new block owner
                own[ot + 1, O_EI] = ne
                own[ot + 1, O_OWN] = own_index
                own[ot + 1, O_ANC] = anc | bit
                own[ot + 1, O_DEPTH] = own[ot, O_DEPTH] + 1
                own[ot + 1, O_TAG] = t
                for q in range(NW):
                    obits[ot + 1, q] = cm[q] | obits[ot, 2 * NW + q]
                    obits[ot + 1, NW + q] = cls_any[q] | cm[q]
                    obits[ot + 1, 2 * NW + q] = cm[q]
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
        if flags & _FLAG_RAW and raw_end > i:  # the element's text, as it is
            has_parts = True
            _, o, cp, link, pending, nonws = _text_run(buf, i, raw_end, True, out, o, cp, cs, link, in_link,
                                                       pending, nonws, own[ot, O_TAG] == pre_tag)
            i = raw_end
    if status != OK:
        return GIVE_UP, 0, 0, 0
    if has_parts:  # the text after the last block: a block of the body
        nb_, o, cp = _end_block(out, o, cp, bs, cs, nonws, False, link, nb_, blk, bbits, els, own, obits, 0,
                                extra_anc, extra_near)
    for e in range(ne - 1, 0, -1):  # children come after their parent
        p = els[e, E_PARENT]
        els[p, E_CHARS] += els[e, E_CHARS]
        els[p, E_LINK] += els[e, E_LINK]
    return OK, o, nb_, ne


# ------------------------------------------------------------------------------------------ Python side


@dataclass
class Walked:
    """``walk``'s result as arrays, one row per block (``near`` and ``any``: class-word bit sets as
    ``N_WORDS`` little-endian uint64 words) and one per element."""
    texts: list[str]
    link: np.ndarray       # int64: chars of the block inside links (at most its chars)
    el: np.ndarray         # int64: the owner's element index
    own: np.ndarray        # int64: the owner's tag index in OWN_TAGS
    anc: np.ndarray        # int64: ancestor tag bits
    near: np.ndarray       # uint64 [n, N_WORDS]: class words of the owner, its owner and the inline elements
    any: np.ndarray        # uint64 [n, N_WORDS]: class words of every element above
    depth: np.ndarray      # int64: block elements above the owner
    tags: list[str]        # the owner's tag
    el_parent: np.ndarray  # int64, per element
    el_chars: np.ndarray   # int64: chars of the blocks below the element
    el_link: np.ndarray    # int64: link chars of those


def walk_arrays(tree) -> Walked:
    """``extract_features.walk`` of a lexbor tree, as arrays: the compiled scan of its serialization where
    that one can read it, ``walk`` itself otherwise."""
    w = compiled_walk(tree)
    return w if w is not None else from_walk(*F.walk(tree))


def compiled_walk(tree) -> Walked | None:
    """The compiled scan (None where it gives up: then ``walk`` is the answer)."""
    html = tree.body.html
    if not html:
        return None
    buf = np.frombuffer(html.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    rows = 0
    while True:
        ws = _workspace(buf.size, rows)
        st, o, nbk, ne = _walk(buf, ws.out, ws.blk, ws.bbits, ws.els, ws.scratch, ws.scratch2, *TABLES, F.MAX_DEPTH)
        if st != NEED_ROOM:
            break
        rows = 2 * ws.rows
    if st != OK:
        return None
    try:
        s = ws.out[:o].tobytes().decode("utf-8")
    except UnicodeDecodeError:  # lone surrogates in the tree's text
        return None
    blk = ws.blk[:nbk].T.copy()
    bits = ws.bbits[:nbk]
    els = ws.els[:ne].T.copy()
    texts = [s[a:b] for a, b in zip(blk[B_CS].tolist(), blk[B_CE].tolist())]
    return Walked(texts, blk[B_LINK], blk[B_EL], blk[B_OWN], blk[B_ANC], bits[:, :N_WORDS].copy(),
                  bits[:, N_WORDS:].copy(), blk[B_DEPTH], [TAG_NAMES[i] for i in blk[B_TAG].tolist()],
                  els[E_PARENT], els[E_CHARS], els[E_LINK])


class _Workspace(threading.local):
    """The scan's buffers, kept per thread and grown to the largest page seen: fresh multi-megabyte arrays
    on every page would cost more (page faults) than the scan itself."""
    size = -1
    rows = -1

    def fit(self, size: int, rows: int):
        if size > self.size:
            self.size = max(size, min(2 * self.size, KEEP_BYTES), 1 << 16)
            self.out = np.empty(self.size + 8, dtype=np.uint8)
            self.scratch = np.empty(self.size + 8, dtype=np.uint8)
            self.scratch2 = np.empty(2 * self.size + 16, dtype=np.uint8)
        if rows > self.rows:
            self.rows = max(rows, min(2 * self.rows, KEEP_ROWS), 1 << 12)
            self.blk = np.empty((self.rows, 8), dtype=np.int64)
            self.bbits = np.empty((self.rows, 2 * N_WORDS), dtype=np.uint64)
            self.els = np.empty((self.rows, 3), dtype=np.int64)
        return self


_WS = _Workspace()
KEEP_BYTES = 1 << 22  # buffers for pages up to this size (stripped, serialized) are kept between pages
KEEP_ROWS = 1 << 17


def _workspace(size: int, rows: int) -> _Workspace:
    if size > KEEP_BYTES or rows > KEEP_ROWS:
        return _Workspace().fit(size, rows)  # a page this large is rare: its buffers go with it
    return _WS.fit(size, rows)


def from_walk(blocks: list[tuple], el_parent: list, el_chars: list, el_link: list) -> Walked:
    """``walk``'s lists as ``Walked``."""
    n = len(blocks)
    cols = list(map(list, zip(*blocks))) if n else [[] for _ in range(9)]
    texts, link, el, own, anc, near, any_, depth, tags = cols

    def words(values):
        return np.array([_split_bits(v) for v in values], dtype=np.uint64).reshape(n, N_WORDS)

    i64 = np.int64
    return Walked(texts, np.array(link, dtype=i64), np.array(el, dtype=i64), np.array(own, dtype=i64),
                  np.array(anc, dtype=i64), words(near), words(any_), np.array(depth, dtype=i64), tags,
                  np.array(el_parent, dtype=i64), np.array(el_chars, dtype=i64), np.array(el_link, dtype=i64))
