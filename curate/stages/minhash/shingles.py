"""Text normalization, words and word n-gram shingles, as compiled kernels over whole batches.

Normalization (the same for fuzzy dedup and for decontamination), one code point at a time:

1. whitespace (``str.isspace``) separates words;
2. punctuation and symbols (Unicode categories ``P*`` and ``S*``), control and format characters
   (``Cc``, ``Cf``) and lone surrogates are **removed**: they neither belong to a word nor split one,
   so ``don't`` -> ``dont``, ``U.S.A.`` -> ``usa``, ``e-mail`` -> ``email``, ``a - b`` -> ``a b``;
3. decimal digits of any script (``Nd``) fold to ``0``: ``2024`` -> ``0000`` (MinHash always;
   ``decontaminate`` only with ``fold_digits = true``: ``code_point_map(fold_digits=False)`` leaves
   digits as they are);
4. every other character is lowercased (``chr(c).lower()``, its first code point: one character,
   without the context rule of final sigma, so a word hashes the same wherever it stands);
5. whitespace runs collapse: a word is a maximal run of kept characters.

``normalize(text)`` returns the normalized words joined by single spaces (for people and tests);
the kernels never build that string. They read the UTF-8 bytes of an Arrow string column in place,
map each code point through one lookup table (``code_point_map``), and hash each word with 64-bit
FNV-1a over its mapped code points followed by the MurmurHash3 finalizer. A shingle of ``n`` words
hashes its ``n`` word hashes, each times an odd constant for its position, summed, through the
finalizer again: 64 bits end to end.
A document with fewer than ``n`` words (but at least one) has one shingle made of all its words; a
document with no word has no shingle.
"""
from __future__ import annotations

import unicodedata

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from curate.stages.minhash.kernels import DROP, MAX_NGRAM, SPLIT, _shingle_sets, _words_batch, jaccard_pairs  # noqa: F401

_CP_MAP: np.ndarray | None = None
_CP_MAP_DIGITS: np.ndarray | None = None


def code_point_map(fold_digits: bool = True) -> np.ndarray:
    """int32[0x110000]: ``SPLIT``, ``DROP`` or the code point a character normalizes to. Built once per process (~0.2 s).
    ``fold_digits = False``: rule 3 is left out, a decimal digit stays itself (``decontaminate``'s default: a
    number in the training text matches only the same number in an eval item). MinHash always folds: its
    signatures are pinned to datasketch parity."""
    global _CP_MAP, _CP_MAP_DIGITS
    if not fold_digits:
        if _CP_MAP_DIGITS is None:
            table = code_point_map(True).copy()
            for lo, hi in ((0, 0x40000), (0xE0000, 0xE1000)):
                for cp in range(lo, hi):
                    if unicodedata.category(chr(cp)) == "Nd":
                        table[cp] = ord(chr(cp).lower()[0])  # rule 4, as every other character
            _CP_MAP_DIGITS = table
        return _CP_MAP_DIGITS
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


def normalize(text: str, fold_digits: bool = True) -> str:
    """The normalized text: the words the kernels hash, joined by single spaces."""
    table = code_point_map(fold_digits)
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


def shingle_sets(texts, ngram: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """(flat sorted unique uint64 shingle hashes, int64 offsets n + 1) for a batch of texts."""
    data, offsets = text_buffers(texts)
    out_offsets = np.empty(len(offsets), np.int64)
    flat = _shingle_sets(data, offsets, code_point_map(), ngram, out_offsets)
    return flat, out_offsets


def jaccard(a: str, b: str, ngram: int = 5) -> float:
    """Exact Jaccard similarity of two texts' shingle sets (after normalization)."""
    flat, offsets = shingle_sets([a, b], ngram)
    return float(jaccard_pairs(flat, offsets, np.array([0]), np.array([1]))[0])


def words(texts, fold_digits: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Word hashes, code-point starts and ends (flat) and int64 per-document offsets (n + 1); ``fold_digits``:
    rule 3 (``code_point_map``)."""
    data, offsets = text_buffers(texts)
    cap = int(offsets[-1] - offsets[0]) // 2 + len(offsets) + 1
    h = np.empty(cap, np.uint64)
    s = np.empty(cap, np.int64)
    e = np.empty(cap, np.int64)
    wo = np.empty(len(offsets), np.int64)
    n = _words_batch(data, offsets, code_point_map(fold_digits), h, s, e, wo)
    return h[:n], s[:n], e[:n], wo
