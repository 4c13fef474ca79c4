"""`curate clusters OUT --show N`: the largest near-duplicate clusters that ``minhash_dedup`` found.

OUT is a curation output folder (or a plan folder itself). For every ``minhash_dedup`` plan under
``OUT/plans/`` it prints the N largest clusters (``curate.stages.minhash.inspect``).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from curate.commands.argtypes import INT64, positive, whole
from curate.shards import read_json
from curate.stages.minhash.inspect import find_plans, format_clusters, load_clusters
from curate.stages.minhash.stage import STATS_FILE

EPILOG = """examples (after `make demo`):
  curate clusters out/demo/curated/web --show 5
  curate clusters out/demo/curated/web --show 2 --members 3 --width 60
"""


def add_arguments(p) -> None:
    p.epilog, p.formatter_class = EPILOG, argparse.RawDescriptionHelpFormatter
    p.add_argument("output", help="curation output folder (holds plans/), or a minhash_dedup plan folder")
    p.add_argument("--show", type=positive(), default=5, metavar="N",
                   help="how many clusters to print, largest first (default 5)")
    p.add_argument("--members", type=whole(meaning="0: each cluster's size line only"), default=10, metavar="M",
                   help="members printed per cluster (default 10; 0: only each cluster's line)")
    p.add_argument("--width", type=positive(), default=100, help="characters of text per member (default 100)")
    p.add_argument("--cluster", type=whole(0, INT64), action="append", metavar="ID",
                   help="print this cluster (repeatable) instead of the largest")


def run(args) -> int:
    root = Path(args.output)
    if not root.exists():
        print(f"curate clusters: {root} does not exist", file=sys.stderr)
        return 2
    plans = find_plans(root)
    if not plans:
        print(f"curate clusters: no minhash_dedup plan under {root} (looked for plans/*/{STATS_FILE})", file=sys.stderr)
        return 1
    found: set[int] = set()
    for plan in plans:
        stats = read_json(plan / STATS_FILE)
        print(f"{plan}: {stats['documents']} documents, {stats['clusters']} clusters, {stats['duplicates']} set aside "
              f"({stats['bands']} bands x {stats['rows']} rows, verify={stats['verify']})")
        t = load_clusters(plan)
        if t is None:
            print("  no clusters")
            continue
        text = format_clusters(t, args.show, args.members, args.width, args.cluster)
        if args.cluster:
            ids = set(t.filter(t.column("is_representative")).column("cluster").to_pylist())
            here = [c for c in args.cluster if c in ids]
            found.update(here)
            absent = [c for c in dict.fromkeys(args.cluster) if c not in ids]
            if absent:
                text += ("\n" if text else "") + f"  no cluster {', '.join(map(str, absent))} in this plan"
        print(text)
    if args.cluster:
        missing = [c for c in dict.fromkeys(args.cluster) if c not in found]
        if missing:
            print(f"curate clusters: no cluster {', '.join(map(str, missing))} under {root} (a cluster's id is "
                  "the number after `cluster` in this command's output)", file=sys.stderr)
            return 1
    return 0
