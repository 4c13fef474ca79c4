"""Text normalization, words and word n-gram shingles, as compiled kernels over whole batches.

Normalization (the same for fuzzy dedup and for decontamination), one code point at a time:

1. whitespace (``str.isspace``) separates words;
2. punctuation and symbols (Unicode categories ``P*`` and ``S*``), control and format characters
   (``Cc``, ``Cf``) and lone surrogates are **removed**: they neither belong to a word nor split one,
   so ``don't`` -> ``dont``, ``U.S.A.`` -> ``usa``, ``e-mail`` -> ``email``, ``a - b`` -> ``a b``;
3. decimal digits of any script (``Nd``) fold to ``0``: ``2024`` -> ``0000``;
4. every other character is lowercased (``chr(c).lower()``, its first code point: one character,
   without the context rule of final sigma, so a word hashes the same wherever it stands);
5. whitespace runs collapse: a word is a maximal run of kept characters.

``normalize(text)`` returns the normalized words joined by single spaces (for people and tests);
the kernels never build that string. They read the UTF-8 bytes of an Arrow string column in place,
map each code point through one lookup table (``code_point_map``), and hash each word with 64-bit
FNV-1a over its mapped code points followed by the MurmurHash3 finalizer. A shingle of ``n`` words
hashes the ``n`` word hashes with a multiply-xor chain and the finalizer again: 64 bits end to end.
A document with fewer than ``n`` words (but at least one) has one shingle made of all its words; a
document with no word has no shingle.
"""
from __future__ import annotations

import unicodedata

import numba as nb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SPLIT = -1  # code_point_map value for whitespace
DROP = 0  # ... for removed characters

U64 = np.uint64
FNV_OFFSET = U64(0xCBF29CE484222325)
FNV_PRIME = U64(0x100000001B3)
MIX = U64(0x9E3779B97F4A7C15)  # odd: multiplying by it is a bijection on 64-bit words

_CP_MAP: np.ndarray | None = None


def code_point_map() -> np.ndarray:
    """int32[0x110000]: ``SPLIT``, ``DROP`` or the code point a character normalizes to. Built once per process (~0.2 s)."""
    global _CP_MAP
    if _CP_MAP is None:
        table = np.arange(0x110000, dtype=np.int32)  # unassigned and private-use code points stay as they are
        # Planes 4-13 are unassigned and 15-16 are private use: only these ranges need a look-up.
        for lo, hi in ((0, 0x40000), (0xE0000, 0xE1000)):
            for cp in range(lo, hi):
                c = chr(cp)
                if c.isspace():
                    table[cp] = SPLIT
                    continue
                cat = unicodedata.category(c)
                if cat[0] in "PS" or cat in ("Cc", "Cf", "Cs"):
                    table[cp] = DROP
                elif cat == "Nd":
                    table[cp] = 0x30
                else:
                    table[cp] = ord(c.lower()[0])
        _CP_MAP = table
    return _CP_MAP


def normalize(text: str) -> str:
    """The normalized text: the words the kernels hash, joined by single spaces."""
    table = code_point_map()
    words, cur = [], []
    for ch in text:
        m = table[ord(ch)]
        if m == SPLIT:
            if cur:
                words.append("".join(cur))
                cur = []
        elif m != DROP:
            cur.append(chr(m))
    if cur:
        words.append("".join(cur))
    return " ".join(words)


def text_buffers(texts) -> tuple[np.ndarray, np.ndarray]:
    """UTF-8 bytes and int64 offsets (n + 1) of a string column, list of str, or Arrow array; nulls are empty."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks != 1 else texts.chunk(0)
    if not isinstance(texts, pa.Array):
        texts = pa.array(list(texts), pa.large_string())
    if texts.null_count:
        texts = pc.fill_null(texts, "")
    if pa.types.is_string(texts.type):
        texts = texts.cast(pa.large_string())
    if not pa.types.is_large_string(texts.type):
        raise TypeError(f"expected a string column, got {texts.type}")
    n = len(texts)
    _, obuf, dbuf = texts.buffers()
    offsets = np.frombuffer(obuf, dtype=np.int64, count=texts.offset + n + 1)[texts.offset:]
    data = np.frombuffer(dbuf, dtype=np.uint8) if dbuf is not None and dbuf.size else np.zeros(1, np.uint8)
    return data, offsets


# --- kernels ----------------------------------------------------------------------------------------

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


@nb.njit(inline="always")
def combine(words, i, n):
    """64-bit hash of the ``n`` word hashes ``words[i:i+n]``."""
    h = U64(n)
    for t in range(n):
        h = (h ^ words[i + t]) * MIX
        h ^= h >> U64(29)
    return fmix64(h)


@nb.njit(cache=True)
def _shingle_sets(data, offsets, cpmap, ngram, out_offsets):
    """Sorted unique shingle hashes of every document, flattened; ``out_offsets`` (n + 1) is filled."""
    n_docs = len(offsets) - 1
    cap = 0
    for d in range(n_docs):
        cap = max(cap, offsets[d + 1] - offsets[d])
    words = np.empty(cap // 2 + 2, np.uint64)
    ws = np.empty(cap // 2 + 2, np.int64)
    we = np.empty(cap // 2 + 2, np.int64)
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


def shingle_sets(texts, ngram: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """(flat sorted unique uint64 shingle hashes, int64 offsets n + 1) for a batch of texts."""
    data, offsets = text_buffers(texts)
    out_offsets = np.empty(len(offsets), np.int64)
    flat = _shingle_sets(data, offsets, code_point_map(), ngram, out_offsets)
    return flat, out_offsets


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


def jaccard(a: str, b: str, ngram: int = 5) -> float:
    """Exact Jaccard similarity of two texts' shingle sets (after normalization)."""
    flat, offsets = shingle_sets([a, b], ngram)
    return float(jaccard_pairs(flat, offsets, np.array([0]), np.array([1]))[0])


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


def words(texts) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Word hashes, code-point starts and ends (flat) and int64 per-document offsets (n + 1)."""
    data, offsets = text_buffers(texts)
    cap = int(offsets[-1] - offsets[0]) // 2 + len(offsets) + 1
    h = np.empty(cap, np.uint64)
    s = np.empty(cap, np.int64)
    e = np.empty(cap, np.int64)
    wo = np.empty(len(offsets), np.int64)
    n = _words_batch(data, offsets, code_point_map(), h, s, e, wo)
    return h[:n], s[:n], e[:n], wo
