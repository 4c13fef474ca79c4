"""The block classifier: a small multi-layer perceptron over the block features, stored as JSON.

The model file (``curate/stages/models/extract_blocks.json``, written by ``curate.stages.extract_train``)
holds plain numbers only: feature means and scales, the layers' weights and biases, the keep threshold, and
the feature layout it was trained on (its count and a fingerprint of the feature names), so a model and a
feature extractor that disagree are refused at load time instead of giving silently wrong text. Loading
it executes nothing (``json.loads`` and numpy arrays).

Architecture (a block sees its neighbours and its DOM containers, not only itself):

1. ``h = relu(x W0 + b0)`` per block (``x`` standardised);
2. each *context layer*: ``h = relu([h, h(-2), h(-1), h(+1), h(+2), mean_g1(h), mean_g2(h), mean_g4(h),
   mean_g8(h), mean_page(h)] W + b)``, where ``h(k)`` is the block ``k`` places away on the page (zeros past the ends)
   and ``mean_gk`` the mean of ``h`` over the blocks under the same element ``k`` levels above the block's
   owner (``extract_features.GROUP_LEVELS``);
3. ``p = sigmoid(h Wout + bout)``.

Inference is numpy matrix products; the standardisation and the context layers' shifted copies and
container means run as numba-compiled loops (``_standardise``, ``_context_into``) that give the same
numbers, to the bit, as the plain-numpy statement of the context in ``segments`` / ``context``.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numba as nb
import numpy as np

FORMAT = "quarry-extract-blocks"
VERSION = 1
DEFAULT_MODEL = Path(__file__).resolve().parent / "models" / "extract_blocks.json"


class ModelError(ValueError):
    """The model file is missing, damaged, or was made for other features."""


def feature_fingerprint() -> str:
    """A fingerprint of the feature layout of ``curate.stages.extract_features``."""
    from curate.stages import extract_features as F

    layout = json.dumps([F.feature_names()], sort_keys=True)
    return hashlib.sha256(layout.encode()).hexdigest()[:16]


@dataclass
class BlockModel:
    mean: np.ndarray
    scale: np.ndarray
    weights: list[np.ndarray]
    biases: list[np.ndarray]
    threshold: float
    meta: dict
    _inv_scale: np.ndarray | None = field(default=None, repr=False, compare=False)

    def predict(self, x: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """Probability that each block (row of ``x``, all blocks of one page in order) is main content."""
        if len(x) == 0:
            return np.zeros(0, dtype=np.float32)
        if self._inv_scale is None:
            self._inv_scale = (1.0 / self.scale).astype(np.float32)
        h = _standardise(np.ascontiguousarray(x, dtype=np.float32), self.mean, self._inv_scale)
        seg, order, starts, inv_size = _segment_ids(np.ascontiguousarray(groups, dtype=np.int64))
        last = len(self.weights) - 1
        buf = None
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            if 0 < i < last:
                n, d = h.shape
                if buf is None or buf.shape[1] != d * CONTEXT_PARTS:
                    buf = np.empty((n, d * CONTEXT_PARTS), dtype=np.float32)
                _context_into(h, seg, order, starts, inv_size, buf)
                buf[:, -d:] = h.mean(axis=0)
                h = buf
            h = h @ w
            h += b
            if i < last:
                np.maximum(h, 0, out=h)
        return 1.0 / (1.0 + np.exp(-np.clip(h[:, 0], -30, 30)))

    def to_json(self) -> str:
        d = {"format": FORMAT, "version": VERSION, "n_features": int(self.mean.size),
             "features": feature_fingerprint(), "threshold": float(self.threshold),
             "mean": _round(self.mean), "scale": _round(self.scale),
             "layers": [{"w": _round(w), "b": _round(b)} for w, b in zip(self.weights, self.biases)],
             "meta": self.meta}
        return json.dumps(d, separators=(",", ":"))


SHIFTS = (-2, -1, 1, 2)
def _context_parts() -> int:
    from curate.stages.extract_features import GROUP_LEVELS

    return 1 + len(SHIFTS) + len(GROUP_LEVELS) + 1


CONTEXT_PARTS = _context_parts()


def segments(groups: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Per group column: (order, segment starts, 1/size per segment, segment of each block)."""
    out = []
    for k in range(groups.shape[1]):
        g = groups[:, k]
        order = np.argsort(g, kind="stable")
        sg = g[order]
        new = np.empty(len(g), dtype=bool)
        new[0] = True
        np.not_equal(sg[1:], sg[:-1], out=new[1:])
        starts = np.flatnonzero(new)
        seg_sorted = np.cumsum(new) - 1
        seg = np.empty_like(seg_sorted)
        seg[order] = seg_sorted
        sizes = np.diff(np.append(starts, len(g)))
        out.append((order, starts, (1.0 / sizes).astype(np.float32)[:, None], seg))
    return out


def context(h: np.ndarray, segs) -> np.ndarray:
    """[h, shifted copies, container means, page mean] for one page's blocks (``segs`` from ``segments``)."""
    n, d = h.shape
    out = np.empty((n, d * CONTEXT_PARTS), dtype=h.dtype)
    out[:, :d] = h
    c = d
    for s in SHIFTS:  # the block s places away; zeros past the page's ends
        k = min(abs(s), n)
        if s < 0:
            out[:k, c:c + d] = 0
            out[k:, c:c + d] = h[:n - k]
        else:
            out[n - k:, c:c + d] = 0
            out[:n - k, c:c + d] = h[k:]
        c += d
    for order, starts, inv_size, seg in segs:
        means = np.add.reduceat(h[order], starts, axis=0) * inv_size
        out[:, c:c + d] = means[seg]
        c += d
    out[:, c:c + d] = h.mean(axis=0)
    return out


# The same context as ``segments`` + ``context`` above (those stay as the plain-numpy statement of it, which
# the tests compare against), in compiled loops without the temporaries. The container means add up the
# blocks of a container in page order the way ``np.add.reduceat`` does (the first row, then numpy's pairwise
# sum of the others), so the numbers are the same to the bit.
@nb.njit(cache=True)
def _standardise(x, mean, inv_scale):
    """``(x - mean) * inv_scale`` in float32, one pass."""
    n, m = x.shape
    out = np.empty((n, m), dtype=np.float32)
    for i in range(n):
        for j in range(m):
            out[i, j] = (x[i, j] - mean[j]) * inv_scale[j]
    return out


@nb.njit(cache=True)
def _segment_ids(groups):
    """Per group column k: ``seg[k, i]``, the segment (0, 1, ... in order of first appearance) of block i;
    ``order[k]``, the blocks sorted by segment (page order inside one); ``starts[k, s]``, where segment s
    begins in ``order[k]`` (``starts[k, m] = n`` after the last one); ``inv_size[k, s]``, 1/size (float32)."""
    n, k_cols = groups.shape
    seg = np.empty((k_cols, n), dtype=np.int64)
    order = np.empty((k_cols, n), dtype=np.int64)
    starts = np.zeros((k_cols, n + 1), dtype=np.int64)
    inv_size = np.zeros((k_cols, n), dtype=np.float32)
    top = 1
    for k in range(k_cols):
        for i in range(n):
            top = max(top, groups[i, k] + 1)
    first = np.full(top, -1, dtype=np.int64)
    sizes = np.zeros(n + 1, dtype=np.int64)
    fill = np.zeros(n + 1, dtype=np.int64)
    for k in range(k_cols):
        m = 0
        for i in range(n):
            g = groups[i, k]
            s = first[g]
            if s < 0:
                s = m
                first[g] = m
                sizes[m] = 0
                m += 1
            seg[k, i] = s
            sizes[s] += 1
        pos = 0
        for s in range(m):
            starts[k, s] = pos
            fill[s] = pos
            pos += sizes[s]
            inv_size[k, s] = np.float32(1.0 / sizes[s])
        for s in range(m, n + 1):
            starts[k, s] = n
        for i in range(n):
            s = seg[k, i]
            order[k, fill[s]] = i
            fill[s] += 1
        for i in range(n):
            first[groups[i, k]] = -1
    return seg, order, starts, inv_size


@nb.njit(cache=True)
def _pairwise(h, order, a, n, j):
    """numpy's pairwise float32 sum of ``h[order[a:a+n], j]`` (``FLOAT_pairwise_sum``)."""
    if n < 8:
        res = np.float32(0.0)
        for i in range(n):
            res += h[order[a + i], j]
        return res
    if n <= 128:
        r0 = h[order[a], j]
        r1 = h[order[a + 1], j]
        r2 = h[order[a + 2], j]
        r3 = h[order[a + 3], j]
        r4 = h[order[a + 4], j]
        r5 = h[order[a + 5], j]
        r6 = h[order[a + 6], j]
        r7 = h[order[a + 7], j]
        i = 8
        while i < n - (n % 8):
            r0 += h[order[a + i], j]
            r1 += h[order[a + i + 1], j]
            r2 += h[order[a + i + 2], j]
            r3 += h[order[a + i + 3], j]
            r4 += h[order[a + i + 4], j]
            r5 += h[order[a + i + 5], j]
            r6 += h[order[a + i + 6], j]
            r7 += h[order[a + i + 7], j]
            i += 8
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < n:
            res += h[order[a + i], j]
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise(h, order, a, n2, j) + _pairwise(h, order, a + n2, n - n2, j)


@nb.njit(cache=True)
def _context_into(h, seg, order, starts, inv_size, out):
    """``context(h, segments(groups))`` written into ``out`` ([n, d * CONTEXT_PARTS], float32), all but its
    last ``d`` columns (the page mean)."""
    n, d = h.shape
    for i in range(n):
        for j in range(d):
            out[i, j] = h[i, j]
    c = d
    for s in (-2, -1, 1, 2):
        for i in range(n):
            src = i + s
            if 0 <= src < n:
                for j in range(d):
                    out[i, c + j] = h[src, j]
            else:
                for j in range(d):
                    out[i, c + j] = 0.0
        c += d
    mean = np.empty((n, d), dtype=np.float32)
    rest = np.empty(d, dtype=np.float32)
    for k in range(seg.shape[0]):
        s = 0
        while starts[k, s] < n:
            a = starts[k, s]
            size = starts[k, s + 1] - a
            f = inv_size[k, s]
            first = order[k, a]
            if size - 1 < 8:  # the pairwise sum of under 8 numbers: 0 + each in turn
                rest[:] = 0.0
                for i in range(a + 1, a + size):
                    r = order[k, i]
                    for j in range(d):
                        rest[j] += h[r, j]
            else:
                for j in range(d):
                    rest[j] = _pairwise(h, order[k], a + 1, size - 1, j)
            for j in range(d):
                mean[s, j] = (h[first, j] + rest[j]) * f
            s += 1
        for i in range(n):
            s = seg[k, i]
            for j in range(d):
                out[i, c + j] = mean[s, j]
        c += d
    # the last d columns, the page mean, are left to the caller (``h.mean(axis=0)``: numpy's own summation
    # order, which depends on d)


def _round(a: np.ndarray):
    return np.round(a.astype(np.float64), 6).tolist()


def from_json(text: str, source: str = "model") -> BlockModel:
    try:
        d = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ModelError(f"{source}: not a valid JSON model file ({e}); rebuild it with "
                         f"`python -m curate.stages.extract_train`") from None
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise ModelError(f"{source}: not a {FORMAT} model file")
    if d.get("version") != VERSION:
        raise ModelError(f"{source}: model version {d.get('version')}, this code reads version {VERSION}")
    want = feature_fingerprint()
    if d.get("features") != want:
        raise ModelError(f"{source}: trained on another feature layout ({d.get('features')}, this code: {want}); "
                         f"retrain with `python -m curate.stages.extract_train`")
    try:
        n = int(d["n_features"])
        mean = np.asarray(d["mean"], dtype=np.float32)
        scale = np.asarray(d["scale"], dtype=np.float32)
        weights = [np.asarray(layer["w"], dtype=np.float32) for layer in d["layers"]]
        biases = [np.asarray(layer["b"], dtype=np.float32) for layer in d["layers"]]
        threshold = float(d["threshold"])
    except (KeyError, TypeError, ValueError) as e:
        raise ModelError(f"{source}: damaged model file ({type(e).__name__}: {e})") from None
    if mean.shape != (n,) or scale.shape != (n,) or not weights or np.any(scale <= 0):
        raise ModelError(f"{source}: damaged model file (feature statistics do not match n_features={n})")
    rows = n
    for i, (w, b) in enumerate(zip(weights, biases)):
        if 0 < i < len(weights) - 1:
            rows *= CONTEXT_PARTS
        if w.ndim != 2 or w.shape[0] != rows or b.shape != (w.shape[1],):
            raise ModelError(f"{source}: damaged model file (layer {i} has shape {w.shape}, bias {b.shape})")
        rows = w.shape[1]
    if rows != 1:
        raise ModelError(f"{source}: damaged model file (the last layer must have one output)")
    for a in [mean, scale, *weights, *biases]:
        if not np.all(np.isfinite(a)):
            raise ModelError(f"{source}: damaged model file (non-finite numbers)")
    if not 0.0 < threshold < 1.0:
        raise ModelError(f"{source}: damaged model file (threshold {threshold})")
    return BlockModel(mean, scale, weights, biases, threshold, d.get("meta") or {})


def load(path: str | Path | None = None) -> BlockModel:
    p = Path(path) if path else DEFAULT_MODEL
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelError(f"model file {p} not found; build it with `python -m curate.stages.extract_train`") from None
    except UnicodeDecodeError:
        raise ModelError(f"{p}: damaged model file (not UTF-8 text)") from None
    return from_json(text, str(p))


@lru_cache(maxsize=4)
def cached(path: str = "") -> BlockModel:
    """The model at ``path`` (default: the shipped one), loaded once per process."""
    return load(path or None)
