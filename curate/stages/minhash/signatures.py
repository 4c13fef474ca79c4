"""MinHash signatures and LSH bands, and the S-curve that relates them to Jaccard similarity.

Two permutation families, chosen by ``family`` (the stage's ``permutation`` key); both take the 64-bit
shingle hash ``x`` whole and draw their parameters from numpy's PCG64 seeded with ``seed``:

- ``"multiply_shift"`` (default): ``h_i(x) = ((a_i * x + b_i) mod 2^64) >> 32`` with ``a_i`` odd, the
  multiply-add-shift family (Dietzfelbinger 1996) that rensa's R-MinHash also uses. One 64-bit
  multiply per (shingle, permutation), eight permutations per AVX-512 instruction: about 3.5 times the
  speed of the exact prime-field family below on this machine, which is what lets the whole signature
  step (UTF-8 decoding, normalization, shingling and hashing) beat Python tools that are handed the
  shingles. Values are 32 bits; the shingle hash stays 64 bits, so two shingles never share a value
  by a hash collision of their own, and the measured candidate rate sits on the S-curve (see
  ``tests/test_minhash.py``) just as with the prime family.
- ``"mod_prime"``: ``h_i(x) = (a_i * x' + b_i) mod (2^61 - 1)``, ``x' = x mod (2^61 - 1)``, ``a_i`` in
  ``[1, p)``, ``b_i`` in ``[0, p)``: the family datasketch users know, but exact (datasketch multiplies
  32-bit hashes in wrapping uint64 arithmetic and keeps 32 bits). The kernel splits both factors
  into 32-bit halves (four 32x32->64 products, which vectorize) and folds with 2^61 = 1 (mod p).
- ``"datasketch"``: bit for bit the signature of ``datasketch.MinHash(num_perm, seed=seed,
  scheme="legacy")`` updated with each shingle's bytes: the shingle is its normalized words joined
  by single spaces, UTF-8 encoded; its hash is datasketch's ``sha1_hash32`` (the first 4 bytes of
  SHA-1, little-endian); the permutations are datasketch's own (``numpy.random.RandomState(seed)``),
  applied as datasketch does: ``((a * h + b) mod 2^64 mod (2^61 - 1)) & (2^32 - 1)``. A signature
  made here can be wrapped in ``datasketch.MinHash(..., hashvalues=sig, scheme="legacy")`` and
  queried in a ``MinHashLSH`` built from datasketch's own MinHash objects (``to_datasketch``). The
  SHA-1 per shingle runs in Python: the slowest family, for interoperability.

A signature value is the minimum of ``h_i`` over the document's shingles. Band ``j`` of a signature is
its rows ``[j*r, (j+1)*r)``; its band hash is a 64-bit hash of those r values. Two documents are LSH
candidates when any band hash is equal, which happens with probability ``P(s) = 1 - (1 - s^r)^b``
for documents of shingle Jaccard ``s``.

The kernel walks the UTF-8 bytes of a whole batch (one Arrow string column) without a Python call
per document, word or shingle.
"""
from __future__ import annotations

import functools
import hashlib
import math

import numpy as np

from curate.stages.minhash.kernels import M32, MERSENNE61, U64, _band_kernel, _legacy_kernel, _minhash_kernel, _normalized_utf8
from curate.stages.minhash.shingles import MAX_NGRAM, code_point_map, text_buffers


DEFAULT_BANDS, DEFAULT_ROWS = 20, 13  # MT-NLG / NeMo Curator: 260 permutations, candidates from J ~ 0.8


FAMILIES = {"multiply_shift": 0, "mod_prime": 1, "datasketch": 2}


def permutations(num_perm: int, seed: int, family: str = "multiply_shift") -> tuple[np.ndarray, np.ndarray]:
    """(a, b) of the ``num_perm`` permutations, as uint64 arrays."""
    if family == "datasketch":
        from datasketch import MinHash

        a, b = MinHash(num_perm=num_perm, seed=seed, scheme="legacy").permutations
        return np.asarray(a, np.uint64), np.asarray(b, np.uint64)
    rng = np.random.Generator(np.random.PCG64(seed))
    if family == "mod_prime":
        a = rng.integers(1, MERSENNE61, size=num_perm, dtype=np.uint64)
        b = rng.integers(0, MERSENNE61, size=num_perm, dtype=np.uint64)
    elif family == "multiply_shift":
        a = rng.integers(0, 2**64, size=num_perm, dtype=np.uint64, endpoint=False) | np.uint64(1)
        b = rng.integers(0, 2**64, size=num_perm, dtype=np.uint64, endpoint=False)
    else:
        raise ValueError(f"unknown permutation family {family!r}; choose one of {', '.join(FAMILIES)}")
    return a, b


class MinHasher:
    """Signatures of ``bands * rows`` permutations over word ``ngram`` shingles."""

    def __init__(self, bands: int = DEFAULT_BANDS, rows: int = DEFAULT_ROWS, ngram: int = 5, seed: int = 42,
                 family: str = "multiply_shift", batch_docs: int = 2048):
        if bands < 1 or rows < 1 or not 1 <= ngram <= MAX_NGRAM:
            raise ValueError(f"bands and rows must be >= 1 and ngram in [1, {MAX_NGRAM}]")
        self.bands, self.rows, self.ngram, self.seed, self.family = bands, rows, ngram, seed, family
        self.num_perm = bands * rows
        self.a, self.b = permutations(self.num_perm, seed, family)
        self.a_lo = (self.a & M32).astype(np.uint32)
        self.a_hi = (self.a >> U64(32)).astype(np.uint32)
        self._family = FAMILIES[family]
        self.batch_docs = batch_docs

    def _kernel(self, data, offsets, cpmap, sig, counts):
        if self._family == FAMILIES["datasketch"]:
            return self._datasketch_kernel(data, offsets, cpmap, sig, counts)
        _minhash_kernel(data, offsets, cpmap, self.ngram, self._family, self.a, self.a_lo, self.a_hi, self.b, sig, counts)

    def _datasketch_kernel(self, data, offsets, cpmap, sig, counts):
        offsets = np.ascontiguousarray(offsets)
        out = np.empty(2 * int(offsets[-1] - offsets[0]) + len(offsets), np.uint8)
        out_off = np.empty(len(offsets), np.int64)
        _normalized_utf8(data, offsets, cpmap, out, out_off)
        buf = out.tobytes()
        hv, hv_off = [], [0]
        for d in range(len(offsets) - 1):
            words = buf[out_off[d]:out_off[d + 1]].split(b" ") if out_off[d + 1] > out_off[d] else []
            n = self.ngram if len(words) >= self.ngram else len(words)
            count = len(words) - n + 1 if words else 0
            hv.extend(int.from_bytes(hashlib.sha1(b" ".join(words[i:i + n])).digest()[:4], "little") for i in range(count))
            hv_off.append(len(hv))
            counts[d] = count
        _legacy_kernel(np.asarray(hv, np.uint64), np.asarray(hv_off, np.int64), self.a, self.b, sig)

    def signatures(self, texts) -> tuple[np.ndarray, np.ndarray]:
        """(uint64[n, num_perm] signatures, int64[n] shingle counts); a document without shingles
        has count 0 and an all-ones signature that the stage never puts in a bucket."""
        data, offsets = text_buffers(texts)
        n = len(offsets) - 1
        sig = np.empty((n, self.num_perm), np.uint64)
        counts = np.empty(n, np.int64)
        cpmap = code_point_map()
        for lo in range(0, n, self.batch_docs):
            hi = min(n, lo + self.batch_docs)
            self._kernel(data, offsets[lo:hi + 1], cpmap, sig[lo:hi], counts[lo:hi])
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
            self._kernel(data, offsets[lo:hi + 1], cpmap, s, counts[lo:hi])
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


@functools.lru_cache(maxsize=64)
def datasketch_bands(threshold: float, num_perm: int, weights: tuple[float, float] = (0.5, 0.5)) -> tuple[int, int]:
    """(bands, rows) exactly as ``datasketch.MinHashLSH(threshold, num_perm, weights)`` picks them (its
    weighted integrals of false positives over [0, t] and false negatives over [t, 1]); read from the
    index datasketch builds, so it follows datasketch's own optimisation whatever its version."""
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    from datasketch import MinHashLSH

    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm, weights=tuple(weights))
    return int(lsh.b), int(lsh.r)


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
