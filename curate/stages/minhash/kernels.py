"""Every compiled kernel of fuzzy dedup and decontamination, in one module.

Numba caches a compiled function keyed on its own source file only; kernels that inline helpers
from another file could keep a stale copy after that file changes. Keeping them all here means an
edit anywhere invalidates them together. The Python-facing wrappers live in ``shingles.py``,
``signatures.py``, ``clusters.py`` and ``decontaminate.py``.
"""
from __future__ import annotations

import numba as nb
import numpy as np

U64 = np.uint64
SPLIT = -1  # code_point_map value for whitespace
DROP = 0  # ... for removed characters
FNV_OFFSET = U64(0xCBF29CE484222325)
FNV_PRIME = U64(0x100000001B3)
MIX = U64(0x9E3779B97F4A7C15)  # odd: multiplying by it is a bijection on 64-bit words
MERSENNE61 = (1 << 61) - 1
P61 = U64(MERSENNE61)
M32 = U64(0xFFFFFFFF)
M29 = U64((1 << 29) - 1)
EMPTY = U64(0xFFFFFFFFFFFFFFFF)  # the signature of a document without shingles


# --- words and shingles ------------------------------------------------------------------------------

@nb.njit(inline="always")
def fmix64(k):
    k ^= k >> U64(33)
    k *= U64(0xFF51AFD7ED558CCD)
    k ^= k >> U64(33)
    k *= U64(0xC4CEB9FE1A85EC53)
    k ^= k >> U64(33)
    return k


@nb.njit(inline="always")
def _decode(data, i):
    """(code point, next byte index) of the UTF-8 sequence at ``data[i]`` (input is valid UTF-8)."""
    c = np.int64(data[i])
    if c < 0x80:
        return c, i + 1
    if c < 0xE0:
        return ((c & 0x1F) << 6) | (np.int64(data[i + 1]) & 0x3F), i + 2
    if c < 0xF0:
        return ((c & 0x0F) << 12) | ((np.int64(data[i + 1]) & 0x3F) << 6) | (np.int64(data[i + 2]) & 0x3F), i + 3
    return (((c & 0x07) << 18) | ((np.int64(data[i + 1]) & 0x3F) << 12)
            | ((np.int64(data[i + 2]) & 0x3F) << 6) | (np.int64(data[i + 3]) & 0x3F)), i + 4


@nb.njit(cache=True)
def doc_words(data, start, end, cpmap, hashes, starts, ends):
    """Hash the words of ``data[start:end]`` into ``hashes``; ``starts``/``ends`` get each word's
    code-point span in the original text (``text[s:e]`` in Python). Returns the number of words.
    The output arrays need room for ``(end - start + 1) // 2 + 1`` words."""
    n = 0
    h = FNV_OFFSET
    in_word = False
    cp_index = 0
    first = 0
    last = 0
    i = start
    while i < end:
        cp, i = _decode(data, i)
        m = cpmap[cp]
        if m == SPLIT:
            if in_word:
                hashes[n] = fmix64(h)
                starts[n] = first
                ends[n] = last
                n += 1
                in_word = False
                h = FNV_OFFSET
        elif m != DROP:
            if not in_word:
                in_word = True
                first = cp_index
            h = (h ^ U64(m)) * FNV_PRIME
            last = cp_index + 1
        cp_index += 1
    if in_word:
        hashes[n] = fmix64(h)
        starts[n] = first
        ends[n] = last
        n += 1
    return n


MAX_NGRAM = 64
# One odd 64-bit constant per position in an n-gram (the MurmurHash3 finalizer of 1, 2, ...).
_POS = np.empty(MAX_NGRAM, np.uint64)
for _t in range(MAX_NGRAM):
    _k = np.uint64(_t + 1)
    with np.errstate(over="ignore"):
        _k ^= _k >> U64(33); _k *= U64(0xFF51AFD7ED558CCD); _k ^= _k >> U64(33)
        _k *= U64(0xC4CEB9FE1A85EC53); _k ^= _k >> U64(33)
    _POS[_t] = _k | U64(1)


@nb.njit(inline="always")
def combine(words, i, n):
    """64-bit hash of the ``n`` word hashes ``words[i:i+n]``: a sum of position-weighted word hashes
    (independent multiplies, no serial chain) and the finalizer. ``n <= MAX_NGRAM``."""
    h = U64(n) * MIX
    for t in range(n):
        h += words[i + t] * _POS[t]
    return fmix64(h)


@nb.njit(cache=True)
def _word_buffers(offsets):
    """Word hash, start and end buffers for the longest document (one word per 2 bytes at most: a word and a separator)."""
    cap = 0
    for d in range(len(offsets) - 1):
        cap = max(cap, offsets[d + 1] - offsets[d])
    return np.empty(cap // 2 + 2, np.uint64), np.empty(cap // 2 + 2, np.int64), np.empty(cap // 2 + 2, np.int64)


@nb.njit(cache=True)
def _shingle_sets(data, offsets, cpmap, ngram, out_offsets):
    """Sorted unique shingle hashes of every document, flattened; ``out_offsets`` (n + 1) is filled."""
    n_docs = len(offsets) - 1
    words, ws, we = _word_buffers(offsets)
    total = 0
    for d in range(n_docs):
        nw = doc_words(data, offsets[d], offsets[d + 1], cpmap, words, ws, we)
        total += max(nw - ngram + 1, 1) if nw > 0 else 0
    out = np.empty(total, np.uint64)
    pos = 0
    out_offsets[0] = 0
    for d in range(n_docs):
        nw = doc_words(data, offsets[d], offsets[d + 1], cpmap, words, ws, we)
        begin = pos
        if nw >= ngram:
            for i in range(nw - ngram + 1):
                out[pos] = combine(words, i, ngram)
                pos += 1
        elif nw > 0:
            out[pos] = combine(words, 0, nw)
            pos += 1
        seg = np.sort(out[begin:pos])
        k = 0
        for j in range(len(seg)):
            if j == 0 or seg[j] != seg[j - 1]:
                out[begin + k] = seg[j]
                k += 1
        pos = begin + k
        out_offsets[d + 1] = pos
    return out[:pos]


@nb.njit(cache=True)
def jaccard_pairs(flat, offsets, left, right):
    """Exact Jaccard of the shingle sets ``left[i]`` and ``right[i]`` (indices into ``offsets``).
    Two empty sets have Jaccard 1 (identical); one empty set against a non-empty one has 0."""
    out = np.empty(len(left), np.float64)
    for p in range(len(left)):
        a0, a1 = offsets[left[p]], offsets[left[p] + 1]
        b0, b1 = offsets[right[p]], offsets[right[p] + 1]
        na, nb_ = a1 - a0, b1 - b0
        if na == 0 and nb_ == 0:
            out[p] = 1.0
            continue
        i, j, inter = a0, b0, 0
        while i < a1 and j < b1:
            x, y = flat[i], flat[j]
            if x == y:
                inter += 1
                i += 1
                j += 1
            elif x < y:
                i += 1
            else:
                j += 1
        out[p] = inter / (na + nb_ - inter)
    return out


@nb.njit(cache=True)
def _words_batch(data, offsets, cpmap, out_hash, out_start, out_end, word_offsets):
    n_docs = len(offsets) - 1
    pos = 0
    word_offsets[0] = 0
    for d in range(n_docs):
        nw = doc_words(data, offsets[d], offsets[d + 1], cpmap, out_hash[pos:], out_start[pos:], out_end[pos:])
        pos += nw
        word_offsets[d + 1] = pos
    return pos



# --- MinHash ----------------------------------------------------------------------------------------

@nb.njit(inline="always")
def _mod61(x):
    y = (x & P61) + (x >> U64(61))
    return y - P61 if y >= P61 else y


@nb.njit(inline="always")
def _update_p61(sig, a_lo, a_hi, b, x):
    """sig = min(sig, (a * x + b) mod p) elementwise, for x < p; exact, no 128-bit type needed."""
    xl = x & M32
    xh = x >> U64(32)
    for j in range(len(sig)):
        al = U64(a_lo[j])
        ah = U64(a_hi[j])
        lo = al * xl  # < 2^64
        mid = ah * xl + al * xh  # < 2^62
        hi = ah * xh  # < 2^58, weighs 2^64 = 8 (mod p)
        r = (lo & P61) + (lo >> U64(61)) + (hi << U64(3)) + (mid >> U64(29)) + ((mid & M29) << U64(32)) + b[j]
        r = (r & P61) + (r >> U64(61))
        r = min(r, r - P61)  # r - P61 wraps to a huge value unless r >= P61
        sig[j] = min(sig[j], r)


@nb.njit(inline="always")
def _update_ms(sig, a, b, x):
    """sig = min(sig, ((a * x + b) mod 2^64) >> 32) elementwise."""
    for j in range(len(sig)):
        sig[j] = min(sig[j], (a[j] * x + b[j]) >> U64(32))


@nb.njit(cache=True)
def _minhash_kernel(data, offsets, cpmap, ngram, family, a, a_lo, a_hi, b, sig, n_shingles):
    n_docs = len(offsets) - 1
    words, ws, we = _word_buffers(offsets)
    for d in range(n_docs):
        s = sig[d]
        s[:] = EMPTY
        nw = doc_words(data, offsets[d], offsets[d + 1], cpmap, words, ws, we)
        count = nw - ngram + 1 if nw >= ngram else (1 if nw > 0 else 0)
        n = ngram if nw >= ngram else nw
        for i in range(count):
            x = combine(words, i, n)
            if family == 0:
                _update_ms(s, a, b, x)
            else:
                _update_p61(s, a_lo, a_hi, b, _mod61(x))
        n_shingles[d] = count


@nb.njit(cache=True)
def _band_kernel(sig, bands, rows, out):
    for d in range(sig.shape[0]):
        for j in range(bands):
            h = U64(j + 1)
            for t in range(rows):
                h = (h ^ sig[d, j * rows + t]) * MIX
                h ^= h >> U64(31)
            out[d, j] = fmix64(h)


# --- union-find -------------------------------------------------------------------------------------

@nb.njit(cache=True)
def _find(parent, x):
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@nb.njit(cache=True)
def union_edges(parent, edges):
    """Union every edge (a, b) into ``parent``; the root of a component is its smallest index."""
    for k in range(edges.shape[0]):
        a = _find(parent, edges[k, 0])
        b = _find(parent, edges[k, 1])
        if a < b:
            parent[b] = a
        elif b < a:
            parent[a] = b


@nb.njit(cache=True)
def flatten(parent):
    """parent[i] <- root of i. Valid because every parent index is <= its child's."""
    for i in range(len(parent)):
        parent[i] = parent[parent[i]]


# --- decontamination n-grams -------------------------------------------------------------------------

@nb.njit(cache=True)
def _example_ngrams(word_hash, word_offsets, ngram, min_ngram):
    total = 0
    for d in range(len(word_offsets) - 1):
        nw = word_offsets[d + 1] - word_offsets[d]
        if nw >= ngram:
            total += nw - ngram + 1
        elif nw >= min_ngram:
            total += 1
    out = np.empty(total, np.uint64)
    lens = np.empty(total, np.int64)
    k = 0
    for d in range(len(word_offsets) - 1):
        a = word_offsets[d]
        nw = word_offsets[d + 1] - a
        if nw >= ngram:
            for i in range(nw - ngram + 1):
                out[k] = combine(word_hash, a + i, ngram)
                lens[k] = ngram
                k += 1
        elif nw >= min_ngram:
            out[k] = combine(word_hash, a, nw)
            lens[k] = nw
            k += 1
    return out, lens


@nb.njit(cache=True)
def _match_kernel(word_hash, word_offsets, lengths, table):
    """(document, first word, word count, n-gram hash) of every n-gram of the documents found in ``table``."""
    cap = 64
    doc = np.empty(cap, np.int64)
    first = np.empty(cap, np.int64)
    count = np.empty(cap, np.int64)
    hashes = np.empty(cap, np.uint64)
    k = 0
    nt = len(table)
    if nt == 0:
        return doc[:0], first[:0], count[:0], hashes[:0]
    for d in range(len(word_offsets) - 1):
        a, z = word_offsets[d], word_offsets[d + 1]
        for L in lengths:
            for i in range(a, z - L + 1):
                h = combine(word_hash, i, L)
                j = np.searchsorted(table, h)
                if j < nt and table[j] == h:
                    if k == cap:
                        cap *= 2
                        doc = np.concatenate((doc, np.empty(cap - k, np.int64)))
                        first = np.concatenate((first, np.empty(cap - k, np.int64)))
                        count = np.concatenate((count, np.empty(cap - k, np.int64)))
                        hashes = np.concatenate((hashes, np.empty(cap - k, np.uint64)))
                    doc[k] = d
                    first[k] = i - a
                    count[k] = L
                    hashes[k] = h
                    k += 1
    return doc[:k], first[:k], count[:k], hashes[:k]


# --- datasketch-compatible signatures ----------------------------------------------------------------

@nb.njit(cache=True)
def _normalized_utf8(data, offsets, cpmap, out, out_offsets):
    """The normalized words of every document as UTF-8, joined by single spaces (``shingles.normalize``
    in bytes); ``out`` needs room for 2 * len(data) + len(offsets) bytes. Returns the bytes written."""
    pos = 0
    out_offsets[0] = 0
    for d in range(len(offsets) - 1):
        i = offsets[d]
        end = offsets[d + 1]
        in_word = False
        started = False
        while i < end:
            cp, i = _decode(data, i)
            m = cpmap[cp]
            if m == SPLIT:
                in_word = False
                continue
            if m == DROP:
                continue
            if not in_word:
                if started:
                    out[pos] = 32
                    pos += 1
                in_word = True
                started = True
            if m < 0x80:
                out[pos] = m
                pos += 1
            elif m < 0x800:
                out[pos] = 0xC0 | (m >> 6)
                out[pos + 1] = 0x80 | (m & 0x3F)
                pos += 2
            elif m < 0x10000:
                out[pos] = 0xE0 | (m >> 12)
                out[pos + 1] = 0x80 | ((m >> 6) & 0x3F)
                out[pos + 2] = 0x80 | (m & 0x3F)
                pos += 3
            else:
                out[pos] = 0xF0 | (m >> 18)
                out[pos + 1] = 0x80 | ((m >> 12) & 0x3F)
                out[pos + 2] = 0x80 | ((m >> 6) & 0x3F)
                out[pos + 3] = 0x80 | (m & 0x3F)
                pos += 4
        out_offsets[d + 1] = pos
    return pos


@nb.njit(cache=True)
def _legacy_kernel(hv, hv_offsets, a, b, sig):
    """datasketch's legacy scheme: sig = min over a document's 32-bit shingle hashes of
    ((a * hv + b) mod 2^64 mod (2^61 - 1)) & (2^32 - 1), with numpy's wrapping uint64 products."""
    for d in range(len(hv_offsets) - 1):
        s = sig[d]
        s[:] = M32
        for k in range(hv_offsets[d], hv_offsets[d + 1]):
            x = hv[k]
            for j in range(len(s)):
                v = ((a[j] * x + b[j]) % P61) & M32
                if v < s[j]:
                    s[j] = v
