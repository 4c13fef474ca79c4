"""Tokenization on a cluster: MB/s per core of `pretrain tokenize --parts` on the local process pool against Ray at
the same number of CPUs (a local Ray instance with --cpus CPUs, started before the timing), on the same curated
shards, as ratios measured in one run; the parts of the two executors are checked to be byte-identical, and their
merge to equal the one-process `.bin/.idx`; then random reads of samples through the GPT dataset over the parts
against the merged file.

    .venv/bin/python benchmarks/tokenize_scaling.py              # ~2 minutes on 2 cores
    .venv/bin/python benchmarks/tokenize_scaling.py --mb 4 --rounds 1

MB/s per core = text MB / wall seconds / CPUs. The text is the shared prose corpus when it is there (else the test
sample), repeated up to --mb megabytes and cut into --shards shards; each figure is the best of --rounds.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def run_parts(cur: Path, tok, out: Path, executor, part_bytes: int) -> tuple[float, dict]:
    from pretrain.data.tokenize_parts import tokenize_to_parts

    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    stats = tokenize_to_parts(cur, tok.model_path, out, executor, part_bytes, log=lambda m: None)
    return time.perf_counter() - t, stats


def read_rates(parts: Path, merged: Path, rounds: int) -> dict:
    """Samples per second through GPTDataset over the parts, as a ratio to the merged file (best of ``rounds``)."""
    import numpy as np

    from pretrain.data.gpt_dataset import build_gpt_dataset
    from pretrain.data.indexed import IndexedDataset
    from pretrain.data.parts import PartsDataset

    a = build_gpt_dataset(PartsDataset(parts), "1", "train", None, 2048, 1, None)
    b = build_gpt_dataset(IndexedDataset(merged), "1", "train", None, 2048, 1, None)
    idx = np.random.default_rng(0).integers(0, len(a), 20_000)
    assert np.array_equal(a.get_batch(idx[:64]), b.get_batch(idx[:64]))
    best = {}
    for _ in range(rounds):
        for name, ds in (("parts", a), ("merged", b)):
            t = time.perf_counter()
            for i in idx:
                ds[int(i)]
            one = time.perf_counter() - t
            t = time.perf_counter()
            for k in range(0, len(idx), 64):
                ds.get_batch(idx[k:k + 64])
            batch = time.perf_counter() - t
            old = best.get(name, (1e9, 1e9))
            best[name] = (min(old[0], one), min(old[1], batch))
    return {"one": best["merged"][0] / best["parts"][0], "batch": best["merged"][1] / best["parts"][1]}


def main(argv=None) -> int:
    from dataset import SHARED_PROSE, TEST_PROSE, load_texts, write_curated

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", help="JSONL(.gz) with a 'text' field (default: the shared prose corpus)")
    p.add_argument("--mb", type=float, default=16, help="MB of text to tokenize (default 16)")
    p.add_argument("--shards", type=int, default=16, help="curated shards, one task each (default 16)")
    p.add_argument("--cpus", type=int, default=2, help="worker processes / Ray CPUs (default 2)")
    p.add_argument("--vocab", type=int, default=8000, help="BPE vocabulary (default 8000)")
    p.add_argument("--rounds", type=int, default=2, help="timed rounds, best kept (default 2)")
    args = p.parse_args(argv)

    import ray

    from curate.executors.local import LocalExecutor
    from curate.executors.ray import RayExecutor
    from pretrain.data.parts import merge_parts
    from pretrain.data.tokenize import tokenize_curated
    from pretrain.data.tokenizer import train_tokenizer

    work = Path(tempfile.mkdtemp(prefix="quarry-tokenize-scaling-"))
    print(f"benchmarks/tokenize_scaling.py on {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
          f"{args.cpus} CPUs per executor")
    try:
        corpus = Path(args.corpus) if args.corpus else (SHARED_PROSE if SHARED_PROSE.is_file() else TEST_PROSE)
        texts = load_texts(corpus, args.mb)
        mb = sum(len(t.encode()) for t in texts) / 1e6
        cur = work / "curated"
        write_curated(cur, texts, args.shards)
        tok = train_tokenizer(cur, args.vocab, work / "tok.model", max_bytes=min(int(args.mb * 1e6), 20_000_000))
        part_bytes = 1  # one shard per part and task
        local = LocalExecutor(args.cpus)
        ray.init(address="local", num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
        rayex = RayExecutor(workers=args.cpus)
        run_parts(cur, tok, work / "warm", rayex, part_bytes)  # Ray's workers started and warm, as on a cluster
        run_parts(cur, tok, work / "warm", local, part_bytes)  # and the local pool's
        best = {"local": 1e9, "ray": 1e9}
        cpu = {}
        for _ in range(args.rounds):
            for name, ex in (("local", local), ("ray", rayex)):
                wall, stats = run_parts(cur, tok, work / name, ex, part_bytes)
                if wall < best[name]:
                    best[name], cpu[name] = wall, stats["worker_cpu_seconds"]
        local.close()
        ray.shutdown()
        same = all((work / "local" / f.name).read_bytes() == f.read_bytes() for f in (work / "ray").glob("part-*"))
        tokenize_curated(cur, tok.model_path, work / "one", workers=1, progress=False, log=lambda m: None)
        merge_parts(work / "ray", work / "merged")
        merged_same = all((work / f"merged{e}").read_bytes() == (work / f"one{e}").read_bytes() for e in (".bin", ".idx"))
        reads = read_rates(work / "ray", work / "merged", args.rounds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{mb:.1f} MB of text in {args.shards} shards, {stats['parts']} parts, {stats['tokens']:,} tokens "
          f"(best of {args.rounds}):")
    for name in ("local", "ray"):
        print(f"   {name:5s} executor, {args.cpus} CPUs   {mb / best[name]:7.2f} MB/s   "
              f"{mb / best[name] / args.cpus:6.2f} MB/s per core   (tasks used {cpu[name]:.1f} CPU-s: "
              f"{mb / cpu[name] if cpu[name] else float('nan'):.2f} MB per task CPU-second)")
    print(f"   ray / local, per core                 {best['local'] / best['ray']:5.2f}x")
    print(f"   parts byte-identical across executors: {same}; merged parts == one-process .bin/.idx: {merged_same}")
    print(f"\nrandom 2,049-token samples over the {stats['parts']} parts / over the merged file (same samples): "
          f"ds[i] {reads['one']:.2f}x, get_batch(64) {reads['batch']:.2f}x")
    return 0 if same and merged_same else 1


if __name__ == "__main__":
    sys.exit(main())
