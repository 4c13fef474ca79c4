"""The block classifier: a small multi-layer perceptron over the block features, stored as JSON.

The model file (``curate/extract/models/extract_blocks.json``, written by ``curate extractor train``)
holds plain numbers only: feature means and scales, the layers' weights and biases, the keep threshold, and
the feature layout it was trained on (its count and a fingerprint of the feature names), so a model and a
feature extractor that disagree are refused at load time instead of giving silently wrong text. Loading
it executes nothing (``json.loads`` and numpy arrays).

Architecture (a block sees its neighbours and its DOM containers, not only itself):

1. ``h = relu(x W0 + b0)`` per block (``x`` standardised);
2. each *context layer*: ``h = relu([h, h(-2), h(-1), h(+1), h(+2), mean_g1(h), mean_g2(h), mean_g4(h),
   mean_g8(h), mean_page(h), max_page(h)] W + b)``, where ``h(k)`` is the block ``k`` places away on the page
   (zeros past the ends), ``mean_gk`` the mean of ``h`` over the blocks under the same element ``k`` levels
   above the block's owner (``features.GROUP_LEVELS``), and ``max_page`` the largest value of each unit on the
   page (what the page's most content-like block shows, against which a block is judged);
3. ``p = sigmoid(h Wout + bout)``.

Inference is numpy matrix products and numba-compiled loops (``_sparse_product``, ``_segment_means``,
``_context_sum``): the standardisation is folded into the first layer, whose product adds up only the
features that are not zero (most are 0/1 flags); a context layer is computed from its parts (the blocks'
own and neighbours' weights in one product, each container's mean times its weights once per container),
the same function as the plain-numpy statement of the context in ``segments`` / ``context`` followed by
one product (float32 rounding aside: probabilities agree to about 1e-6).
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numba as nb
import numpy as np

from curate.extract.features import GROUP_LEVELS
from curate.json_files import JSONFileError, read_bytes

FORMAT = "quarry-extract-blocks"
VERSION = 2  # 2: context layers also read the page maximum (``max_page``)
DEFAULT_MODEL = Path(__file__).resolve().parent / "models" / "extract_blocks.json"


class ModelError(ValueError):
    """The model file is missing, damaged, or was made for other features."""


def feature_fingerprint() -> str:
    """A fingerprint of the feature layout of ``curate.extract.features``."""
    from curate.extract.features import feature_names

    layout = json.dumps([feature_names()], sort_keys=True)
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
    _split: list | None = field(default=None, repr=False, compare=False)
    _first: tuple | None = field(default=None, repr=False, compare=False)

    def predict(self, x: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """Probability that each block (row of ``x``, all blocks of one page in order) is main content.

        A context layer is linear in its parts, so it is computed without the [n, d * CONTEXT_PARTS] context
        matrix: ``h`` times the weights of the block itself and of its four neighbours at once, then shifted
        and added (``_context_sum``); the container means times their weights once per container, not once
        per block; the page mean once. The same function as ``context(h, segments(groups)) @ w``, summed in
        another order (float32 rounding aside). The page mean and maximum are the same for every block: their
        parts are added once, with the bias."""
        if len(x) == 0:
            return np.zeros(0, dtype=np.float32)
        if self._inv_scale is None:
            self._inv_scale = (1.0 / self.scale).astype(np.float32)
            self._split = [_split_context(w) if 0 < i < len(self.weights) - 1 else None
                           for i, w in enumerate(self.weights)]
            # the standardisation folded into the first layer: ((x - mean) / scale) W0 + b0 = x W0' + b0'
            w0 = self.weights[0].astype(np.float64)
            self._first = ((w0 / self.scale[:, None]).astype(np.float32),
                           (self.biases[0] - (self.mean / self.scale).astype(np.float64) @ w0).astype(np.float32))
        seg, order, starts, inv_size, n_segs = _segment_ids(np.ascontiguousarray(groups, dtype=np.int64))
        last = len(self.weights) - 1
        # most features are 0/1 flags, mostly 0: the product over the non-zero ones only (ReLU applied, but
        # in a model of one layer)
        h = _sparse_product(np.ascontiguousarray(x, dtype=np.float32), *self._first, last > 0)
        if last == 0:
            return 1.0 / (1.0 + np.exp(-np.clip(h[:, 0], -30, 30)))
        for i in range(1, last):
            local, per_group, page_mean, page_max = self._split[i]
            b = self.biases[i]
            hw = h @ local
            means = _segment_means(h, seg, inv_size)
            group_w = np.empty((len(per_group), len(x), b.size), dtype=np.float32)
            for k, wk in enumerate(per_group):  # rows past a level's segment count are never read
                np.matmul(means[k, :n_segs[k]], wk, out=group_w[k, :n_segs[k]])
            mean, top = _mean_max(h)
            h = _context_sum(hw, group_w, seg, mean @ page_mean + top @ page_max + b)  # (ReLU applied)
        return _output(h, self.weights[last], self.biases[last])

    def to_json(self) -> str:
        d = {"format": FORMAT, "version": VERSION, "n_features": int(self.mean.size),
             "features": feature_fingerprint(), "threshold": float(self.threshold),
             "mean": _round(self.mean), "scale": _round(self.scale),
             "layers": [{"w": _round(w), "b": _round(b)} for w, b in zip(self.weights, self.biases)],
             "meta": self.meta}
        return json.dumps(d, separators=(",", ":"))


SHIFTS = (-2, -1, 1, 2)
# the block, its neighbours, its containers, the page mean and the page maximum
CONTEXT_PARTS = 1 + len(SHIFTS) + len(GROUP_LEVELS) + 2


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
    """[h, shifted copies, container means, page mean, page maximum] for one page's blocks (``segs`` from
    ``segments``)."""
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
    out[:, c + d:] = h.max(axis=0)
    return out


# ``segments`` + ``context`` above are the plain-numpy statement of a context layer's input (what training
# computes and the tests compare against); inference computes the layer from its parts (``predict``).
@nb.njit(cache=True)
def _segment_ids(groups):
    """Per group column k: ``seg[k, i]``, the segment (0, 1, ... in order of first appearance) of block i;
    ``order[k]``, the blocks sorted by segment (page order inside one); ``starts[k, s]``, where segment s
    begins in ``order[k]`` (``starts[k, m] = n`` after the last one); ``inv_size[k, s]``, 1/size (float32);
    ``n_segs[k]``, the number of segments."""
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
    n_segs = np.zeros(k_cols, dtype=np.int64)
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
        n_segs[k] = m
    return seg, order, starts, inv_size, n_segs


def _split_context(w: np.ndarray):
    """A context layer's weights [d * CONTEXT_PARTS, d_out] by part: (the block's own and its neighbours'
    side by side [d, (1 + len(SHIFTS)) * d_out], one [d, d_out] per container level, the page mean's, the page
    maximum's)."""
    d = w.shape[0] // CONTEXT_PARTS
    parts = [w[k * d:(k + 1) * d] for k in range(CONTEXT_PARTS)]
    n_local = 1 + len(SHIFTS)
    local = np.ascontiguousarray(np.concatenate(parts[:n_local], axis=1))
    return (local, [np.ascontiguousarray(p) for p in parts[n_local:-2]], np.ascontiguousarray(parts[-2]),
            np.ascontiguousarray(parts[-1]))


@nb.njit(cache=True)
def _sparse_product(x, w, b, relu):
    """``x @ w + b`` (float32; ``relu``: ``max(x @ w + b, 0)``) adding up only the rows of ``w`` whose entry in
    ``x`` is not zero."""
    n, m = x.shape
    d = w.shape[1]
    out = np.empty((n, d), dtype=np.float32)
    for i in range(n):
        for k in range(d):
            out[i, k] = b[k]
        for j in range(m):
            v = x[i, j]
            if v != 0:
                for k in range(d):
                    out[i, k] += v * w[j, k]
        if relu:
            for k in range(d):
                if out[i, k] < 0:
                    out[i, k] = 0
    return out


@nb.njit(cache=True)
def _segment_means(h, seg, inv_size):
    """Per group column k and segment s: the mean of ``h`` over the blocks of s ([k, n, d]; rows past the
    column's segment count are zeros)."""
    n, d = h.shape
    k_cols = seg.shape[0]
    out = np.zeros((k_cols, n, d), dtype=np.float32)
    for k in range(k_cols):
        for i in range(n):
            s = seg[k, i]
            for j in range(d):
                out[k, s, j] += h[i, j]
        for s in range(n):
            f = inv_size[k, s]
            if f == 0:
                break
            for j in range(d):
                out[k, s, j] *= f
    return out


@nb.njit(cache=True)
def _context_sum(hw, group_w, seg, const):
    """A context layer's output: the block's own part ``hw[i, :d]`` plus its neighbours' (block ``i + s``'s
    part ``hw[i + s, ...]`` for each shift in ``SHIFTS``, nothing past the page's ends), plus each
    container level's ``group_w[k, seg[k, i]]``, plus ``const`` (page mean and maximum parts, and bias); ReLU
    applied."""
    n = hw.shape[0]
    d = const.size
    out = np.empty((n, d), dtype=np.float32)
    shifts = (-2, -1, 1, 2)
    for i in range(n):
        for j in range(d):
            out[i, j] = hw[i, j] + const[j]
        for t in range(4):
            src = i + shifts[t]
            if 0 <= src < n:
                c = (t + 1) * d
                for j in range(d):
                    out[i, j] += hw[src, c + j]
        for k in range(seg.shape[0]):
            g = seg[k, i]
            for j in range(d):
                out[i, j] += group_w[k, g, j]
        for j in range(d):
            if out[i, j] < 0:
                out[i, j] = 0
    return out


@nb.njit(cache=True)
def _mean_max(h):
    """``h.mean(axis=0)`` and ``h.max(axis=0)`` in one pass (float32; the rows added in order, as numpy does)."""
    n, d = h.shape
    total = np.zeros(d, dtype=np.float32)
    top = h[0].copy()
    for i in range(n):
        for j in range(d):
            v = h[i, j]
            total[j] += v
            if v > top[j]:
                top[j] = v
    return total / np.float32(n), top


@nb.njit(cache=True)
def _output(h, w, b):
    """The last layer, one unit: ``1 / (1 + exp(-clip(h @ w + b, -30, 30)))`` per block (float32)."""
    n, d = h.shape
    out = np.empty(n, dtype=np.float32)
    for i in range(n):
        z = np.float32(b[0])
        for j in range(d):
            z += h[i, j] * w[j, 0]
        z = min(max(z, np.float32(-30.0)), np.float32(30.0))
        out[i] = np.float32(1.0) / (np.float32(1.0) + np.exp(-z))
    return out


def _round(a: np.ndarray):
    return np.round(a.astype(np.float64), 6).tolist()


def from_json(text: str, source: str = "model") -> BlockModel:
    if json_depth(text) > MAX_JSON_DEPTH:
        raise ModelError(f"{source}: damaged model file (JSON nested deeper than {MAX_JSON_DEPTH} levels)")
    try:
        d = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise ModelError(f"{source}: not a valid JSON model file ({e}); rebuild it with "
                         f"`curate extractor train`") from None
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise ModelError(f"{source}: not a {FORMAT} model file")
    if d.get("version") != VERSION:
        raise ModelError(f"{source}: model version {d.get('version')}, this code reads version {VERSION}; "
                         f"retrain with `curate extractor train`")
    want = feature_fingerprint()
    if d.get("features") != want:
        raise ModelError(f"{source}: trained on another feature layout ({d.get('features')}, this code: {want}); "
                         f"retrain with `curate extractor train`")
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


MAX_MODEL_BYTES = 64 << 20  # the shipped model is under 1 MB; a model file larger than this is refused unread
MAX_JSON_DEPTH = 8  # the format nests 4 deep ({"layers": [{"w": [[...]]}]}); deeper is not a model file
_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def json_depth(text: str) -> int:
    """How deep ``[`` / ``{`` nest in a JSON text (strings skipped), counted without parsing it: deeply nested
    JSON makes ``json.loads`` recurse until ``RecursionError``."""
    depth = deepest = 0
    for m in _BRACKETS.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


def read_model_text(p: Path) -> str:
    """The model file's text, read only when it is a regular file of at most ``MAX_MODEL_BYTES`` (a path such
    as ``/dev/zero`` or a FIFO would be read until memory runs out); ``json_files.read_bytes`` reads it."""
    try:
        raw = read_bytes(p, MAX_MODEL_BYTES)
    except FileNotFoundError:
        raise ModelError(f"model file {p} not found; build it with `curate extractor train`") from None
    except (JSONFileError, OSError) as e:  # OSError: a name too long, no permission, a loop of links
        raise ModelError(f"model = {str(p)[:200]!r}: {e}; give the path of a model file (`curate extractor train` "
                         "writes one)") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ModelError(f"{p}: damaged model file (not UTF-8 text)") from None


def load(path: str | Path | None = None) -> BlockModel:
    p = Path(path) if path else DEFAULT_MODEL
    return from_json(read_model_text(p), str(p))


@lru_cache(maxsize=4)
def cached(path: str = "") -> BlockModel:
    """The model at ``path`` (default: the shipped one), loaded once per process."""
    return load(path or None)
