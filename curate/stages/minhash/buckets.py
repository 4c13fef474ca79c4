"""Signatures per shard, then LSH buckets per hash range: candidate edges without an in-memory index.

1. ``signature_task`` (one per input shard): the band hashes of every document, then for each band
   the pairs (band hash, row) sorted by hash (stable, so equal hashes stay in row order), written as
   ``sig/NNNNN.hash.npy`` and ``sig/NNNNN.row.npy`` (``[bands, documents with shingles]``).
2. ``bucket_task`` (one per range of the 64-bit hash space): for every band, the slice of every
   shard's sorted run that falls in the range (a binary search on a memory map), merged by a stable
   sort: equal band hashes are one bucket, its documents in global order (shard, then row). Each
   bucket emits a star of edges from its first document to the others, which connects the bucket
   exactly as all its pairs would. ``edges/RRRRR.npy`` holds the range's edges of all bands, sorted
   and unique. The number of ranges is chosen so that a range holds about as many (hash, document)
   pairs per band as the largest shard has documents: memory is bounded by a shard, not the corpus.

Global document index ``g`` = (documents in earlier shards) + row. Everything is ordered by it, so the
edges are the same for any number of workers and any order in which tasks finish.
"""
from __future__ import annotations

import numpy as np

from curate.schema import TEXT
from curate.shards import read_json, read_shard, write_json
from curate.stages.minhash.signatures import MinHasher
from curate.stages.minhash.store import load_npy, save_npy

_HASHERS: dict = {}


def hasher(bands: int, rows: int, ngram: int, seed: int, family: str) -> MinHasher:
    key = (bands, rows, ngram, seed, family)
    if key not in _HASHERS:
        _HASHERS[key] = MinHasher(bands, rows, ngram, seed, family)
    return _HASHERS[key]


def sig_paths(plan_dir, i: int):
    d = plan_dir / "sig"
    return d / f"{i:05d}.hash.npy", d / f"{i:05d}.row.npy", d / f"{i:05d}.json"


def signature_task(job: dict) -> dict:
    """Band hashes of one shard, sorted per band. Skipped when its marker exists (resume)."""
    from pathlib import Path

    plan_dir = Path(job["plan_dir"])
    hpath, rpath, marker = sig_paths(plan_dir, job["index"])
    if marker.exists() and hpath.exists() and rpath.exists():
        return read_json(marker)
    texts = read_shard(job["input"], columns=[TEXT]).column(TEXT)
    mh = hasher(job["bands"], job["rows"], job["ngram"], job["seed"], job["family"])
    bands, counts = mh.bands_of(texts)
    valid = np.flatnonzero(counts > 0)
    b = bands[valid].T  # [bands, valid]
    order = np.argsort(b, axis=1, kind="stable")
    save_npy(np.take_along_axis(b, order, axis=1), hpath)
    save_npy(valid.astype(np.uint32)[order], rpath)
    info = {"rows": int(len(counts)), "with_shingles": int(len(valid)), "shingles": int(counts.sum())}
    write_json(info, marker)
    return info


def range_bounds(k: int, n_ranges: int) -> tuple[int, int | None]:
    """[lo, hi) of range k of the 64-bit hash space; hi None means up to 2^64 - 1 inclusive."""
    lo = (k << 64) // n_ranges
    hi = ((k + 1) << 64) // n_ranges if k + 1 < n_ranges else None
    return lo, hi


def unique_edges(e: np.ndarray) -> np.ndarray:
    """Sorted unique rows of an int64 [m, 2] edge array."""
    if e[:, 0].max(initial=0) < (1 << 32) and e[:, 1].max(initial=0) < (1 << 32):
        key = np.unique((e[:, 0].astype(np.uint64) << np.uint64(32)) | e[:, 1].astype(np.uint64))
        return np.stack([(key >> np.uint64(32)).astype(np.int64), (key & np.uint64(0xFFFFFFFF)).astype(np.int64)], axis=1)
    return np.unique(e, axis=0)


def bucket_task(job: dict) -> dict:
    """Candidate edges of one hash range, over all bands and shards."""
    from pathlib import Path

    plan_dir = Path(job["plan_dir"])
    out = plan_dir / "edges" / f"{job['range']:05d}.npy"
    if out.exists():
        e = load_npy(out)
        return {"edges": int(e.shape[0]), "buckets": None}
    lo, hi = range_bounds(job["range"], job["ranges"])
    lo_u = np.uint64(lo)
    hi_u = np.uint64(hi) if hi is not None else None
    runs = []
    for i, offset in enumerate(job["offsets"]):
        hpath, rpath, _ = sig_paths(plan_dir, i)
        h = load_npy(hpath)
        if h.shape[1] == 0:
            continue
        runs.append((h, load_npy(rpath), offset))
    edges = []
    multi_buckets = 0
    for j in range(job["bands"]):
        hs, gs = [], []
        for h, r, offset in runs:
            a = int(np.searchsorted(h[j], lo_u, side="left"))
            z = int(np.searchsorted(h[j], hi_u, side="left")) if hi_u is not None else h.shape[1]
            if z > a:
                hs.append(np.asarray(h[j, a:z]))
                gs.append(np.asarray(r[j, a:z]).astype(np.int64) + offset)
        if not hs:
            continue
        hs = np.concatenate(hs)
        gs = np.concatenate(gs)
        order = np.argsort(hs, kind="stable")  # equal hashes keep shard order, rows ascending within
        hs, gs = hs[order], gs[order]
        start = np.ones(len(hs), bool)
        start[1:] = hs[1:] != hs[:-1]
        first = np.maximum.accumulate(np.where(start, np.arange(len(hs)), 0))
        member = ~start
        multi_buckets += int(np.count_nonzero(start[:-1] & member[1:])) if len(hs) > 1 else 0
        edges.append(np.stack([gs[first[member]], gs[member]], axis=1))
    e = np.concatenate(edges) if edges else np.zeros((0, 2), np.int64)
    if len(e):
        e = unique_edges(e)
    save_npy(e.astype(np.int64), out)
    return {"edges": int(len(e)), "buckets": multi_buckets}
