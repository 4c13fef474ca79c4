"""Data-path figures, as ratios measured in one run:

1. tokenization MB/s end to end (curated Arrow shards in, .bin/.idx out, `pretrain tokenize`) against
   SentencePiece's own batch encode of the same texts already in memory (the limit), on one worker, and
   two workers against one;
2. random reads of 2,049-token samples per second through the GPT dataset against bare numpy memmap
   slices at random offsets of the same token file, over that one file and over the same tokens cut into
   --read-parts parts (a dataset of parts, `pretrain tokenize --parts`: the samples are the same);
3. seconds to build the GPT indices (document, sample, shuffle) for 1 billion tokens of synthetic
   document lengths, and the blend indices for them;
4. seconds to build, then to load from the cache, the indices of a blend over 10, 1,000 and 10,000 datasets
   (--datasets), and of one dataset of that many parts (`pretrain tokenize --parts`).

    .venv/bin/python benchmarks/dataset.py              # ~2-4 minutes on 2 cores
    .venv/bin/python benchmarks/dataset.py --mb 8 --read-tokens 50M --quick
    .venv/bin/python benchmarks/dataset.py --sections 4 --datasets 10,1000,10000

The text is the project's shared prose corpus when it is there (else the test sample), repeated up to
--mb megabytes; the timed passes are interleaved and each figure is the best of --rounds.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHARED_PROSE = ROOT.parent / "shared" / "corpora" / "prose" / "english_prose.jsonl"
TEST_PROSE = ROOT / "tests" / "data" / "pretrain" / "english_prose_sample.jsonl.gz"


def count(text: str) -> int:
    t = text.strip().upper().replace("_", "")
    scale = {"K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9}.get(t[-1:], None)
    return int(float(t[:-1]) * scale) if scale else int(float(t))


def load_texts(path: Path, mb: float) -> list[str]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        base = [json.loads(line)["text"] for line in f]
    texts, size, i = [], 0, 0
    while size < mb * 1e6:
        t = base[i % len(base)]
        texts.append(t)
        size += len(t.encode())
        i += 1
    return texts


def write_curated(out: Path, texts: list[str], shards: int) -> None:
    import pyarrow as pa

    from curate.shards import shard_entry, write_json, write_shard

    entries = []
    per = -(-len(texts) // shards)
    for s in range(shards):
        part = texts[s * per:(s + 1) * per]
        path = out / "shards" / f"part-{s:05d}.arrow"
        write_shard(pa.table({"id": [f"{s}-{i}" for i in range(len(part))], "text": part}), path)
        entries.append(shard_entry(path, out))
    write_json({"shards": entries, "dropped": []}, out / "manifest.json")


def bench_tokenize(args, work: Path) -> dict:
    from pretrain.data.tokenize import tokenize_curated
    from pretrain.data.tokenizer import train_tokenizer

    corpus = Path(args.corpus) if args.corpus else (SHARED_PROSE if SHARED_PROSE.is_file() else TEST_PROSE)
    texts = load_texts(corpus, args.mb)
    mb = sum(len(t.encode()) for t in texts) / 1e6
    cur = work / "curated"
    write_curated(cur, texts, args.shards)
    t0 = time.perf_counter()
    tok = train_tokenizer(cur, args.vocab, work / "tok.model", max_bytes=min(int(args.mb * 1e6), 20_000_000))
    print(f"corpus {corpus.name}: {len(texts):,} documents, {mb:.1f} MB in {args.shards} shards; "
          f"BPE vocab {tok.vocab_size} trained in {time.perf_counter() - t0:.1f} s")

    best = {"sentencepiece batch encode, in memory, 1 thread": 1e9, "pretrain tokenize, 1 worker": 1e9,
            "pretrain tokenize, 2 workers": 1e9}
    cores = {}  # CPU the workers got per second of wall time: how many cores were really free
    for r in range(args.rounds):
        t = time.perf_counter()
        ids = tok.encode_batch(texts, num_threads=1)
        best["sentencepiece batch encode, in memory, 1 thread"] = min(
            best["sentencepiece batch encode, in memory, 1 thread"], time.perf_counter() - t)
        n_tokens = sum(map(len, ids)) + len(ids)
        del ids
        for workers in (1, 2):
            prefix = work / f"tok_out_{workers}"
            for p in work.glob(f"tok_out_{workers}*"):
                shutil.rmtree(p) if p.is_dir() else p.unlink()
            t = time.perf_counter()
            stats = tokenize_curated(cur, tok.model_path, prefix, workers=workers, progress=False, log=lambda m: None)
            wall = time.perf_counter() - t
            key = f"pretrain tokenize, {workers} worker{'s' if workers > 1 else ''}"
            if wall < best[key]:
                best[key] = wall
                cores[workers] = stats["worker_cpu_seconds"] / wall
            assert stats["tokens"] == n_tokens
    a, b = (work / "tok_out_1.bin").read_bytes(), (work / "tok_out_2.bin").read_bytes()
    assert a == b, "1 and 2 workers must write the same bytes"
    print(f"\n1. tokenization, {mb:.1f} MB of text, {n_tokens:,} tokens (best of {args.rounds}):")
    for k, v in best.items():
        print(f"   {k:50s} {mb / v:7.2f} MB/s")
    print(f"   (tokenize workers were busy {cores[1]:.2f} and {cores[2]:.2f} cores per second of wall time with 1 "
          f"and 2 workers: below 2 means the other cores were taken)")
    base = mb / best["sentencepiece batch encode, in memory, 1 thread"]
    one, two = mb / best["pretrain tokenize, 1 worker"], mb / best["pretrain tokenize, 2 workers"]
    # throughput per CPU-second the workers actually got: what 2 workers would reach with 2 free cores
    per_cpu = (two / cores[2]) / (one / cores[1]) if cores[1] and cores[2] else float("nan")
    return {"tok_1_vs_sp": one / base, "tok_2_vs_1": two / one, "cores_2": cores[2], "per_cpu_2_vs_1": per_cpu}


def synthetic_lengths(n_tokens: int, rng, mu: float = 6.5, sigma: float = 1.0) -> np.ndarray:
    """Log-normal document lengths (median e^6.5 = 665, mean ~1,100 tokens: web-page-like), summing to n_tokens."""
    est = int(n_tokens / np.exp(mu + sigma ** 2 / 2) * 1.1) + 10
    lengths = np.clip(rng.lognormal(mu, sigma, est), 1, 200_000).astype(np.int64)
    cum = np.cumsum(lengths)
    k = int(np.searchsorted(cum, n_tokens))
    lengths = lengths[:k + 1]
    lengths[-1] -= int(cum[k] - n_tokens)
    return lengths[lengths > 0]


def bench_reads(args, work: Path) -> dict:
    from pretrain.data.gpt_dataset import build_gpt_dataset
    from pretrain.data.indexed import IndexedDataset, write_index

    rng = np.random.default_rng(0)
    lengths = synthetic_lengths(args.read_tokens, rng)
    prefix = work / "reads"
    rng.integers(0, 32000, int(lengths.sum()), dtype=np.uint16).tofile(f"{prefix}.bin")
    write_index(f"{prefix}.idx", np.uint16, lengths, np.arange(len(lengths) + 1))
    ix = IndexedDataset(prefix)
    ds = build_gpt_dataset(ix, "1", "train", None, 2048, 1234, work / "reads_cache")
    pds = build_gpt_dataset(write_read_parts(work / "reads_parts", ix, args.read_parts), "1", "train", None, 2048,
                            1234, work / "reads_parts_cache")
    tokens = ix.tokens
    n = args.reads
    idx = rng.integers(0, len(ds), n)
    idx_list = idx.tolist()
    offsets = rng.integers(0, len(tokens) - 2049, n).tolist()
    ds[0], ds.get_batch(idx[:4]), pds[0], pds.get_batch(idx[:4])  # compile / load the gathers once
    assert np.array_equal(pds.get_batch(idx[:256]), ds.get_batch(idx[:256]))
    sf = np.asarray(ds.sample_index)
    j = np.asarray(ds.shuffle_index)[idx[:20000]].astype(np.int64)
    parts = float(np.mean(sf[j + 1, 0] - sf[j, 0] + 1))
    i64 = np.int64

    def bare(chunk):
        for o in offsets[chunk]:
            tokens[o:o + 2049].copy()

    def bare64(chunk):
        for o in offsets[chunk]:
            tokens[o:o + 2049].astype(i64)

    def one(chunk):
        for i in idx_list[chunk]:
            ds[i]

    def batch(chunk):
        for s in range(chunk.start, chunk.stop, 32):
            ds.get_batch(idx[s:min(s + 32, chunk.stop)])

    def parts_one(chunk):
        for i in idx_list[chunk]:
            pds[i]

    def parts_batch(chunk):
        for s in range(chunk.start, chunk.stop, 32):
            pds.get_batch(idx[s:min(s + 32, chunk.stop)])

    fns = {"bare memmap slice + copy (uint16)": bare, "bare memmap slice -> int64": bare64,
           "GPTDataset ds[i] (int64)": one, "GPTDataset get_batch(32 random) (int64)": batch,
           f"{args.read_parts} parts: ds[i] (int64)": parts_one,
           f"{args.read_parts} parts: get_batch(32 random) (int64)": parts_batch}
    best = {k: 0.0 for k in fns}
    for r in range(args.rounds):
        tot = {k: 0.0 for k in fns}
        for c in range(0, n, 3200):
            chunk = slice(c, min(c + 3200, n))
            for k, f in fns.items():
                t = time.perf_counter()
                f(chunk)
                tot[k] += time.perf_counter() - t
        for k in fns:
            best[k] = max(best[k], n / tot[k])
    print(f"\n2. random reads of 2,049-token samples, {len(tokens) / 1e6:.0f}M-token file, {len(ix):,} documents "
          f"(mean {len(tokens) / len(ix):.0f} tokens), {n:,} reads x {args.rounds} rounds (best); a sample "
          f"spans {parts:.2f} documents on average:")
    for k, v in best.items():
        print(f"   {k:45s} {v:10,.0f} samples/s  {1e9 / v:6,.0f} ns/sample")
    return {"parts_read_vs_one": best[f"{args.read_parts} parts: ds[i] (int64)"] / best["GPTDataset ds[i] (int64)"],
            "parts_batch_vs_one": best[f"{args.read_parts} parts: get_batch(32 random) (int64)"]
            / best["GPTDataset get_batch(32 random) (int64)"],
            "read_vs_bare": best["GPTDataset ds[i] (int64)"] / best["bare memmap slice + copy (uint16)"],
            "read_vs_bare64": best["GPTDataset ds[i] (int64)"] / best["bare memmap slice -> int64"],
            "batch_vs_bare": best["GPTDataset get_batch(32 random) (int64)"] / best["bare memmap slice + copy (uint16)"],
            "batch_vs_bare64": best["GPTDataset get_batch(32 random) (int64)"] / best["bare memmap slice -> int64"]}


def write_read_parts(folder: Path, ix, n: int):
    """The documents of ``ix`` cut into ``n`` parts of about equal documents, as `pretrain tokenize --parts` writes them."""
    from pretrain.data.indexed import data_file_path, write_index
    from pretrain.data.parts import PartsDataset, part_name, write_parts_index

    folder.mkdir(parents=True, exist_ok=True)
    bounds = np.linspace(0, len(ix), n + 1).astype(np.int64)
    starts = np.append(ix.sequence_pointers // ix.dtype.itemsize, len(ix.tokens))
    parts = []
    for k in range(n):
        a, b = int(bounds[k]), int(bounds[k + 1])
        prefix = folder / part_name(k)
        ix.tokens[starts[a]:starts[b]].tofile(data_file_path(prefix))
        write_index(f"{prefix}.idx", ix.dtype, ix.sequence_lengths[a:b], np.arange(b - a + 1), durable=False)
        parts.append({"name": part_name(k), "documents": b - a, "tokens": int(starts[b] - starts[a]),
                      "bin_bytes": os.path.getsize(data_file_path(prefix))})
    write_parts_index(folder, ix.dtype, parts)
    return PartsDataset(folder)


def bench_index_build(args) -> dict:
    from pretrain.data.blend import build_blending_indices
    from pretrain.data.gpt_dataset import build_gpt_indices, requested_per_dataset

    rng = np.random.default_rng(1)
    lengths = synthetic_lengths(args.index_tokens, rng).astype(np.int32)
    num_samples = (int(lengths.sum()) - 1) // 2048
    build_blending_indices([0.5, 0.5], 10)  # compile outside the timing
    times = []
    for _ in range(2):
        t = time.perf_counter()
        ix = build_gpt_indices(lengths, np.arange(len(lengths), dtype=np.int32), num_samples, 2048, seed=1234)
        times.append(time.perf_counter() - t)
    t = time.perf_counter()
    di, _ = build_blending_indices([0.7, 0.3], sum(requested_per_dataset([0.7, 0.3], num_samples, 0.0)))
    blend = time.perf_counter() - t
    print(f"\n3. index build, {lengths.sum() / 1e9:.2f}B tokens in {len(lengths):,} synthetic documents, seq_len 2048, "
          f"{num_samples:,} samples ({ix.num_epochs} epoch):")
    print(f"   GPT indices (document, sample, shuffle)          {min(times):7.2f} s")
    print(f"   blend indices for {len(di):,} samples (2 datasets)  {blend:7.2f} s")
    return {"index_s": min(times), "blend_s": blend}


def make_many(folder: Path, n: int, docs: int, rng) -> list[str]:
    """``n`` small indexed datasets ``folder/part-NNNNN.bin/.idx`` (untimed) and a ``parts.json`` naming them, so the
    same files are both ``n`` datasets of a blend and one dataset of ``n`` parts."""
    from pretrain.data.indexed import IndexedDatasetBuilder, data_file_path
    from pretrain.data.parts import part_name, write_parts_index

    parts = []
    for i in range(n):
        lengths = rng.integers(20, 600, docs)
        prefix = folder / part_name(i)
        with IndexedDatasetBuilder(prefix, np.uint16, durable=False) as b:
            b.add_documents(rng.integers(0, 8000, int(lengths.sum())).astype(np.uint16), lengths)
        parts.append({"name": part_name(i), "documents": docs, "tokens": int(lengths.sum()),
                      "bin_bytes": os.path.getsize(data_file_path(prefix)), "rows": docs, "shards": 1})
    write_parts_index(folder, np.uint16, parts)
    return [str(folder / p["name"]) for p in parts]


def bench_many_datasets(args, work: Path) -> dict:
    """Seconds to build, then to load from the cache, the indices of a blend over N datasets (N in --datasets),
    and of one dataset of N parts, for --many-samples train samples of 2,049 tokens."""
    from pretrain.data.blend import build_blend_splits
    from pretrain.data.blend_spec import BlendSpec, DatasetSpec

    rng = np.random.default_rng(2)
    build_blend_splits(BlendSpec([DatasetSpec("a", make_many(work / "warm", 2, 50, rng)[0], 1.0),
                                  DatasetSpec("b", str(work / "warm" / "part-00001"), 1.0)]), 64, (10, 0, 0), 1, None)
    print(f"\n4. index build at scale: {args.many_samples:,} train samples of seq_len 2048, datasets of "
          f"{args.many_docs} documents (~{args.many_docs * 310:,} tokens) each:")
    print(f"   {'datasets':>9s}  {'blend build':>11s}  {'cached load':>11s}  {'1 dataset of N parts: build':>27s}  "
          f"{'cached load':>11s}")
    out = {}
    for n in args.datasets:
        folder = work / f"many{n}"
        prefixes = make_many(folder, n, args.many_docs, rng)
        spec = BlendSpec([DatasetSpec(f"d{i:05d}", p, weight=1.0) for i, p in enumerate(prefixes)])
        times = []
        for cache, what in ((work / f"cache{n}", spec), (work / f"pcache{n}", str(folder))):
            row = []
            for _ in range(2):  # build, then cached load (a new call: what a restarted run does)
                t = time.perf_counter()
                build_blend_splits(what, 2048, (args.many_samples, 0, 0), 1234, cache)
                row.append(time.perf_counter() - t)
            times += row
            shutil.rmtree(cache)
        shutil.rmtree(folder)
        print(f"   {n:9,d}  {times[0]:9.2f} s  {times[1]:9.2f} s  {times[2]:25.2f} s  {times[3]:9.2f} s")
        out[n] = times
    return {"many": out}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", help="JSONL(.gz) with a 'text' field (default: the shared prose corpus)")
    p.add_argument("--mb", type=float, default=16, help="MB of text to tokenize (default 16)")
    p.add_argument("--shards", type=int, default=8, help="curated shards (default 8)")
    p.add_argument("--vocab", type=int, default=8000, help="BPE vocabulary (default 8000)")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds, best kept (default 3)")
    p.add_argument("--read-tokens", type=count, default=count("100M"), help="tokens in the read benchmark file")
    p.add_argument("--reads", type=int, default=100_000, help="random reads per round (default 100,000)")
    p.add_argument("--read-parts", type=int, default=8, help="parts of the read benchmark's dataset of parts "
                   "(default 8)")
    p.add_argument("--index-tokens", type=count, default=count("1B"), help="tokens for the index build (default 1B)")
    p.add_argument("--workdir", help="keep files here (default: a temporary folder)")
    p.add_argument("--datasets", type=lambda t: [count(x) for x in t.split(",")], default=[10, 1000, 10000],
                   help="blend sizes of the index-at-scale figures (default 10,1000,10000)")
    p.add_argument("--many-docs", type=int, default=100, help="documents per dataset there (default 100)")
    p.add_argument("--many-samples", type=count, default=count("100K"), help="train samples there (default 100K)")
    p.add_argument("--sections", default="1,2,3,4", help="which figures: 1 tokenize, 2 reads, 3 index build, "
                   "4 index build at scale (default all)")
    args = p.parse_args(argv)
    sections = set(args.sections.split(","))
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="quarry-dataset-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"benchmarks/dataset.py on {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}")
    r = {}
    try:
        r |= bench_tokenize(args, work) if "1" in sections else {}
        r |= bench_reads(args, work) if "2" in sections else {}
        r |= bench_index_build(args) if "3" in sections else {}
        r |= bench_many_datasets(args, work) if "4" in sections else {}
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    if not {"1", "2", "3"} <= sections:
        return 0
    print("\nratios (goal):")
    print(f"   tokenize 1 worker / sentencepiece in-memory batch encode   {r['tok_1_vs_sp']:5.2f}x  (>= 0.85)")
    print(f"   tokenize 2 workers / 1 worker                              {r['tok_2_vs_1']:5.2f}x  (>= 1.7; "
          f"the 2 workers got {r['cores_2']:.2f} cores)")
    print(f"   tokenize MB per worker CPU-second, 2 workers / 1 worker     {r['per_cpu_2_vs_1']:5.2f}x  "
          "(1.0 = no parallel overhead)")
    print(f"   GPTDataset ds[i] / bare memmap slice (uint16 copy)         {r['read_vs_bare']:5.2f}x  (>= 0.9)")
    print(f"   GPTDataset ds[i] / bare memmap slice -> int64              {r['read_vs_bare64']:5.2f}x")
    print(f"   GPTDataset get_batch / bare memmap slice (uint16 copy)     {r['batch_vs_bare']:5.2f}x")
    print(f"   GPTDataset get_batch / bare memmap slice -> int64          {r['batch_vs_bare64']:5.2f}x")
    print(f"   dataset of parts ds[i] / one-file ds[i]                    {r['parts_read_vs_one']:5.2f}x")
    print(f"   dataset of parts get_batch / one-file get_batch            {r['parts_batch_vs_one']:5.2f}x")
    print(f"   index build for 1B tokens                                  {r['index_s']:5.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
