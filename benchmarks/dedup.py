"""Fuzzy dedup benchmark: signature speed per core against datasketch and rensa, then a synthetic
corpus of 1,000,000 documents through signatures, buckets and clusters with peak memory.

    .venv/bin/python benchmarks/dedup.py                      # both parts (about 10 minutes here)
    .venv/bin/python benchmarks/dedup.py --docs 100000        # a smaller corpus
    .venv/bin/python benchmarks/dedup.py --skip-corpus        # only the signature comparison

Part 1 runs every tool in this one process, one thread (RAYON/NUMBA/OMP threads = 1), in interleaved
rounds after a warm-up, on the same real documents (``pipelines/sample/prose.jsonl.gz``: 426 English
documents, about 10 KB each) with the same parameters: 260 permutations, word 5-gram shingles after
the same normalization. A figure is the median over rounds, a ratio the median of per-round ratios.
datasketch and rensa take Python strings, so their time includes the normalization and shingling a
user must write for them; the fastest Python we found for our normalization (two regular
expressions, checked to give the same words on every document) is used, and its cost is printed
separately, as is their hashing time alone.

Part 2 generates the corpus (shards of ``--shard-rows`` documents, Arrow IPC + zstd) with planted
exact copies and near-duplicates, then runs the ``minhash_dedup`` plan on ``--workers`` processes.
Peak RSS is sampled every 0.1 s over this process and all its descendants (their sum), and
``ru_maxrss`` of this process and of its largest child is printed too.
"""
from __future__ import annotations

import os

for _var in ("RAYON_NUM_THREADS", "NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ.setdefault("TQDM_DISABLE", "1")

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import resource  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from curate.executors.local import LocalExecutor  # noqa: E402
from curate.schema import BASE_SCHEMA  # noqa: E402
from curate.shards import write_shard  # noqa: E402
from curate.stages.minhash.shingles import jaccard, normalize  # noqa: E402
from curate.stages.minhash.signatures import MinHasher  # noqa: E402
from curate.stages.minhash.stage import MinHashDedup, Params  # noqa: E402

BANDS, ROWS, NGRAM = 20, 13, 5
PERM = BANDS * ROWS


class QuietExecutor(LocalExecutor):
    """The local process pool without progress bars (they would interleave with the figures)."""

    def map(self, fn, items, desc=None, on_result=None):
        return super().map(fn, items, desc=None, on_result=on_result)

# --- part 1: signatures per core ------------------------------------------------------------------

_PUNCT = re.compile(r"[^\w\s]|_")
_DIGIT = re.compile(r"\d")


def py_words(text: str) -> list[str]:
    """Our normalization in plain Python (lowercase, punctuation removed, digits to 0, whitespace)."""
    return _DIGIT.sub("0", _PUNCT.sub("", text.lower())).split()


def py_shingles(text: str) -> list[str]:
    w = py_words(text)
    if len(w) < NGRAM:
        return [" ".join(w)] if w else []
    return [" ".join(t) for t in zip(*(w[i:] for i in range(NGRAM)))]


def load_prose() -> list[str]:
    with gzip.open(ROOT / "pipelines" / "sample" / "prose.jsonl.gz", "rt", encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def _signature_tools(docs, mh) -> dict:
    """The MinHash implementations side by side, each a function signing every document; ours first."""
    arr = pa.array(docs, pa.large_string())
    tools = {"quarry (numba kernel over Arrow UTF-8)": lambda: mh.signatures(arr)}
    try:
        from datasketch import MinHash

        def ds():
            for d in docs:
                m = MinHash(num_perm=PERM, seed=1)
                m.update_batch([s.encode("utf-8") for s in py_shingles(d)])
                m.digest()
        tools["datasketch MinHash.update_batch"] = ds
    except ImportError:
        print("datasketch is not installed: skipped")
    try:
        import rensa

        def rs():
            for d in docs:
                m = rensa.RMinHash(num_perm=PERM, seed=1)
                m.update(py_shingles(d))
                m.digest()
        tools["rensa RMinHash.update"] = rs
    except ImportError:
        print("rensa is not installed (pip install rensa): skipped")
    return tools


def _interleaved_times(tools: dict, docs, rounds: int) -> dict:
    """Seconds per round of each tool (the order rotates each round), plus Python's normalize + shingle alone."""
    names = list(tools)
    for f in tools.values():  # warm-up: JIT, caches
        f()
    times = {k: [] for k in names + ["python normalize+shingle"]}
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for k in order:
            t = time.perf_counter()
            tools[k]()
            times[k].append(time.perf_counter() - t)
        t = time.perf_counter()
        for d in docs:
            py_shingles(d)
        times["python normalize+shingle"].append(time.perf_counter() - t)
    return times


def _split_only_shingles(text: str) -> list[str]:  # NOT our normalization: only lowercase + split
    w = text.lower().split()
    return [" ".join(t) for t in zip(*(w[i:] for i in range(NGRAM)))] or [" ".join(w)]


def _hashing_alone(tools: dict, docs) -> dict:
    """Seconds of the libraries' hashing with the shingles given (for transparency: what their speed is without
    our normalization in Python)."""
    shingled = [py_shingles(d) for d in docs]
    alone = {}
    if "rensa RMinHash.update" in tools:
        import rensa

        for label, inputs in (("rensa", shingled),
                              ("rensa, words by str.lower().split() only", map(_split_only_shingles, docs))):
            t = time.perf_counter()
            for s in inputs:
                m = rensa.RMinHash(num_perm=PERM, seed=1)
                m.update(s)
                m.digest()
            alone[label] = time.perf_counter() - t
    if "datasketch MinHash.update_batch" in tools:
        from datasketch import MinHash

        t = time.perf_counter()
        for s in shingled:
            m = MinHash(num_perm=PERM, seed=1)
            m.update_batch([x.encode("utf-8") for x in s])
        alone["datasketch"] = time.perf_counter() - t
    return alone


def _print_speeds(names: list, times: dict, alone: dict, n_docs: int, n_bytes: int) -> dict:
    print(f"   {'tool':<42}{'docs/s':>10}{'MB/s':>8}{'quarry is':>12}")
    ours_name = names[0]
    result = {}
    for k in names:
        med = statistics.median(times[k])
        ratio = statistics.median(a / b for a, b in zip(times[k], times[ours_name]))
        result[k] = {"docs_per_s": n_docs / med, "ratio": ratio}
        print(f"   {k:<42}{n_docs / med:>10,.0f}{n_bytes / med / 1e6:>8.2f}{'' if k == ours_name else f'{ratio:>10.1f}x':>12}")
    med = statistics.median(times["python normalize+shingle"])
    print(f"   {'(python normalize + 5-gram strings alone)':<42}{n_docs / med:>10,.0f}{n_bytes / med / 1e6:>8.2f}")
    ours_med = statistics.median(times[ours_name])
    for k, v in alone.items():
        label = f"({k})" if "split" in k else f"({k} hashing alone, shingles given)"
        print(f"   {label:<42}{n_docs / v:>10,.0f}{n_bytes / v / 1e6:>8.2f}{v / ours_med:>10.1f}x")
    goals = {"datasketch MinHash.update_batch": 12, "rensa RMinHash.update": 3}
    for k, g in goals.items():
        if k in result:
            r = result[k]["ratio"]
            print(f"   goal vs {k.split()[0]}: >= {g}x -> {r:.1f}x {'met' if r >= g else 'NOT met'}")
    return result


def _print_accuracy(docs, mh) -> None:
    """The estimates are right: mean |estimated - exact Jaccard| on near-duplicate pairs."""
    rng = np.random.default_rng(0)
    pairs = []
    for d in docs[:60]:
        w = d.split()
        if len(w) < 200:
            continue
        for pos in rng.choice(len(w), size=len(w) // 40, replace=False):
            w[pos] = "replaced"
        pairs.append((d, " ".join(w)))
    sa, _ = mh.signatures([a for a, _ in pairs])
    sb, _ = mh.signatures([b for _, b in pairs])
    err = np.mean([abs((sa[i] == sb[i]).mean() - jaccard(a, b)) for i, (a, b) in enumerate(pairs)])
    mean_j = np.mean([jaccard(a, b) for a, b in pairs])
    print(f"   accuracy: {len(pairs)} near-duplicate pairs (mean exact J {mean_j:.3f}): mean |estimate - exact| "
          f"{err:.4f} (theory at {PERM} permutations: {np.sqrt(mean_j * (1 - mean_j) / PERM) * np.sqrt(2 / np.pi):.4f})")


def signature_comparison(rounds: int) -> dict:
    docs = load_prose()
    n_bytes = sum(len(d.encode()) for d in docs)
    same = sum(py_words(d) == normalize(d).split() for d in docs)
    mh = MinHasher(BANDS, ROWS, NGRAM, seed=1)
    tools = _signature_tools(docs, mh)
    times = _interleaved_times(tools, docs, rounds)
    alone = _hashing_alone(tools, docs)
    print(f"\n== 1. MinHash signatures, per core: {len(docs)} documents, {n_bytes / 1e6:.1f} MB, "
          f"{PERM} permutations ({BANDS} x {ROWS}), word {NGRAM}-grams, {rounds} interleaved rounds ==")
    print(f"   (Python normalization gives our words on {same}/{len(docs)} documents)")
    result = _print_speeds(list(tools), times, alone, len(docs), n_bytes)
    _print_accuracy(docs, mh)
    return result


# --- part 2: a synthetic corpus -------------------------------------------------------------------

VOCAB_SIZE = 100_000


def _vocab() -> np.ndarray:
    rng = np.random.default_rng(12345)
    lengths = rng.integers(3, 11, size=VOCAB_SIZE)
    letters = rng.integers(97, 123, size=(VOCAB_SIZE, 10), dtype=np.uint8)
    return np.array([bytes(letters[i, : lengths[i]]).decode() for i in range(VOCAB_SIZE)], dtype=object)


_VOCAB = None
_ZIPF = None


def _doc_words(k: int) -> np.ndarray:
    """Document k's word ids, regenerated from its own seed (so any shard can copy any document)."""
    global _ZIPF
    if _ZIPF is None:
        p = 1.0 / np.arange(1, VOCAB_SIZE + 1) ** 1.05
        _ZIPF = np.cumsum(p / p.sum())
    rng = np.random.default_rng(k + 1_000_003)
    n = int(np.clip(rng.lognormal(5.3, 0.6), 30, 3000))  # median ~200 words, long tail
    return np.minimum(np.searchsorted(_ZIPF, rng.random(n)), VOCAB_SIZE - 1)


def _is_copy(k: int) -> bool:
    return k > 1000 and np.random.default_rng(k).random() < 0.15


def doc_words(k: int) -> tuple[np.ndarray, str, int]:
    """(word ids, kind, source) of document k: 85% unique, 10% near-duplicates of an earlier unique
    document (0.5-4% of its words replaced), 5% exact copies of one."""
    rng = np.random.default_rng(k)
    u = rng.random()
    if not (k > 1000 and u < 0.15):
        return _doc_words(k), "unique", k
    src = int(rng.integers(0, k))
    while _is_copy(src):  # copy a document whose text is its own
        src = int(rng.integers(0, k))
    w = _doc_words(src)
    if u < 0.05:
        return w, "exact", src
    w = w.copy()
    n_change = max(1, int(len(w) * rng.uniform(0.005, 0.04)))
    w[rng.integers(0, len(w), size=n_change)] = rng.integers(0, VOCAB_SIZE, size=n_change)
    return w, "near", src


def doc_text(k: int) -> str:
    global _VOCAB
    if _VOCAB is None:
        _VOCAB = _vocab()
    return " ".join(_VOCAB[doc_words(k)[0]])


def make_shard(job: tuple) -> dict:
    index, lo, hi, path = job
    rows, kinds, pairs = [], {"unique": 0, "near": 0, "exact": 0}, []
    for k in range(lo, hi):
        _, kind, src = doc_words(k)
        kinds[kind] += 1
        rows.append(doc_text(k))
        if kind != "unique":
            pairs.append((k, src, kind))
    n = hi - lo
    table = pa.table({
        "id": pa.array([f"doc-{k:08d}" for k in range(lo, hi)], pa.string()),
        "text": pa.array(rows, pa.large_string()),
        "source": pa.array(["synthetic"] * n, pa.string()), "url": pa.array([""] * n, pa.string()),
        "content_type": pa.array(["text/plain"] * n, pa.string()),
    }, schema=BASE_SCHEMA)
    write_shard(table, path)
    return {**kinds, "bytes": int(sum(len(r) for r in rows)), "pairs": pairs}


def check_found(plan_dir: Path, pairs: list, verify_t: float | None, sample: int = 20_000) -> None:
    """Exact copies must share their original's cluster; near-duplicates as the S-curve predicts."""
    from curate.stages.minhash.shingles import jaccard_pairs, shingle_sets
    from curate.stages.minhash.signatures import candidate_probability

    from curate.shards import read_shard

    n = len(np.load(plan_dir / "components.npy", mmap_mode="r"))
    comp = np.full(n, -1, np.int64)  # final cluster of each document (after verification, if on)
    for f in sorted((plan_dir / "clusters").glob("*.arrow")):
        t = read_shard(f, columns=["gidx", "cluster"])
        comp[t.column("gidx").to_numpy()] = t.column("cluster").to_numpy()
    exact = np.array([(k, s) for k, s, kind in pairs if kind == "exact"], np.int64).reshape(-1, 2)
    same = (comp[exact[:, 0]] == comp[exact[:, 1]]) & (comp[exact[:, 0]] >= 0)
    print(f"   check: exact copies in their original's cluster: {int(same.sum()):,} / {len(exact):,}")
    near = [(k, s) for k, s, kind in pairs if kind == "near"]
    rng = np.random.default_rng(0)
    near = [near[i] for i in rng.choice(len(near), size=min(sample, len(near)), replace=False)]
    flat, off = shingle_sets([doc_text(k) for k, _ in near] + [doc_text(s) for _, s in near])
    j = jaccard_pairs(flat, off, np.arange(len(near)), np.arange(len(near), 2 * len(near)))
    found = np.array([comp[k] == comp[s] and comp[k] >= 0 for k, s in near])
    p = candidate_probability(j, BANDS, ROWS)
    print(f"   check: {len(near):,} sampled near-duplicate pairs (exact Jaccard {j.min():.2f}-{j.max():.2f}): "
          f"{found.mean():.3f} in one cluster; the S-curve predicts {p.mean():.3f} as direct candidates "
          + (f"(verification then splits off members under J {verify_t:.3f} from their representative)" if verify_t
             else "(clusters can only add: shared neighbours link pairs that missed)"))
    for lo, hi in ((0.5, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.01)):
        sel = (j >= lo) & (j < hi)
        if sel.sum():
            print(f"          J in [{lo:.1f}, {min(hi, 1):.1f}): {int(sel.sum()):>6,} pairs, found {found[sel].mean():.3f}, P(s) {p[sel].mean():.3f}")


class PeakRSS:
    """Samples the summed RSS of this process and all its descendants."""

    def __init__(self, interval: float = 0.1):
        self.interval, self.peak, self.single, self._stop = interval, 0, 0, threading.Event()
        self.page = os.sysconf("SC_PAGE_SIZE")

    def _tree_rss(self) -> int:
        me = os.getpid()
        parents, rss = {}, {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    parts = f.read().rsplit(")", 1)[1].split()
                parents[int(d)] = int(parts[1])
                with open(f"/proc/{d}/statm") as f:
                    rss[int(d)] = int(f.read().split()[1]) * self.page
            except (OSError, IndexError, ValueError):
                continue
        total = 0
        for pid in rss:
            p = pid
            while p and p != me and p in parents:
                p = parents[p]
            if p == me:
                total += rss[pid]
                self.single = max(self.single, rss[pid])
        return total

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self._tree_rss())
            self._stop.wait(self.interval)

    def __enter__(self):
        self.peak = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._tree_rss())
        self._stop.clear()


def corpus_run(n_docs: int, shard_rows: int, workers: int, workdir: Path, keep: bool, verify: bool) -> dict:
    workdir.mkdir(parents=True, exist_ok=True)
    shard_dir, plan_dir = workdir / "shards", workdir / "plan"
    if plan_dir.exists():
        shutil.rmtree(plan_dir)
    jobs = [(i, lo, min(n_docs, lo + shard_rows), str(shard_dir / f"part-{i:05d}.arrow"))
            for i, lo in enumerate(range(0, n_docs, shard_rows))]
    print(f"\n== 2. {n_docs:,} synthetic documents in {len(jobs)} shards through minhash_dedup "
          f"({BANDS} x {ROWS}, verify={verify}), {workers} worker processes ==")
    t = time.perf_counter()
    marker = workdir / "corpus.json"
    spec = {"docs": n_docs, "shard_rows": shard_rows}
    if marker.exists() and json.loads(marker.read_text()).get("spec") == spec:
        info = json.loads(marker.read_text())["info"]
        print(f"   corpus: reused {shard_dir}")
    else:
        if shard_dir.exists():
            shutil.rmtree(shard_dir)
        parts = QuietExecutor(workers).map(make_shard, jobs)
        info = {k: sum(p[k] for p in parts) for k in ("unique", "near", "exact", "bytes")}
        info["pairs"] = [x for p in parts for x in p["pairs"]]
        marker.write_text(json.dumps({"spec": spec, "info": info}))
        print(f"   corpus: generated in {time.perf_counter() - t:.0f} s")
    print(f"   corpus: {info['bytes'] / 1e9:.2f} GB of text ({info['bytes'] / n_docs:,.0f} bytes a document), planted {info['near']:,} near-duplicates "
          f"and {info['exact']:,} exact copies of earlier documents")
    inputs = [j[3] for j in jobs]
    stage = MinHashDedup("minhash_dedup", Params(bands=BANDS, rows=ROWS, ngram=NGRAM, verify=verify))
    with PeakRSS() as rss:
        t = time.perf_counter()
        stats = stage.plan(inputs, plan_dir, QuietExecutor(workers))
        total = time.perf_counter() - t
    sec = stats["phase_seconds"]
    print(f"   {'phase':<14}{'seconds':>9}{'docs/s':>12}{'docs/s/core':>13}")
    for k, v in sec.items():
        cores = workers if k != "components" else 1
        print(f"   {k:<14}{v:>9.1f}{n_docs / max(v, 1e-9):>12,.0f}{n_docs / max(v, 1e-9) / cores:>13,.0f}")
    print(f"   {'total':<14}{total:>9.1f}{n_docs / total:>12,.0f}{n_docs / total / workers:>13,.0f}")
    self_max = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    gib = rss.peak / 2**30
    print(f"   peak RSS, this process + workers (sampled sum): {gib:.2f} GiB (goal < 4 GiB: {'met' if gib < 4 else 'NOT met'}); "
          f"largest single process {rss.single / 2**30:.2f} GiB; ru_maxrss of this process {self_max:.2f} GiB")
    print(f"   found: {stats['candidate_edges']:,} candidate edges, {stats['documents_with_candidates']:,} documents "
          f"with candidates in {stats['components']:,} components; {stats['clusters']:,} clusters, "
          f"{stats['duplicates']:,} set aside (planted {info['near'] + info['exact']:,})")
    plan_bytes = sum(p.stat().st_size for p in plan_dir.rglob("*") if p.is_file())
    print(f"   plan on disk: {plan_bytes / 1e9:.2f} GB; bucket ranges {stats['bucket_ranges']}, cluster groups {stats['cluster_groups']}")
    check_found(plan_dir, info["pairs"], stats["verify_threshold"] if verify else None)
    if not keep:
        shutil.rmtree(plan_dir)
    return {"stats": stats, "peak_rss_gib": gib, "total_s": total}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds for the signature comparison")
    p.add_argument("--docs", type=int, default=1_000_000, help="documents in the synthetic corpus")
    p.add_argument("--shard-rows", type=int, default=20_000)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--verify", action="store_true", help="run the corpus with exact-Jaccard verification")
    p.add_argument("--workdir", type=Path, default=None, help="where shards and plan go (default: a temp folder)")
    p.add_argument("--keep", action="store_true", help="keep the corpus and plan")
    p.add_argument("--skip-signatures", action="store_true")
    p.add_argument("--skip-corpus", action="store_true")
    args = p.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, {os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') / 2**30:.0f} GiB; "
          f"python {sys.version.split()[0]}, numpy {np.__version__}, pyarrow {pa.__version__}")
    if not args.skip_signatures:
        signature_comparison(args.rounds)
    if not args.skip_corpus:
        workdir = args.workdir or Path(tempfile.mkdtemp(prefix="quarry-dedup-bench-"))
        try:
            corpus_run(args.docs, args.shard_rows, args.workers, workdir, args.keep, args.verify)
        finally:
            if not args.keep and args.workdir is None:
                shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
