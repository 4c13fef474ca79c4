"""Plan phases of the global stages (exact_dedup, minhash_dedup, decontaminate) against shard count and
corpus size: the cost should grow with documents plus shards, not with shards times anything.

    python benchmarks/plan_scaling.py                          # reduced sizes (a few minutes here)
    python benchmarks/plan_scaling.py --full                   # the issue's sizes: 1M docs at 64/512/4096
                                                               # shards; 250k, 1M, 4M docs at 5,000 a shard
    python benchmarks/plan_scaling.py --docs 50000 --sizes 50000,100000,200000 --shards 64,512,4096

Two sweeps, each run in this one process on ``curate.executors.make_executor("local", workers=2)``:

1. fixed documents (``--docs``) cut into ``--shards`` shards (64, 512, 4,096 by default);
2. fixed shard size (``--shard-rows``, 5,000 like the pipeline's default) at ``--sizes`` documents.

The corpus is synthetic and built directly as Arrow buffers (fast at millions of documents):
documents of ``--words`` random 7-letter words, with 5% exact copies (other spacing), 5% near copies
(a few words changed), 1% holding a 13-gram of an eval file, and one eval 13-gram planted in 2% of
documents (too common: ``max_matches``). Shards are Arrow IPC + zstd, as the pipeline writes them.

Printed: seconds per plan phase (the executor map calls, named by their task function) and per stage,
then the goals' ratios: time at the largest shard count / time at the smallest (goal <= 1.5), and
seconds per million documents at each size / at the smallest size (goal: within 1.3x). A phase has a
fixed cost (starting the process pool each map call, importing numba kernels), which weighs more at
small sizes: compare the ratios at the sizes you care about.
"""
from __future__ import annotations

import os

os.environ.setdefault("TQDM_DISABLE", "1")

import argparse  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from curate.executors import make_executor  # noqa: E402
from curate.schema import BASE_SCHEMA  # noqa: E402
from curate.shards import read_json, write_shard  # noqa: E402
from curate.stages.decontaminate import Decontaminate  # noqa: E402
from curate.stages.decontaminate import Params as DecontParams  # noqa: E402
from curate.stages.exact_dedup import ExactDedup  # noqa: E402
from curate.stages.minhash.stage import MinHashDedup  # noqa: E402
from curate.stages.minhash.stage import Params as MinHashParams  # noqa: E402

WORD = 8  # 7 letters and a space


class TimedExecutor:
    """Wraps an executor and adds up the seconds of each map call, by task function."""

    def __init__(self, inner):
        self.inner = inner
        self.seconds: dict[str, float] = defaultdict(float)
        self.tasks: dict[str, int] = defaultdict(int)

    def map(self, fn, items, on_result=None, **kw):
        items = list(items)
        t0 = time.perf_counter()
        try:
            return self.inner.map(fn, items, on_result=on_result)
        finally:
            self.seconds[fn.__name__] += time.perf_counter() - t0
            self.tasks[fn.__name__] += len(items)


def make_letters(n_docs: int, words: int, rng) -> np.ndarray:
    """uint8 [n_docs, words * 8]: random lowercase words with a space after each."""
    letters = rng.integers(97, 123, size=(n_docs, words, WORD), dtype=np.uint8)
    letters[:, :, WORD - 1] = 32
    return letters.reshape(n_docs, words * WORD)


def corpus(n_docs: int, words: int, seed: int = 0):
    """(texts as one large_string array, eval file lines)."""
    rng = np.random.default_rng(seed)
    doc = make_letters(n_docs, words, rng)
    n_copy, n_near, n_hit = n_docs // 20, n_docs // 20, max(1, n_docs // 100)
    idx = rng.permutation(n_docs)
    src = rng.integers(0, n_docs, size=n_copy + n_near)
    doc[idx[:n_copy]] = doc[src[:n_copy]]  # exact copies
    near = idx[n_copy:n_copy + n_near]
    doc[near] = doc[src[n_copy:]]
    for k in range(3):  # near copies: three words changed
        pos = rng.integers(0, words, size=len(near)) * WORD
        for b in range(WORD - 1):
            doc[near, pos + b] = rng.integers(97, 123, size=len(near), dtype=np.uint8)
    evals = make_letters(200, 30, rng)
    hits = idx[n_copy + n_near:n_copy + n_near + n_hit]
    span = 13 * WORD
    starts = rng.integers(0, 30 - 13, size=len(hits)) * WORD
    at = rng.integers(0, words - 13, size=len(hits)) * WORD
    which = rng.integers(0, 200, size=len(hits))
    for j in range(span):
        doc[hits, at + j] = evals[which, starts + j]
    common = idx[n_copy + n_near + n_hit:n_copy + n_near + n_hit + n_docs // 50]
    doc[common, :span] = evals[0, :span]  # one eval 13-gram in 2% of documents: too common to cut
    data = doc.reshape(-1)
    offsets = np.arange(n_docs + 1, dtype=np.int64) * (words * WORD)
    texts = pa.LargeStringArray.from_buffers(n_docs, pa.py_buffer(offsets), pa.py_buffer(data))
    eval_lines = [bytes(e).decode() for e in evals]
    return texts, eval_lines


def write_corpus(texts: pa.LargeStringArray, shards: int, folder: Path) -> list[str]:
    n = len(texts)
    ids = pa.array([f"d{i:08d}" for i in range(n)], pa.string())
    per = -(-n // shards)
    paths = []
    folder.mkdir(parents=True)
    for k in range(shards):
        lo, hi = k * per, min(n, (k + 1) * per)
        m = max(0, hi - lo)
        cols = {
            "id": ids.slice(lo, m), "text": texts.slice(lo, m), "source": pa.array(["bench"] * m, pa.string()),
            "url": pa.array([""] * m, pa.string()), "content_type": pa.array(["text/plain"] * m, pa.string()),
        }
        t = pa.table({f.name: cols[f.name].cast(f.type) if f.name in cols else pa.nulls(m, f.type) for f in BASE_SCHEMA},
                     schema=BASE_SCHEMA)
        paths.append(str(write_shard(t, folder / f"part-{k:05d}.arrow")))
    return paths


def _noop(x):
    return x


def map_overhead(workers: int, rounds: int = 3) -> float:
    """Median seconds of one map call of 8 empty tasks (a process pool started and stopped per call,
    the workers importing what the plans import): the fixed cost every plan phase pays."""
    ex = make_executor("local", workers=workers)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        ex.map(_warm_worker, list(range(8)))
        times.append(time.perf_counter() - t0)
    ex.close()
    return sorted(times)[len(times) // 2]


def _warm_worker(x):
    import curate.stages.decontaminate  # noqa: F401
    import curate.stages.exact_dedup  # noqa: F401
    import curate.stages.minhash.stage  # noqa: F401

    return x


def run_plans(paths: list[str], eval_file: Path, work: Path, workers: int, only=None) -> tuple[dict, dict]:
    """{stage: seconds}, {stage/phase: seconds} of the three plans."""
    stages = {
        "exact_dedup": ExactDedup("exact_dedup", None),
        "minhash_dedup": MinHashDedup("minhash_dedup", MinHashParams(bands=20, rows=13)),
        "decontaminate": Decontaminate("decontaminate", DecontParams(eval_files=[str(eval_file)])),
    }
    totals, phases = {}, {}
    inner = make_executor("local", workers=workers)
    try:
        for name, stage in stages.items():
            if only and name not in only:
                continue
            ex = TimedExecutor(inner)
            t0 = time.perf_counter()
            stats = stage.plan(paths, work / name, ex)
            totals[name] = time.perf_counter() - t0
            layout = read_json(work / name / "layout.json")
            phases["layout"] = f"{len(layout['bounds']) - 1} shard groups x {layout['ranges']} hash ranges"
            for fn, sec in ex.seconds.items():
                phases[f"{name}/{fn}"] = sec
            shutil.rmtree(work / name)
            if name == "exact_dedup":
                assert stats["duplicates"] > 0
    finally:
        inner.close()
    return totals, phases


def measure(n_docs: int, shards: int, args, tmp: Path) -> tuple[dict, dict]:
    texts, eval_lines = corpus(n_docs, args.words)
    work = tmp / f"{n_docs}-{shards}"
    eval_file = tmp / "eval.txt"
    eval_file.write_text("\n".join(eval_lines) + "\n")
    t0 = time.perf_counter()
    paths = write_corpus(texts, shards, work / "shards")
    made = time.perf_counter() - t0
    totals, phases = run_plans(paths, eval_file, work / "plans", args.workers, args.stages)
    shutil.rmtree(work)
    plan = sum(totals.values())
    layout = phases.pop("layout")
    print(f"  {n_docs:>9,} docs  {shards:>6,} shards  (corpus written in {made:5.1f} s)  plans {plan:7.2f} s  "
          + "  ".join(f"{k} {v:6.2f}" for k, v in totals.items()) + f"  [{layout}]", flush=True)
    if args.phases:
        for k, v in phases.items():
            print(f"      {k:<40} {v:7.2f} s")
    return totals, phases


def _per_doc_row(seconds: list[float], sizes: list[int]) -> str:
    per = [t / n * 1e6 for t, n in zip(seconds, sizes)]
    if min(per) < 1.0:  # under a microsecond a document: below what this machine can resolve
        return "".join(f"{v:11.2f}" for v in per) + "      n/a (too small to measure)"
    return "".join(f"{v:11.2f}" for v in per) + f"   {max(per) / min(per):5.2f}x    {per[-1] / per[0]:5.2f}x"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--docs", type=int, default=100_000, help="documents of the shard-count sweep (default 100,000)")
    p.add_argument("--shards", default="64,512,4096", help="shard counts of the first sweep (default 64,512,4096)")
    p.add_argument("--sizes", default="100000,200000,400000", help="corpus sizes of the second sweep (default 100k,200k,400k)")
    p.add_argument("--shard-rows", type=int, default=5000, help="documents per shard in the second sweep (default 5,000)")
    p.add_argument("--words", type=int, default=50, help="words per document (default 50: about 400 bytes)")
    p.add_argument("--workers", type=int, default=2, help="local executor workers (default 2)")
    p.add_argument("--full", action="store_true", help="the issue's sizes: --docs 1000000 --sizes 250000,1000000,4000000")
    p.add_argument("--skip-shards", action="store_true", help="only the corpus-size sweep")
    p.add_argument("--skip-sizes", action="store_true", help="only the shard-count sweep")
    p.add_argument("--phases", action="store_true", help="also print every phase of every run")
    p.add_argument("--stages", type=lambda v: v.split(","), default=None,
                   help="comma-separated subset of exact_dedup,minhash_dedup,decontaminate (default all)")
    p.add_argument("--tmp", default=None, help="scratch folder (default: a new one under /tmp)")
    args = p.parse_args(argv)
    if args.full:
        args.docs, args.sizes = 1_000_000, "250000,1000000,4000000"
    shard_counts = [int(x) for x in args.shards.split(",")]
    sizes = [int(x) for x in args.sizes.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="plans-bench-", dir=args.tmp))
    try:
        print("warm-up (compiled kernels, imports): ", end="", flush=True)
        measure(2000, 4, args, tmp)
        over = map_overhead(args.workers)
        print(f"fixed cost of one executor map call (pool start, worker imports): {over:.2f} s; each plan makes "
              "5 (exact), 6 (minhash), 5 (decontaminate) calls; 'net' figures below subtract it")
        calls = {"exact_dedup": 5, "minhash_dedup": 6, "decontaminate": 5}
        if not args.skip_shards:
            print(f"1. fixed documents ({args.docs:,}), shards {shard_counts}; workers={args.workers}")
            runs = [measure(args.docs, s, args, tmp) for s in shard_counts]
            print("   phase                                     " + "".join(f"{s:>9,} sh" for s in shard_counts) + "   ratio")
            for k in runs[0][1]:
                vals = [r[1][k] for r in runs]
                print(f"   {k:<40} " + "".join(f"{v:10.2f}s" for v in vals) + f"   {vals[-1] / vals[0]:5.2f}x")
            for name in runs[0][0]:
                vals = [r[0][name] for r in runs]
                print(f"   {name + ' (whole plan)':<40} " + "".join(f"{v:10.2f}s" for v in vals)
                      + f"   {vals[-1] / vals[0]:5.2f}x  (goal <= 1.5x)")
            tot = [sum(r[0].values()) for r in runs]
            print(f"   {'all three plans':<40} " + "".join(f"{v:10.2f}s" for v in tot) + f"   {tot[-1] / tot[0]:5.2f}x  (goal <= 1.5x)")
            net = [sum(max(0.0, v - calls[k] * over) for k, v in r[0].items()) for r in runs]
            print(f"   {'all three plans, net of map calls':<40} " + "".join(f"{v:10.2f}s" for v in net)
                  + f"   {net[-1] / max(net[0], 1e-9):5.2f}x  (goal <= 1.5x)")
        if not args.skip_sizes:
            print(f"2. fixed shard size ({args.shard_rows:,} documents), sizes {sizes}; workers={args.workers}")
            runs = [measure(n, max(1, -(-n // args.shard_rows)), args, tmp) for n in sizes]
            print("   seconds per million documents            " + "".join(f"{n:>10,} d" for n in sizes)
                  + "   max/min  last/first")
            for name in runs[0][0]:
                print(f"   {name:<40} " + _per_doc_row([r[0][name] for r in runs], sizes))
            print(f"   {'all three plans':<40} " + _per_doc_row([sum(r[0].values()) for r in runs], sizes))
            for name in runs[0][0]:
                print(f"   {name + ', net of map calls':<40} "
                      + _per_doc_row([max(0.0, r[0][name] - calls[name] * over) for r in runs], sizes))
            print("   goal: time per document flat within 1.3x (max/min); last/first < 1 means the fixed costs still weigh")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
