"""Signatures per shard group, then LSH buckets per hash range: candidate edges without an in-memory index.

Both steps are the partitioned shuffle of ``curate.shuffle``:

1. ``signature_task`` (one per group of consecutive shards): the band hashes of every document with
   at least one shingle, as (band hash, doc) records in document order, written as ONE file
   ``sig/GGGGG.arrow`` holding one record batch per range of the 64-bit hash space. Its marker
   ``sig/GGGGG.json`` holds the group's row counts per shard.
2. ``bucket_task`` (one per range): its batch of every group's file (nothing else), merged by a
   sort: equal band hashes are one bucket, its documents in input order (shard, then row). Each
   bucket emits a star of edges from its first document to the others, which connects the bucket
   exactly as all its pairs would. ``edges/RRRRR.npy`` holds the range's edges (document keys,
   ``shard << 32 | row``), sorted and unique.

A band hash mixes in its band number, so the buckets of all bands share one key space; two
documents meet only if one of their band hashes is equal (a 64-bit collision between different
bands is as unlikely as one inside a band). Everything is ordered by document key, so the edges are
the same for any number of workers and any order in which tasks finish.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from curate import shuffle
from curate.schema import TEXT
from curate.shards import read_shard, write_json
from curate.stages.minhash.signatures import MinHasher
from curate.stages.minhash.store import load_npy, save_npy

SIG = pa.schema([("hash", pa.uint64()), ("doc", pa.uint64())])
_HASHERS: dict = {}


def hasher(bands: int, rows: int, ngram: int, seed: int, family: str) -> MinHasher:
    key = (bands, rows, ngram, seed, family)
    if key not in _HASHERS:
        _HASHERS[key] = MinHasher(bands, rows, ngram, seed, family)
    return _HASHERS[key]


@dataclass(frozen=True)
class PlanSettings:
    """What the plan's tasks need of the stage: the banding it chose, and what the cluster tasks need."""

    bands: int
    rows: int
    ngram: int
    seed: int
    family: str
    quality_column: str = ""
    verify: bool = False
    verify_threshold: float = 0.0
    cluster_groups: int = 0  # known once the components are: set for the members and later tasks


def job_hasher(job: shuffle.PlanJob) -> MinHasher:
    s = job.settings
    return hasher(s.bands, s.rows, s.ngram, s.seed, s.family)


def signature_task(job: shuffle.PlanJob) -> dict:
    """Band hashes of one shard group, partitioned by hash range. Skipped when its marker exists (resume)."""
    plan_dir = Path(job.plan_dir)
    out, marker, info = shuffle.task_output(plan_dir, "sig", job.group)
    if info is not None:
        return info
    layout = shuffle.load_layout(plan_dir)
    first = layout.bounds[job.group]
    mh = job_hasher(job)
    hashes, docs, rows, with_sh, shingles = [], [], [], 0, 0
    for i, path in enumerate(job.inputs):
        texts = read_shard(path, columns=[TEXT]).column(TEXT)
        bands, counts = mh.bands_of(texts)
        valid = np.flatnonzero(counts > 0)
        hashes.append(bands[valid].reshape(-1))
        docs.append(np.repeat(shuffle.doc_keys(first + i, valid), mh.bands))
        rows.append(int(len(counts)))
        with_sh += int(len(valid))
        shingles += int(counts.sum())
    h = np.concatenate(hashes) if hashes else np.zeros(0, np.uint64)
    d = np.concatenate(docs) if docs else np.zeros(0, np.uint64)
    shuffle.write_parts(pa.table({"hash": h, "doc": d}, schema=SIG), shuffle.key_range(h, layout.ranges), layout.ranges, out)
    info = {"rows": rows, "with_shingles": with_sh, "shingles": shingles}
    write_json(info, marker)
    return info


SLICE_RECORDS = 1 << 16  # a bucket task sorts its records in slices of about this many (they fit in a CPU cache)


def bucket_task(job: shuffle.PlanJob) -> dict:
    """Candidate edges of one hash range, over all bands and shard groups."""
    plan_dir = Path(job.plan_dir)
    out = plan_dir / "edges" / f"{job.range:05d}.npy"
    if out.exists():
        return {"edges": int(load_npy(out).shape[0]), "buckets": None}
    layout = shuffle.load_layout(plan_dir)
    t = shuffle.read_part(shuffle.numbered(plan_dir, "sig", layout.groups), job.range, SIG)
    firsts, members, buckets = [], [], 0
    for hs, gs in hash_slices(t.column("hash").to_numpy(), t.column("doc").to_numpy()):
        order = np.argsort(hs, kind="stable")  # records come in document order (groups in shard order): so do a bucket's
        hs, gs = hs[order], gs[order]
        start = np.ones(len(hs), bool)
        start[1:] = hs[1:] != hs[:-1]
        first = np.maximum.accumulate(np.where(start, np.arange(len(hs)), 0))
        member = ~start
        buckets += int(np.count_nonzero(start[:-1] & member[1:])) if len(hs) > 1 else 0
        firsts.append(gs[first[member]])
        members.append(gs[member])
    e = shuffle.unique_pairs(np.concatenate(firsts) if firsts else np.zeros(0, np.uint64),
                             np.concatenate(members) if members else np.zeros(0, np.uint64))
    save_npy(e, out)
    return {"edges": int(len(e)), "buckets": buckets}


def hash_slices(hashes: np.ndarray, docs: np.ndarray):
    """(hashes, docs) in slices of about ``SLICE_RECORDS`` by the hashes' low bits: equal hashes share a
    slice, records keep their order inside it (a radix sort), so that sorting a range costs the same per
    record whatever the range's size (one large sort's memory traffic grows past the caches)."""
    slices = 1 << min(16, max(0, int(np.ceil(np.log2(max(1.0, len(hashes) / SLICE_RECORDS))))))
    if slices == 1:
        yield hashes, docs
        return
    low = (hashes & np.uint64(slices - 1)).astype(np.uint16)
    order = np.argsort(low, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(low, minlength=slices))])
    hashes, docs = hashes[order], docs[order]
    for a, b in zip(bounds[:-1], bounds[1:]):
        yield hashes[a:b], docs[a:b]
