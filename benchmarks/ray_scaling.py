#!/usr/bin/env python
"""Ray against the local pool, and the driver's cost per task on Ray.

    .venv/bin/python benchmarks/ray_scaling.py                       # 8,000 documents, 2 CPUs
    .venv/bin/python benchmarks/ray_scaling.py --docs 50000 --cpus 4 --tasks 2000 5000 10000 20000

Part 1: the same pipeline (normalize, langid, gopher_quality, gopher_repetition, c4_quality,
fineweb_quality, exact_dedup, minhash_dedup) over the same real-prose corpus (as in corpus_scale.py, 16
``.jsonl.gz`` files) on the local process pool with ``--cpus`` workers and on a local 2-node Ray cluster
(``ray.cluster_utils.Cluster``: a head and one worker node, ``--cpus / 2`` CPUs each), alternating, each run
into a fresh output folder. Prints docs/s of each and the ratio Ray / local (goal: >= 0.9); the cluster's
start-up is not counted. The shards of both are compared (they must be identical).

Part 2: ``RayExecutor.map`` over N empty tasks for each N of ``--tasks``: seconds per 1,000 tasks (goal:
flat from 2,000 to 20,000: completion handling is linear, at most ``max_in_flight`` tasks in flight).

The machine is shared with other jobs: the figures are wall-clock and noisy; run it twice before trusting
a difference. Nothing is asserted.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")  # Ray's workers import curate
os.environ.setdefault("TQDM_DISABLE", "1")

from corpus_scale import PIPELINE, PROSE, build  # noqa: E402


def empty(_):
    return None


def digests(out: Path) -> dict:
    m = json.loads((out / "manifest.json").read_text())
    return {e["path"]: e["sha256"] for e in m["shards"] + m["dropped"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=8000)
    ap.add_argument("--cpus", type=int, default=2, help="local workers = Ray cluster CPUs (split over 2 nodes)")
    ap.add_argument("--rounds", type=int, default=1, help="local/Ray pairs, alternating")
    ap.add_argument("--shard-rows", type=int, default=500)
    ap.add_argument("--tasks", type=int, nargs="+", default=[2000, 5000, 10000, 20000])
    ap.add_argument("--work", default="/tmp/ray_scaling")
    args = ap.parse_args(argv)

    import ray
    from ray.cluster_utils import Cluster

    from curate.executors.local import LocalExecutor
    from curate.executors.ray import RayExecutor
    from curate.pipeline import load_pipeline
    from curate.runner import run_pipeline

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    prose = next(p for p in PROSE if p.exists())
    print(f"machine load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (shared: figures are noisy)")
    _, many, text_bytes = build(args.docs, work, prose)
    inputs = str(many / "*.jsonl.gz")

    half = max(1, args.cpus // 2)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": half})
    cluster.add_node(num_cpus=max(1, args.cpus - half))
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        cluster.wait_for_nodes()
        ray_ex = RayExecutor()
        local_ex = LocalExecutor(args.cpus)
        rates = {"local": [], "ray": []}
        outs = {}
        for r in range(args.rounds):
            for name, ex in (("local", local_ex), ("ray", ray_ex)) if r % 2 == 0 else (("ray", ray_ex), ("local", local_ex)):
                out = work / f"out-{name}"
                shutil.rmtree(out, ignore_errors=True)
                toml = work / f"{name}.toml"
                toml.write_text(PIPELINE.format(out=out, workers=args.cpus, inputs=inputs, shard_rows=args.shard_rows))
                t0 = time.time()
                stats = run_pipeline(load_pipeline(toml), ex, progress=False)
                wall = time.time() - t0
                rates[name].append(stats["stages"][0]["in"] / wall)
                outs[name] = out
                print(f"  {name:>5}: {rates[name][-1]:8,.0f} docs/s ({wall:.1f}s, {text_bytes / 1e6 / wall:.1f} MB/s of text)")
        local_ex.close()
        same = digests(outs["local"]) == digests(outs["ray"])
        best = lambda xs: sorted(xs)[len(xs) // 2]
        print(f"pipeline, {args.docs:,} documents, {args.cpus} CPUs: Ray / local docs/s = "
              f"{best(rates['ray']) / best(rates['local']):.2f} (goal >= 0.9); identical shards: {same}")

        print("empty tasks on Ray (driver cost: submission + completion handling + result collection):")
        per = []
        for n in args.tasks:
            t0 = time.time()
            ray_ex.map(empty, range(n))
            per.append((time.time() - t0) / n * 1000)
            print(f"  {n:>7,} tasks: {per[-1]:.3f} s per 1,000")
        print(f"  largest / smallest count: {per[-1] / per[0]:.2f}x per task (goal: flat, ~1.0)")
    finally:
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
