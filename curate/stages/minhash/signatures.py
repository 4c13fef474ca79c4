"""MinHash signatures and LSH bands, and the S-curve that relates them to Jaccard similarity.

Permutations are the family datasketch users know: ``h_i(x) = (a_i * x + b_i) mod (2^61 - 1)``, with
``a_i`` drawn uniformly from ``[1, p)`` and ``b_i`` from ``[0, p)`` by numpy's PCG64 seeded with ``seed``.
Unlike datasketch (which multiplies 32-bit hashes in wrapping uint64 arithmetic and keeps 32 bits),
``x`` is the full 64-bit shingle hash reduced mod p and the product is exact: the kernel splits both
factors into 32-bit halves (four 32x32->64 products, which vectorize) and folds with 2^61 = 1 (mod p).
A signature value is the minimum of ``h_i`` over the document's shingles: 61 bits, never truncated.

Band ``j`` of a signature is its rows ``[j*r, (j+1)*r)``; its band hash is a 64-bit hash of those r
values. Two documents are LSH candidates when any band hash is equal, which happens with probability
``P(s) = 1 - (1 - s^r)^b`` for documents of shingle Jaccard ``s``.

The kernel walks the UTF-8 bytes of a whole batch (one Arrow string column) without a Python call
per document, word or shingle; per core it runs at several thousand web-sized documents a second.
"""
from __future__ import annotations

import math

import numba as nb
import numpy as np

from curate.stages.minhash.shingles import MIX, U64, code_point_map, combine, doc_words, fmix64, text_buffers

MERSENNE61 = (1 << 61) - 1
P61 = U64(MERSENNE61)
M32 = U64(0xFFFFFFFF)
M29 = U64((1 << 29) - 1)

DEFAULT_BANDS, DEFAULT_ROWS = 20, 13  # MT-NLG / NeMo Curator: 260 permutations, candidates from J ~ 0.8


def permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) of the ``num_perm`` permutations, as uint64 arrays."""
    rng = np.random.Generator(np.random.PCG64(seed))
    a = rng.integers(1, MERSENNE61, size=num_perm, dtype=np.uint64)
    b = rng.integers(0, MERSENNE61, size=num_perm, dtype=np.uint64)
    return a, b


@nb.njit(inline="always")
def _mod61(x):
    y = (x & P61) + (x >> U64(61))
    return y - P61 if y >= P61 else y


@nb.njit(inline="always")
def _update(sig, a_lo, a_hi, b, x):
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
        if r >= P61:
            r -= P61
        if r < sig[j]:
            sig[j] = r


@nb.njit(cache=True)
def _minhash_kernel(data, offsets, cpmap, ngram, a_lo, a_hi, b, sig, n_shingles):
    n_docs = len(offsets) - 1
    cap = 0
    for d in range(n_docs):
        cap = max(cap, offsets[d + 1] - offsets[d])
    words = np.empty(cap // 2 + 2, np.uint64)
    ws = np.empty(cap // 2 + 2, np.int64)
    we = np.empty(cap // 2 + 2, np.int64)
    for d in range(n_docs):
        s = sig[d]
        s[:] = P61
        nw = doc_words(data, offsets[d], offsets[d + 1], cpmap, words, ws, we)
        if nw >= ngram:
            count = nw - ngram + 1
            for i in range(count):
                _update(s, a_lo, a_hi, b, _mod61(combine(words, i, ngram)))
        elif nw > 0:
            count = 1
            _update(s, a_lo, a_hi, b, _mod61(combine(words, 0, nw)))
        else:
            count = 0
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


class MinHasher:
    """Signatures of ``bands * rows`` permutations over word ``ngram`` shingles."""

    def __init__(self, bands: int = DEFAULT_BANDS, rows: int = DEFAULT_ROWS, ngram: int = 5, seed: int = 42,
                 batch_docs: int = 2048):
        if bands < 1 or rows < 1 or ngram < 1:
            raise ValueError("bands, rows and ngram must be >= 1")
        self.bands, self.rows, self.ngram, self.seed = bands, rows, ngram, seed
        self.num_perm = bands * rows
        a, b = permutations(self.num_perm, seed)
        self.a_lo = (a & M32).astype(np.uint32)
        self.a_hi = (a >> U64(32)).astype(np.uint32)
        self.b = b
        self.batch_docs = batch_docs

    def signatures(self, texts) -> tuple[np.ndarray, np.ndarray]:
        """(uint64[n, num_perm] signatures, int64[n] shingle counts); a document without shingles
        has count 0 and an all-(2^61 - 1) signature that the stage never puts in a bucket."""
        data, offsets = text_buffers(texts)
        n = len(offsets) - 1
        sig = np.empty((n, self.num_perm), np.uint64)
        counts = np.empty(n, np.int64)
        cpmap = code_point_map()
        for lo in range(0, n, self.batch_docs):
            hi = min(n, lo + self.batch_docs)
            _minhash_kernel(data, offsets[lo:hi + 1], cpmap, self.ngram, self.a_lo, self.a_hi, self.b,
                            sig[lo:hi], counts[lo:hi])
        return sig, counts

    def band_hashes(self, sig: np.ndarray) -> np.ndarray:
        out = np.empty((sig.shape[0], self.bands), np.uint64)
        _band_kernel(sig, self.bands, self.rows, out)
        return out

    def bands_of(self, texts) -> tuple[np.ndarray, np.ndarray]:
        """(uint64[n, bands] band hashes, int64[n] shingle counts), a batch at a time (bounded memory)."""
        data, offsets = text_buffers(texts)
        n = len(offsets) - 1
        out = np.empty((n, self.bands), np.uint64)
        counts = np.empty(n, np.int64)
        cpmap = code_point_map()
        sig = np.empty((min(n, self.batch_docs), self.num_perm), np.uint64)
        for lo in range(0, n, self.batch_docs):
            hi = min(n, lo + self.batch_docs)
            s = sig[: hi - lo]
            _minhash_kernel(data, offsets[lo:hi + 1], cpmap, self.ngram, self.a_lo, self.a_hi, self.b, s, counts[lo:hi])
            _band_kernel(s, self.bands, self.rows, out[lo:hi])
        return out, counts


def estimate_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> float:
    return float(np.mean(sig_a == sig_b))


# --- the S-curve ----------------------------------------------------------------------------------

def candidate_probability(s, bands: int, rows: int):
    """P(s) = 1 - (1 - s^r)^b: the chance that two documents of Jaccard s share a band."""
    s = np.asarray(s, dtype=np.float64)
    return 1.0 - (1.0 - s ** rows) ** bands


def s50(bands: int, rows: int) -> float:
    """The Jaccard at which P(s) = 0.5."""
    return (1.0 - 0.5 ** (1.0 / bands)) ** (1.0 / rows)


def choose_bands(threshold: float, max_perm: int = DEFAULT_BANDS * DEFAULT_ROWS, window: float = 0.1) -> tuple[int, int]:
    """(bands, rows) with bands * rows <= max_perm that best separates pairs around ``threshold``:
    minimizes the mean of P(s) over [t - window, t) (false positives) plus the mean of 1 - P(s) over
    [t, t + window] (false negatives). Unlike datasketch's integrals over [0, t] and [t, 1], this
    weighs the pairs just below and above t, the ones banding can actually tell apart."""
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    lo = np.linspace(max(0.0, threshold - window), threshold, 201)[:-1]
    hi = np.linspace(threshold, min(1.0, threshold + window), 201)
    best, best_err = None, math.inf
    for r in range(1, max_perm + 1):
        for b in range(1, max_perm // r + 1):
            err = candidate_probability(lo, b, r).mean() + (1.0 - candidate_probability(hi, b, r)).mean()
            if err < best_err - 1e-12:
                best, best_err = (b, r), err
    return best


def s_curve_table(bands: int, rows: int, points=(0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0)) -> dict:
    return {f"{s:.2f}": round(float(candidate_probability(s, bands, rows)), 4) for s in points}


def format_s_curve(bands: int, rows: int) -> str:
    table = s_curve_table(bands, rows)
    head = f"S-curve for {bands} bands x {rows} rows ({bands * rows} permutations), P(s) = 1 - (1 - s^{rows})^{bands}, P = 0.5 at s = {s50(bands, rows):.3f}"
    return head + "\n" + "  s    " + " ".join(f"{k:>6}" for k in table) + "\n  P(s) " + " ".join(f"{v:6.3f}" for v in table.values())
