"""Plan phases of the global stages (exact_dedup, minhash_dedup, decontaminate) against shard count and
corpus size: the cost should grow with documents plus shards, not with shards times anything.

    python benchmarks/plan_scaling.py                          # reduced sizes (a few minutes here)
    python benchmarks/plan_scaling.py --full                   # the issue's sizes: 1M docs at 64/512/4096
                                                               # shards; 250k, 1M, 4M docs at 5,000 a shard
    python benchmarks/plan_scaling.py --docs 50000 --sizes 50000,100000,200000 --shards 64,512,4096

Two sweeps, both on ONE ``curate.executors.make_executor("local", workers=2)`` pool for the whole
benchmark, as ``curate run`` has one pool per run (a warm-up plan, not counted, starts the workers
and loads the compiled kernels); the plans size their tasks by ``curate.shuffle.make_layout``, as in
a run:

1. fixed documents (``--docs``) cut into ``--shards`` shards (64, 512, 4,096 by default);
2. fixed shard size (``--shard-rows``, 5,000 like the pipeline's default) at ``--sizes`` documents.

The corpus is synthetic and built directly as Arrow buffers (fast at millions of documents):
documents of ``--words`` random 7-letter words, with 5% exact copies, 5% near copies (a few words
changed), 1% holding a 13-gram of an eval file, and one eval 13-gram planted in 2% of documents (too
common: ``max_matches``). Shards are Arrow IPC + zstd, as the pipeline writes them (4M documents:
about 1.2 GB of shards and 2 GB of memory while they are made).

Printed per run: seconds of each stage's plan and its layout (shard groups x hash ranges). Then,
per phase (an executor map call, named by its task function, with its task count; ``driver`` is the
plan's own work between map calls): wall seconds at each shard count and their last/first ratio
(goal for a whole plan: <= 1.5x), and microseconds per document at each size with the max/min ratio
(goal: within 1.3x), on the wall clock and in task CPU time (measured inside each task: steadier
when other work shares the machine).
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
    """Wraps the run's executor: per task function, the wall seconds of its map calls, the number of
    tasks, and the CPU seconds the tasks spent (measured inside each task, so other load on the
    machine weighs less than on the wall clock)."""

    def __init__(self, inner):
        self.inner = inner
        self.seconds: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.tasks: dict[str, int] = defaultdict(int)

    def map(self, fn, items, on_result=None, **kw):
        items = list(items)
        t0 = time.perf_counter()
        try:
            pairs = self.inner.map(_timed_task, [(fn, it) for it in items])
        finally:
            self.seconds[fn.__name__] += time.perf_counter() - t0
            self.tasks[fn.__name__] += len(items)
        results = []
        for res, cpu in pairs:
            self.cpu[fn.__name__] += cpu
            if on_result:
                on_result(res)
            results.append(res)
        return results


def _timed_task(arg):
    fn, item = arg
    c0 = time.process_time()
    res = fn(item)
    return res, time.process_time() - c0


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


STAGES = ("exact_dedup", "minhash_dedup", "decontaminate")


def run_plans(paths: list[str], eval_file: Path, work: Path, executor, only=None) -> dict:
    """The three plans on ``executor`` (the one pool of the whole benchmark, as a run has one).
    Returns {row: (wall seconds, cpu seconds, tasks)}: one row per phase ``stage/task function``,
    ``stage/driver`` (the plan's own work between map calls), and ``stage`` (the whole plan)."""
    stages = {
        "exact_dedup": lambda: ExactDedup("exact_dedup", None),
        "minhash_dedup": lambda: MinHashDedup("minhash_dedup", MinHashParams(bands=20, rows=13)),
        "decontaminate": lambda: Decontaminate("decontaminate", DecontParams(eval_files=[str(eval_file)])),
    }
    rows: dict[str, tuple[float, float, int]] = {}
    layout = ""
    for name, make in stages.items():
        if only and name not in only:
            continue
        ex = TimedExecutor(executor)
        t0, c0 = time.perf_counter(), time.process_time()
        stats = make().plan(paths, work / name, ex)
        wall, driver_cpu = time.perf_counter() - t0, time.process_time() - c0
        lay = read_json(work / name / "layout.json")
        layout = f"{len(lay['bounds']) - 1} shard groups x {lay['ranges']} hash ranges"
        for fn, sec in ex.seconds.items():
            rows[f"{name}/{fn}"] = (sec, ex.cpu[fn], ex.tasks[fn])
        in_driver = sum(ex.cpu[fn] for fn in ex.seconds if ex.tasks[fn] <= 1)  # a lone task runs in the driver
        rows[f"{name}/driver"] = (wall - sum(ex.seconds.values()), max(0.0, driver_cpu - in_driver), 0)
        rows[name] = (wall, sum(ex.cpu.values()) + rows[f"{name}/driver"][1], sum(ex.tasks.values()))
        shutil.rmtree(work / name)
        if name == "exact_dedup":
            assert stats["duplicates"] > 0
    rows["layout"] = layout
    return rows


def measure(n_docs: int, shards: int, args, tmp: Path, executor) -> dict:
    t0 = time.perf_counter()
    texts, eval_lines = corpus(n_docs, args.words)
    work = tmp / f"{n_docs}-{shards}"
    eval_file = tmp / "eval.txt"
    eval_file.write_text("\n".join(eval_lines) + "\n")
    paths = write_corpus(texts, shards, work / "shards")
    del texts
    made = time.perf_counter() - t0
    disk = sum(os.path.getsize(p) for p in paths)
    tries = []
    for _ in range(max(1, args.repeat)):  # the same shards, planned again: keep the fastest try
        rows = run_plans(paths, eval_file, work / "plans", executor, args.stages)
        names = [n for n in STAGES if n in rows]
        tries.append((sum(rows[n][0] for n in names), rows))
    shutil.rmtree(work)
    plan, rows = min(tries, key=lambda t: t[0])
    layout = rows.pop("layout")
    others = f" (fastest of {', '.join(f'{t[0]:.1f}' for t in tries)} s)" if len(tries) > 1 else ""
    print(f"  {n_docs:>9,} docs  {shards:>6,} shards  ({disk / 1e6:,.0f} MB, written in {made:5.1f} s)  plans {plan:7.2f} s{others}  "
          + "  ".join(f"{k} {rows[k][0]:6.2f}" for k in names) + f"  [{layout}]", flush=True)
    if args.phases:
        for k, (wall, cpu, n) in rows.items():
            if "/" in k:
                print(f"      {k:<40} {wall:7.2f} s wall  {cpu:7.2f} s cpu  {n:>5} tasks")
    rows["all three plans"] = (plan, sum(rows[n][1] for n in names), sum(rows[n][2] for n in names))
    return rows


def _ratio(vals: list[float]) -> float:
    return max(vals) / max(min(vals), 1e-12)


def shard_sweep(args, tmp, executor) -> None:
    counts = [int(x) for x in args.shards.split(",")]
    print(f"1. fixed documents ({args.docs:,}), shards {counts}; workers={args.workers}", flush=True)
    runs = [measure(args.docs, s, args, tmp, executor) for s in counts]
    print("   wall seconds (tasks)                      " + "".join(f"{s:>13,} sh" for s in counts) + "   last/first")
    for k in runs[0]:
        vals = [r[k][0] for r in runs]
        goal = "  (goal <= 1.5x)" if "/" not in k else ""
        print(f"   {k:<40} " + "".join(f"{r[k][0]:8.2f}s ({r[k][2]:>3})" for r in runs)
              + f"   {vals[-1] / max(vals[0], 1e-12):5.2f}x{goal}")


def size_sweep(args, tmp, executor) -> None:
    sizes = [int(x) for x in args.sizes.split(",")]
    print(f"2. fixed shard size ({args.shard_rows:,} documents), sizes {sizes}; workers={args.workers}", flush=True)
    runs = [measure(n, max(1, -(-n // args.shard_rows)), args, tmp, executor) for n in sizes]
    print("   microseconds per document, wall (tasks)  " + "".join(f"{n:>14,} d" for n in sizes) + "   max/min")
    for k in runs[0]:
        per = [r[k][0] / n * 1e6 for r, n in zip(runs, sizes)]
        goal = "  (goal <= 1.3x)" if "/" not in k else ""
        # a phase under a microsecond a document is below what this machine resolves: no ratio
        ratio = f"{_ratio(per):5.2f}x" if max(per) >= 1.0 else "  n/a"
        print(f"   {k:<40} " + "".join(f"{v:9.2f} ({r[k][2]:>4})" for v, r in zip(per, runs)) + f"   {ratio}{goal}")
    print("   microseconds per document, task CPU       " + "".join(f"{n:>14,} d" for n in sizes) + "   max/min")
    for k in [k for k in runs[0] if "/" not in k]:
        per = [r[k][1] / n * 1e6 for r, n in zip(runs, sizes)]
        print(f"   {k:<40} " + "".join(f"{v:9.2f}       " for v in per) + f"   {_ratio(per):5.2f}x")
    busy = [r["all three plans"][1] / (r["all three plans"][0] * args.workers) for r in runs]
    print(f"   {'workers busy (task CPU / wall x workers)':<40} " + "".join(f"{b:9.0%}       " for b in busy)
          + "   (under 100%: waiting, or other work on the machine took the cores)")
    print("   goal: time per document flat within 1.3x (max/min) from the smallest to the largest size")


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
    p.add_argument("--repeat", type=int, default=1, help="plan each corpus this many times, keep the fastest (default 1)")
    p.add_argument("--tmp", default=None, help="scratch folder (default: a new one under /tmp)")
    args = p.parse_args(argv)
    if args.full:
        args.docs, args.sizes = 1_000_000, "250000,1000000,4000000"
    tmp = Path(tempfile.mkdtemp(prefix="plans-bench-", dir=args.tmp))
    executor = make_executor("local", workers=args.workers)  # one pool for everything, as a run has
    try:
        print("warm-up (worker start, imports, compiled kernels; not counted): ", end="", flush=True)
        measure(20_000, 8, args, tmp, executor)
        if not args.skip_shards:
            shard_sweep(args, tmp, executor)
        if not args.skip_sizes:
            size_sweep(args, tmp, executor)
    finally:
        executor.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
