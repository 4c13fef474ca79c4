"""``minhash_dedup``: fuzzy deduplication with MinHash signatures and LSH banding (MT-NLG / NeMo Curator).

Pipeline keys (all optional)::

    [[stages]]
    type = "minhash_dedup"
    bands = 20          # b: LSH bands ...
    rows = 13           # r: ... of r rows each: b * r = 260 permutations
    threshold = 0.8     # instead: choose b and r (b * r <= bands * rows) for this Jaccard; prints the S-curve
    band_choice = "datasketch"  # how `threshold` picks (b, r): datasketch's MinHashLSH optimisation
                        # (weighted integrals of false positives over [0, t] and negatives over [t, 1]),
                        # or "window": the mean error over [t - 0.1, t + 0.1] (Quarry before this key)
    lsh_weights = [0.5, 0.5]  # datasketch's (false positive, false negative) weights
    ngram = 5           # word n-gram shingles
    verify = false      # check every member against its representative with the exact shingle Jaccard
    verify_threshold = 0.0  # the Jaccard a member needs; 0 = `threshold` if given, else where P(s) = 0.5
                        # (only with verify = true)
    seed = 42           # permutations
    permutation = "multiply_shift"  # or "mod_prime": exact (a*x + b) mod 2^61-1 (slower),
                        # or "datasketch": signatures equal to datasketch.MinHash(num_perm, seed,
                        # scheme="legacy") fed the shingles' UTF-8 bytes (slowest: SHA-1 per shingle)
    quality_column = "quality_score"  # representative: highest score, ties to the smallest id; a column of
                        # numbers ("" = none; id, text, source, url, content_type, lang are refused): a null,
                        # NaN or non-numeric value is a missing score and ranks last

Documents set aside get reason ``near_duplicate`` and ``duplicate_of`` = the representative's id.

The plan, under ``plan_dir`` (every part written atomically and skipped when present, so a killed
plan resumes where it stopped; the same parts for any number of workers). It is the partitioned
shuffle of ``curate.shuffle``: G shard groups (consecutive shards, about 64 MiB of input each), R
hash ranges and C cluster groups, all sized by the data, not by the shard count; no task reads
every shard:

- ``config.json``, ``layout.json``  the parameters, inputs and their cut into groups and ranges
- ``sig/``        per shard group: band hashes, one batch per hash range       (G tasks)
- ``edges/``      per hash range: candidate edges                               (R tasks)
- ``offsets.npy``, ``components.npy``  union-find labels (-1: no candidate)     (one task)
- ``members/``    per shard group: documents with candidates, one batch per cluster group  (G tasks)
- ``clusters/``   per cluster group: clusters, representatives, Jaccard, snippets (C tasks)
- ``drops/``      per cluster group: the documents set aside, one batch per shard group
- ``assign/``     per shard group: rows set aside and their representative's id, one batch per shard (G tasks)
- ``minhash_stats.json``  the plan's statistics, written last

``curate clusters OUT --show N`` reads ``clusters/`` (keep the plan: ``keep_plans = true``).
"""
from __future__ import annotations

import math
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import pyarrow as pa

from curate import shuffle
from curate.schema import CONTENT_TYPE, DUPLICATE_OF, ID, LANG, REASON, SOURCE, STAGE, TEXT, URL
from curate.shards import claim_plan_dir, read_json, write_json
from curate.stages.base import GlobalStage, StageResult, split
from curate.stages.minhash.buckets import PlanSettings, bucket_task, signature_task
from curate.stages.minhash.clusters import ASSIGN_SCHEMA, CLUSTER_ROWS, assign_task, cluster_task, components_task, members_task
from curate.stages.minhash.shingles import MAX_NGRAM
from curate.stages.minhash.signatures import (
    DEFAULT_BANDS, DEFAULT_ROWS, FAMILIES, choose_bands, datasketch_bands, format_s_curve, s50, s_curve_table,
)
from curate.stages.minhash.store import load_npy

REASON = "near_duplicate"
REASONS = {REASON: "in a cluster of near duplicates and not its representative (`duplicate_of` names it)"}
STATS_FILE = "minhash_stats.json"
BAND_CHOICES = ("datasketch", "window")


# Columns known to hold text, never a score (the base schema's, langid's `lang`, a set-aside row's): refused as
# quality_column at start. Another column that holds no numbers is read as missing scores (clusters.quality_scores).
TEXT_COLUMNS = {ID: "the document's id", TEXT: "the document's text", SOURCE: "the input file",
                URL: "the page URL", CONTENT_TYPE: "text/html or text/plain", LANG: "langid's language code",
                STAGE: "a set-aside row's stage", REASON: "a set-aside row's reason",
                DUPLICATE_OF: "a set-aside row's representative"}

MAX_PERMUTATIONS = 1024  # bands x rows at most (datasketch's default is 128)


@dataclass
class Params:
    bands: int = DEFAULT_BANDS  # b: LSH bands ...
    rows: int = DEFAULT_ROWS  # r: ... of r rows each: b * r permutations
    threshold: float = 0.0  # > 0: choose b and r (b * r <= bands * rows) for this Jaccard instead
    band_choice: str = "datasketch"  # how threshold picks (b, r): "datasketch" (MinHashLSH's optimisation) or "window"
    # datasketch's (false positive, false negative) weights for band_choice
    lsh_weights: list[float] = field(default_factory=lambda: [0.5, 0.5])
    ngram: int = 5  # word n-gram shingles
    verify: bool = False  # check every member against its representative with the exact shingle Jaccard
    # the Jaccard a member needs (only with verify = true); 0 = threshold if given, else where P(s) = 0.5
    verify_threshold: float = 0.0
    seed: int = 42  # seed of the permutations
    # "multiply_shift", "mod_prime" (exact, slower) or "datasketch" (its legacy signatures)
    permutation: str = "multiply_shift"
    # the representative: highest score in this numeric column, ties to the smallest id; a null, NaN or non-numeric
    # value is a missing score (ranks last); "" = none; the text columns (id, text, source, url, lang...) are refused
    quality_column: str = "quality_score"

    def __post_init__(self):
        if self.bands < 1 or self.rows < 1:
            raise ValueError(f"bands and rows must be >= 1 (got {self.bands} x {self.rows})")
        if self.threshold and not 0.0 < self.threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1), got {self.threshold}")
        if self.verify_threshold and not 0.0 < self.verify_threshold <= 1.0:
            raise ValueError(f"verify_threshold must be in (0, 1], got {self.verify_threshold}")
        if self.verify_threshold and not self.verify:  # it would be recorded and do nothing
            raise ValueError(f"verify_threshold = {self.verify_threshold} is used only with verify = true: set "
                             f"verify = true, or remove verify_threshold")
        if self.quality_column in TEXT_COLUMNS:
            raise ValueError(f"quality_column = {self.quality_column!r} is a text column ({TEXT_COLUMNS[self.quality_column]}), "
                             f"not a score: name a numeric column (e.g. \"quality_score\", written by the "
                             f"quality stage), or \"\" to choose representatives by smallest id")
        if not 1 <= self.ngram <= MAX_NGRAM:
            raise ValueError(f"ngram must be in [1, {MAX_NGRAM}], got {self.ngram}")
        if not 0 <= self.seed < 2 ** 32:  # numpy's PCG64 refuses a negative seed, datasketch one of 2**32 or more
            raise ValueError(f"seed = {self.seed}: must be in [0, 2**32 - 1]")
        if self.band_choice not in BAND_CHOICES:
            raise ValueError(f"band_choice = {self.band_choice!r}; allowed: {', '.join(BAND_CHOICES)}")
        if len(self.lsh_weights) != 2 or min(self.lsh_weights) < 0 or abs(sum(self.lsh_weights) - 1.0) > 1e-9:
            raise ValueError(f"lsh_weights must be two non-negative numbers that sum to 1, got {self.lsh_weights}")
        if self.permutation not in FAMILIES:
            raise ValueError(f"permutation = {self.permutation!r}; allowed: {', '.join(FAMILIES)}")
        if self.bands * self.rows > MAX_PERMUTATIONS:
            raise ValueError(f"bands x rows = {self.bands} x {self.rows} = {self.bands * self.rows} permutations; at most "
                             f"{MAX_PERMUTATIONS} (each document keeps that many 64-bit hashes: the default "
                             f"is {DEFAULT_BANDS} x {DEFAULT_ROWS})")
        if self.threshold:  # the band search fails now, not after the read step
            try:
                MinHashDedup("minhash_dedup", self).banding()
            except ValueError as e:
                raise ValueError(f"threshold = {self.threshold} with bands x rows = {self.bands * self.rows} "
                                 f"permutations: {e}; allow more permutations (bands, rows) or set band_choice = "
                                 f"\"window\"") from None


class MinHashDedup(GlobalStage):
    Params = Params
    report_parts = ("clusters", STATS_FILE, "config.json")  # `curate clusters` reads these after the run

    def banding(self) -> tuple[int, int]:
        p = self.params
        if p.threshold and p.band_choice == "datasketch":
            return datasketch_bands(p.threshold, p.bands * p.rows, tuple(p.lsh_weights))
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
        layout = shuffle.make_layout(inputs)
        config = {"params": asdict(p), "bands": b, "rows": r, "inputs": inputs, "layout": shuffle.config_of(layout),
                  "cluster_rows": CLUSTER_ROWS}
        claim_plan_dir(plan_dir, config, _PARTS)
        if (plan_dir / STATS_FILE).exists():
            return read_json(plan_dir / STATS_FILE)
        shuffle.save_layout(layout, plan_dir)
        from curate.progress import quiet

        if not quiet():  # `curate run --quiet`: no progress, no tables (the banding is in the plan's stats)
            print(f"{self.name}: " + format_s_curve(b, r), file=sys.stderr, flush=True)
        seconds = {}
        settings = PlanSettings(b, r, p.ngram, p.seed, p.permutation, p.quality_column, p.verify, self.verify_threshold())
        groups = shuffle.group_jobs(plan_dir, settings, layout, inputs)

        t0 = time.perf_counter()
        infos = executor.map(signature_task, groups)
        n = sum(sum(inf["rows"]) for inf in infos)
        with_sh = sum(inf["with_shingles"] for inf in infos)
        seconds["signatures"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        binfo = executor.map(bucket_task, shuffle.range_jobs(plan_dir, settings, layout))
        edges = sum(x["edges"] for x in binfo)
        seconds["buckets"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        cc = executor.map(components_task, [shuffle.PlanJob(str(plan_dir), settings)])[0]
        candidates, components = cc["candidates"], cc["components"]
        seconds["components"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        cgroups = max(shuffle.MIN_RANGES if candidates else 1, math.ceil(candidates / CLUSTER_ROWS))
        settings = replace(settings, cluster_groups=cgroups)
        executor.map(members_task, shuffle.group_jobs(plan_dir, settings, layout, inputs))
        cinfo = executor.map(cluster_task, [shuffle.PlanJob(str(plan_dir), settings, group=c) for c in range(cgroups)])
        duplicates = sum(executor.map(assign_task, shuffle.group_jobs(plan_dir, settings, layout, inputs)))
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
            "shard_groups": layout.groups, "bucket_ranges": layout.ranges, "cluster_groups": cgroups,
            "phase_seconds": {k: round(v, 3) for k, v in seconds.items()},
        }
        write_json(stats, plan_dir / STATS_FILE)
        return stats

    def apply_with_plan(self, table: pa.Table, shard_index: int, plan_dir: Path, context=None) -> StageResult:
        plan_dir = Path(plan_dir)
        offsets = load_npy(plan_dir / "offsets.npy")
        rows = int(offsets[shard_index + 1] - offsets[shard_index])
        if rows != table.num_rows:
            raise RuntimeError(f"{self.name}: shard {shard_index} has {table.num_rows} rows but the plan saw {rows}")
        layout = shuffle.load_layout(plan_dir)
        g = layout.group_of(shard_index)
        drops = shuffle.read_part([plan_dir / "assign" / f"{g:05d}.arrow"], shard_index - layout.bounds[g], ASSIGN_SCHEMA)
        reasons: list = [None] * table.num_rows
        dup_of: list = [None] * table.num_rows
        for row, rep in zip(drops.column("row").to_pylist(), drops.column("duplicate_of").to_pylist()):
            reasons[row], dup_of[row] = REASON, rep
        return split(table, self.name, reasons, dup_of)



_PARTS = ("sig", "edges", "members", "clusters", "drops", "assign", "components.npy", "offsets.npy", shuffle.LAYOUT_FILE, STATS_FILE)
