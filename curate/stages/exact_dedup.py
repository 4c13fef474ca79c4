"""``exact_dedup``: drop documents whose text equals an earlier document's.

Plan: each shard's documents are hashed (64-bit BLAKE2b of the text with whitespace runs collapsed),
in parallel, one file per shard. The hashes of the whole corpus are then sorted; within every group
of equal hashes the texts themselves are compared, so a hash collision never drops a document.
The first occurrence in input order (shard, then row) is kept; the others are set aside with
reason ``exact_duplicate`` and ``duplicate_of`` naming the kept document's id. Memory: 24 bytes a
document for the hashes, plus the texts of the duplicate groups only.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from curate.schema import ID, TEXT
from curate.shards import read_shard, write_shard
from curate.stages.base import GlobalStage, StageResult, split

_WS = re.compile(r"\s+")


@dataclass
class Params:
    lowercase: bool = False  # also fold case before comparing


class ExactDedup(GlobalStage):
    Params = Params

    def plan(self, inputs, plan_dir: Path, executor) -> dict:
        plan_dir.mkdir(parents=True, exist_ok=True)
        jobs = [(str(p), str(plan_dir / f"hashes-{i:05d}.arrow"), self.params.lowercase) for i, p in enumerate(inputs)]
        executor.map(_hash_shard, jobs, desc=f"{self.name}: hashing")
        parts = [read_shard(j[1]) for j in jobs]
        hashes = np.concatenate([p.column("hash").to_numpy() for p in parts]) if parts else np.zeros(0, np.uint64)
        shard = np.concatenate([np.full(p.num_rows, i, np.int64) for i, p in enumerate(parts)]) if parts else np.zeros(0, np.int64)
        row = np.concatenate([np.arange(p.num_rows, dtype=np.int64) for p in parts]) if parts else np.zeros(0, np.int64)
        order = np.lexsort((row, shard, hashes))  # by hash, then input order
        h = hashes[order]
        dup = np.zeros(len(h), bool)
        dup[1:] = h[1:] == h[:-1]
        group_start = ~dup
        in_group = dup | np.r_[dup[1:], False]  # members of groups of two or more
        drops = _resolve_groups(inputs, order[in_group], shard, row, np.cumsum(group_start)[in_group], self.params.lowercase)
        for i in range(len(inputs)):
            rows = sorted((r, d) for (s, r), d in drops.items() if s == i)
            table = pa.table({"row": pa.array([r for r, _ in rows], pa.int64()), "duplicate_of": pa.array([d for _, d in rows], pa.string())})
            write_shard(table, plan_dir / f"drop-{i:05d}.arrow")
        return {"documents": int(len(h)), "duplicates": len(drops), "hash_collisions_checked": int(in_group.sum())}

    def apply_with_plan(self, table: pa.Table, shard_index: int, plan_dir: Path) -> StageResult:
        plan = read_shard(plan_dir / f"drop-{shard_index:05d}.arrow").to_pydict()
        reasons: list = [None] * table.num_rows
        dup_of: list = [None] * table.num_rows
        for r, d in zip(plan["row"], plan["duplicate_of"]):
            reasons[r], dup_of[r] = "exact_duplicate", d
        return split(table, self.name, reasons, dup_of)

    def apply(self, table: pa.Table) -> StageResult:
        raise RuntimeError("exact_dedup is a global stage: run it through the pipeline runner")


def normalized(text: str, lowercase: bool) -> str:
    text = _WS.sub(" ", text).strip()
    return text.lower() if lowercase else text


def _hash_shard(job: tuple) -> int:
    src, dst, lowercase = job
    if Path(dst).exists():
        return 0
    texts = read_shard(src, columns=[TEXT]).column(TEXT).to_pylist()
    hashes = np.fromiter(
        (int.from_bytes(hashlib.blake2b(normalized(t, lowercase).encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little") for t in texts),
        dtype=np.uint64, count=len(texts),
    )
    write_shard(pa.table({"hash": hashes}), dst)
    return len(texts)


def _resolve_groups(inputs, members, shard, row, group_ids, lowercase) -> dict:
    """Compare texts inside each equal-hash group; returns {(shard, row): id of the kept original}."""
    if len(members) == 0:
        return {}
    need: dict[int, list[int]] = {}
    for m in members:
        need.setdefault(int(shard[m]), []).append(int(row[m]))
    texts, ids = {}, {}
    for s, rows in need.items():
        t = read_shard(inputs[s], columns=[ID, TEXT]).take(pa.array(rows, pa.int64()))
        for r, i, x in zip(rows, t.column(ID).to_pylist(), t.column(TEXT).to_pylist()):
            ids[(s, r)], texts[(s, r)] = i, normalized(x, lowercase)
    drops = {}
    current, seen = None, {}
    for m, g in zip(members, group_ids):
        if g != current:
            current, seen = g, {}
        key = (int(shard[m]), int(row[m]))
        text = texts[key]
        if text in seen:
            drops[key] = ids[seen[text]]
        else:
            seen[text] = key
    return drops
