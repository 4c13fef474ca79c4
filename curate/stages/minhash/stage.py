"""``minhash_dedup``: fuzzy deduplication with MinHash signatures and LSH banding (MT-NLG / NeMo Curator).

Pipeline keys (all optional)::

    [[stages]]
    type = "minhash_dedup"
    bands = 20          # b: LSH bands ...
    rows = 13           # r: ... of r rows each: b * r = 260 permutations
    threshold = 0.8     # instead: choose b and r (b * r <= bands * rows) for this Jaccard; prints the S-curve
    ngram = 5           # word n-gram shingles
    verify = false      # check every member against its representative with the exact shingle Jaccard
    verify_threshold = 0.0  # the Jaccard a member needs; 0 = `threshold` if given, else where P(s) = 0.5
    seed = 42           # permutations
    permutation = "multiply_shift"  # or "mod_prime": (a*x + b) mod 2^61-1, as datasketch (2.5x slower here)
    quality_column = "quality_score"  # representative: highest score, ties to the smallest id

Documents set aside get reason ``near_duplicate`` and ``duplicate_of`` = the representative's id.

The plan, under ``plan_dir`` (every part written atomically and skipped when present, so a killed
plan resumes where it stopped; the same parts for any number of workers):

- ``config.json`` the parameters and inputs; a plan with other ones is discarded
- ``sig/``        band hashes per shard, sorted per band                    (one task per shard)
- ``edges/``      candidate edges per range of band-hash values              (one task per range)
- ``components.npy``  union-find labels (-1 for documents with no candidate)  (in the planning process)
- ``members/``    documents with candidates, grouped by component           (one task per shard)
- ``clusters/``   clusters, representatives, Jaccard, snippets              (one task per group)
- ``drops/``      per group: the documents set aside, one IPC batch per shard
- ``assign/``     per shard: rows set aside and their representative's id   (one task per shard)
- ``minhash_stats.json``  the plan's statistics, written last

``curate clusters OUT --show N`` reads ``clusters/``. See the package modules for each step.
"""
from __future__ import annotations


import math
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from curate.shards import claim_plan_dir, read_json, read_shard, write_json
from curate.stages.base import GlobalStage, StageResult, split
from curate.stages.minhash.buckets import bucket_task, sig_paths, signature_task
from curate.stages.minhash.clusters import assign_task, cluster_task, connected_components, members_task
from curate.stages.minhash.shingles import MAX_NGRAM
from curate.stages.minhash.signatures import (
    DEFAULT_BANDS, DEFAULT_ROWS, FAMILIES, choose_bands, format_s_curve, s50, s_curve_table,
)
from curate.stages.minhash.store import save_npy

REASON = "near_duplicate"
STATS_FILE = "minhash_stats.json"
MIN_TASK_ROWS = 4096  # a bucket range or cluster group holds at least this many documents per band


@dataclass
class Params:
    bands: int = DEFAULT_BANDS
    rows: int = DEFAULT_ROWS
    threshold: float = 0.0
    ngram: int = 5
    verify: bool = False
    verify_threshold: float = 0.0
    seed: int = 42
    permutation: str = "multiply_shift"
    quality_column: str = "quality_score"

    def __post_init__(self):
        if self.bands < 1 or self.rows < 1:
            raise ValueError(f"bands and rows must be >= 1 (got {self.bands} x {self.rows})")
        if self.threshold and not 0.0 < self.threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1), got {self.threshold}")
        if self.verify_threshold and not 0.0 < self.verify_threshold <= 1.0:
            raise ValueError(f"verify_threshold must be in (0, 1], got {self.verify_threshold}")
        if not 1 <= self.ngram <= MAX_NGRAM:
            raise ValueError(f"ngram must be in [1, {MAX_NGRAM}], got {self.ngram}")
        if self.permutation not in FAMILIES:
            raise ValueError(f"permutation = {self.permutation!r}; allowed: {', '.join(FAMILIES)}")


class MinHashDedup(GlobalStage):
    Params = Params
    report_parts = ("clusters", STATS_FILE, "config.json")  # `curate clusters` reads these after the run

    def banding(self) -> tuple[int, int]:
        p = self.params
        if p.threshold:
            return choose_bands(p.threshold, p.bands * p.rows)
        return p.bands, p.rows

    def verify_threshold(self) -> float:
        p = self.params
        if p.verify_threshold:
            return p.verify_threshold
        if p.threshold:
            return p.threshold
        return s50(*self.banding())

    def plan(self, inputs, plan_dir: Path, executor) -> dict:
        plan_dir = Path(plan_dir)
        inputs = [str(p) for p in inputs]
        b, r = self.banding()
        p = self.params
        config = {"params": asdict(p), "bands": b, "rows": r, "inputs": inputs}
        claim_plan_dir(plan_dir, config, _PARTS)
        if (plan_dir / STATS_FILE).exists():
            return read_json(plan_dir / STATS_FILE)
        print(f"{self.name}: " + format_s_curve(b, r), file=sys.stderr, flush=True)
        seconds = {}
        base = {"plan_dir": str(plan_dir), "bands": b, "rows": r, "ngram": p.ngram, "seed": p.seed, "family": p.permutation}

        t0 = time.perf_counter()
        infos = executor.map(signature_task, [{**base, "index": i, "input": s} for i, s in enumerate(inputs)],
                             desc=f"{self.name}: signatures")
        rows = [inf["rows"] for inf in infos]
        offsets = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
        n = int(offsets[-1])
        seconds["signatures"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        with_sh = sum(inf["with_shingles"] for inf in infos)
        target = max(max(rows, default=0), MIN_TASK_ROWS)
        ranges = max(1, math.ceil(with_sh / target))
        jobs = [{**base, "range": k, "ranges": ranges, "offsets": [int(o) for o in offsets[:-1]]} for k in range(ranges)]
        binfo = executor.map(bucket_task, jobs, desc=f"{self.name}: buckets")
        edges = sum(x["edges"] for x in binfo)
        seconds["buckets"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        comp_path = plan_dir / "components.npy"
        if not comp_path.exists():
            roots = connected_components(n, [plan_dir / "edges" / f"{k:05d}.npy" for k in range(ranges)])
            size = np.bincount(roots, minlength=n)
            save_npy(np.where(size[roots] >= 2, roots, -1), comp_path)
        comp = np.load(comp_path)
        comp = comp[comp >= 0]
        candidates, components = int(len(comp)), int(len(np.unique(comp)))
        del comp
        seconds["components"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        groups = max(1, math.ceil(candidates / target))
        mjobs = [{**base, "index": i, "input": s, "offset": int(offsets[i]), "rows": rows[i], "groups": groups,
                  "quality_column": p.quality_column} for i, s in enumerate(inputs)]
        executor.map(members_task, mjobs, desc=f"{self.name}: members")
        cjobs = [{**base, "group": g, "shards": len(inputs), "verify": p.verify, "offsets": [int(o) for o in offsets[:-1]],
                  "verify_threshold": self.verify_threshold()} for g in range(groups)]
        cinfo = executor.map(cluster_task, cjobs, desc=f"{self.name}: clusters")
        ajobs = [{"plan_dir": str(plan_dir), "index": i, "groups": groups} for i in range(len(inputs))]
        duplicates = sum(executor.map(assign_task, ajobs, desc=f"{self.name}: assign"))
        seconds["clusters"] = time.perf_counter() - t0

        stats = {
            "documents": n,
            "documents_without_shingles": n - with_sh,
            "bands": b, "rows": r, "permutations": b * r, "permutation_family": p.permutation, "ngram": p.ngram,
            "s50": round(s50(b, r), 4), "s_curve": s_curve_table(b, r),
            "verify": p.verify, "verify_threshold": round(self.verify_threshold(), 4) if p.verify else None,
            "candidate_edges": edges,
            "documents_with_candidates": candidates,
            "components": components,
            "clusters": sum(c["clusters"] for c in cinfo),
            "duplicates": duplicates,
            "verify_rejected": sum(c["rejected"] for c in cinfo),
            "bucket_ranges": ranges, "cluster_groups": groups,
            "phase_seconds": {k: round(v, 3) for k, v in seconds.items()},
        }
        write_json(stats, plan_dir / STATS_FILE)
        return stats

    def apply_with_plan(self, table: pa.Table, shard_index: int, plan_dir: Path) -> StageResult:
        plan_dir = Path(plan_dir)
        info = read_json(sig_paths(plan_dir, shard_index)[2])
        if info["rows"] != table.num_rows:
            raise RuntimeError(f"{self.name}: shard {shard_index} has {table.num_rows} rows but the plan saw {info['rows']}")
        drops = read_shard(plan_dir / "assign" / f"{shard_index:05d}.arrow")
        reasons: list = [None] * table.num_rows
        dup_of: list = [None] * table.num_rows
        for row, rep in zip(drops.column("row").to_pylist(), drops.column("duplicate_of").to_pylist()):
            reasons[row], dup_of[row] = REASON, rep
        return split(table, self.name, reasons, dup_of)

    def apply(self, table: pa.Table) -> StageResult:
        raise RuntimeError("minhash_dedup is a global stage: it runs as plan + apply_with_plan (the pipeline runner does this)")


_PARTS = ("sig", "edges", "members", "clusters", "drops", "assign", "components.npy", STATS_FILE)


