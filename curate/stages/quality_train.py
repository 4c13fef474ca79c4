"""``curate train-quality``: train the fastText quality classifier used by ``quality_classifier``.

Positives (``__label__hq``) are text like what you want to keep (GPT-3 and MT-NLG used curated
sets such as OpenWebText2, Wikipedia, books); negatives (``__label__lq``) are raw crawl. Each of
``--positive`` and ``--negative`` takes paths of:

- a curation output folder (it holds ``manifest.json``): its kept shards;
- shard files (``.arrow``, ``.parquet``);
- JSON Lines files (``.jsonl``, ``.jsonl.gz``) whose rows have a ``text`` field.

Texts go through ``curate.stages.quality.prepare_text`` (as when the stage scores them).
``--max-docs N`` keeps a uniform random sample of N documents per side (reservoir sampling, fixed
by ``--seed``). ``--valid-fraction F`` holds out that share of each side and prints precision,
recall and accuracy of the positive label on it (score >= 0.5).

Each document is cut into pieces of ``--chunk-words`` (64) words, one training example each
(``0``: whole documents); the stage still scores whole documents. fastText's SGD takes one step
per example, and whole documents give too few steps on small sets: on 200 documents of 2,000
characters, whole-document training left every score within 0.02 of 0.5 (useless for Pareto
sampling), where 64-word pieces gave scores near 0 and 1.

fastText options: ``--epochs`` (5), ``--lr`` (0.5), ``--word-ngrams`` (2), ``--dim`` (100),
``--bucket`` (200,000 hash buckets for the n-gram features: the model file is about
``bucket x dim x 4`` bytes, 80 MB; fastText's own 2M would make it 800 MB), ``--min-count`` (1).
Training runs in a fresh Python process (see ``train_fasttext``) with one thread by default, so
the same inputs and seed give the same model byte for byte; ``--threads`` trades that for speed.
The model is written atomically (a temporary file renamed onto ``--output``).

Example::

    curate train-quality --positive out/wiki/curated --negative out/crawl/curated --output quality.bin
"""
from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

from curate.schema import TEXT
from curate.shards import manifest_shards, read_shard
from curate.text.fasttext_model import LABEL_PREFIX, load_fasttext_model
from curate.stages.quality import NEGATIVE, POSITIVE, prepare_text


def add_arguments(parser) -> None:
    parser.add_argument("--positive", nargs="+", required=True, metavar="PATH",
                        help="high-quality examples: curation output folders, .arrow/.parquet shards, .jsonl files")
    parser.add_argument("--negative", nargs="+", required=True, metavar="PATH",
                        help="low-quality examples (raw crawl), same kinds of paths")
    parser.add_argument("--output", required=True, metavar="MODEL.bin", help="where to write the fastText model")
    parser.add_argument("--epochs", type=int, default=5, help="training epochs (default 5)")
    parser.add_argument("--lr", type=float, default=0.5, help="learning rate (default 0.5)")
    parser.add_argument("--word-ngrams", type=int, default=2, help="word n-gram features (default 2)")
    parser.add_argument("--dim", type=int, default=100, help="vector size (default 100)")
    parser.add_argument("--bucket", type=int, default=200_000,
                        help="hash buckets for word n-gram features (default 200000; the model takes bucket x dim x 4 "
                             "bytes, 80 MB by default; fastText's own default of 2M makes it 800 MB)")
    parser.add_argument("--min-count", type=int, default=1, help="drop words seen fewer times (default 1)")
    parser.add_argument("--chunk-words", type=int, default=64, metavar="N",
                        help="train on pieces of N words, one example each (default 64; 0: whole documents)")
    parser.add_argument("--max-docs", type=int, default=0, metavar="N",
                        help="random sample of at most N documents per side (default 0: all)")
    parser.add_argument("--seed", type=int, default=0, help="sampling, shuffling and training seed (default 0)")
    parser.add_argument("--valid-fraction", type=float, default=0.0, metavar="F",
                        help="hold out this share per side and print precision/recall on it (default 0)")
    parser.add_argument("--threads", type=int, default=1, help="training threads (default 1: reproducible)")


def iter_texts(path: str | Path) -> Iterator[str]:
    """The document texts of one input path (see the module docstring for the kinds)."""
    path = Path(path)
    if path.is_dir():
        if not (path / "manifest.json").is_file():
            raise ValueError(f"{path}: a folder must be a curation output with manifest.json; "
                             "pass shard or .jsonl files directly otherwise")
        for shard in manifest_shards(path):
            yield from _shard_texts(shard)
    elif not path.is_file():
        raise ValueError(f"{path}: no such file or folder")
    elif path.suffix in (".arrow", ".parquet"):
        yield from _shard_texts(path)
    elif path.name.endswith((".jsonl", ".jsonl.gz")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                row = json.loads(line)
                text = row.get(TEXT) if isinstance(row, dict) else None
                if not isinstance(text, str):
                    raise ValueError(f"{path}:{n}: no string `text` field")
                yield text
    else:
        raise ValueError(f"{path}: expected a curation output folder, .arrow, .parquet, .jsonl or .jsonl.gz")


def _shard_texts(path: Path) -> Iterator[str]:
    yield from (t for t in read_shard(path, columns=[TEXT]).column(TEXT).to_pylist() if t)


def collect(paths: list[str], max_docs: int, rng: random.Random) -> list[str]:
    """Prepared texts of all documents under ``paths`` (held in memory), or a uniform sample of
    ``max_docs`` of them."""
    sample: list[str] = []
    seen = 0
    for path in paths:
        for text in iter_texts(path):
            if not text.strip():
                continue
            seen += 1
            if not max_docs or len(sample) < max_docs:
                sample.append(prepare_text(text))
            else:  # reservoir sampling
                j = rng.randrange(seen)
                if j < max_docs:
                    sample[j] = prepare_text(text)
    return sample


def evaluate(model, positives: list[str], negatives: list[str], label: str = POSITIVE) -> dict:
    """Precision, recall and accuracy of ``label`` (score >= 0.5) on held-out texts."""
    def positive_scores(texts):
        labels, probs = model.predict(texts, k=-1) if texts else ([], [])
        return [dict(zip(ls, ps)).get(LABEL_PREFIX + label, 0.0) for ls, ps in zip(labels, probs)]

    tp = sum(1 for s in positive_scores(positives) if s >= 0.5)
    fp = sum(1 for s in positive_scores(negatives) if s >= 0.5)
    fn = len(positives) - tp
    tn = len(negatives) - fp
    total = len(positives) + len(negatives)
    return {
        "precision": tp / (tp + fp) if tp + fp else 0.0,
        "recall": tp / (tp + fn) if tp + fn else 0.0,
        "accuracy": (tp + tn) / total if total else 0.0,
        "positives": len(positives), "negatives": len(negatives),
    }


# Run in a fresh interpreter: fastText 0.9.2 initialises only a tenth of the input matrix when it
# trains with fewer than 10 threads (``DenseMatrix::uniformThread`` cuts the matrix in 10 blocks,
# one per thread) and leaves the rest as the allocator hands it over. In a long-lived process that
# is recycled memory: training then differs from run to run or fails with "Encountered NaN" (seen
# here on the second training in one process). A fresh process with large allocations forced onto
# new, zeroed pages (glibc ``MALLOC_MMAP_THRESHOLD_``) makes the rest start at zero, every time.
_TRAIN_SCRIPT = """
import json, sys
import fasttext
job = json.loads(sys.argv[1])
model = fasttext.train_supervised(**job["args"])
model.save_model(job["output"])
"""


def train_fasttext(train_file: str | Path, output: str | Path, **args) -> None:
    """``fasttext.train_supervised(input=train_file, **args)`` in a fresh process; the model is
    written atomically to ``output``. Raises ``RuntimeError`` with fastText's message on failure."""
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{output.name}.", suffix=".tmp", dir=output.parent)
    os.close(fd)
    try:
        job = {"args": {"input": str(train_file), "verbose": 0, **args}, "output": tmp}
        env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
        proc = subprocess.run([sys.executable, "-c", _TRAIN_SCRIPT, json.dumps(job)], env=env,
                              capture_output=True, text=True)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
            raise RuntimeError(f"fastText training failed: {last}")
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp made it private
        os.replace(tmp, output)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def chunks(text: str, n_words: int) -> list[str]:
    """``text`` (prepared: tokens split by single spaces) in pieces of ``n_words`` tokens; the whole
    text when ``n_words`` is 0."""
    if not n_words:
        return [text]
    words = text.split(" ")
    return [" ".join(words[i:i + n_words]) for i in range(0, len(words), n_words)]


def train(positives: list[str], negatives: list[str], output: str | Path, *, epochs: int = 5, lr: float = 0.5,
          word_ngrams: int = 2, dim: int = 100, bucket: int = 200_000, min_count: int = 1, chunk_words: int = 64,
          seed: int = 0, threads: int = 1):
    """Train on prepared texts (``prepare_text``), one example per ``chunk_words`` piece, and write
    the model atomically to ``output``."""
    rng = random.Random(seed)
    lines = [f"{LABEL_PREFIX}{label} {piece}\n"
             for label, texts in ((POSITIVE, positives), (NEGATIVE, negatives))
             for t in texts for piece in chunks(t, chunk_words)]
    rng.shuffle(lines)
    output = Path(output)
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".train-quality.", dir=output.parent) as tmp:
        train_file = os.path.join(tmp, "train.txt")
        with open(train_file, "w", encoding="utf-8") as f:
            f.writelines(lines)
        train_fasttext(train_file, output, epoch=epochs, lr=lr, wordNgrams=word_ngrams, dim=dim, bucket=bucket,
                       minCount=min_count, seed=seed, thread=threads)


def run(args) -> int:
    if args.valid_fraction < 0 or args.valid_fraction >= 1:
        print("train-quality: --valid-fraction must be in [0, 1)", file=sys.stderr)
        return 2
    if min(args.max_docs, args.chunk_words) < 0 or min(args.epochs, args.threads, args.dim, args.bucket) < 1 or args.lr <= 0:
        print("train-quality: --max-docs and --chunk-words must be >= 0; --epochs, --threads, --dim and --bucket >= 1; "
              "--lr > 0", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    try:
        pos = collect(args.positive, args.max_docs, rng)
        neg = collect(args.negative, args.max_docs, rng)
    except (ValueError, OSError) as e:
        print(f"train-quality: {e}", file=sys.stderr)
        return 2
    if not pos or not neg:
        print(f"train-quality: need documents on both sides (positive {len(pos)}, negative {len(neg)})", file=sys.stderr)
        return 2

    held_pos, held_neg = [], []
    if args.valid_fraction:
        rng.shuffle(pos)
        rng.shuffle(neg)
        k_pos, k_neg = int(len(pos) * args.valid_fraction), int(len(neg) * args.valid_fraction)
        held_pos, pos = pos[:k_pos], pos[k_pos:]
        held_neg, neg = neg[:k_neg], neg[k_neg:]
    print(f"training on {len(pos)} positive and {len(neg)} negative documents"
          + (f"; holding out {len(held_pos)} + {len(held_neg)}" if args.valid_fraction else ""))
    try:
        train(pos, neg, args.output, epochs=args.epochs, lr=args.lr, word_ngrams=args.word_ngrams, dim=args.dim,
              bucket=args.bucket, min_count=args.min_count, chunk_words=args.chunk_words, seed=args.seed,
              threads=args.threads)
    except RuntimeError as e:
        print(f"train-quality: {e}", file=sys.stderr)
        return 1
    if held_pos or held_neg:
        m = evaluate(load_fasttext_model(args.output), held_pos, held_neg)
        print(f"held-out: precision {m['precision']:.3f}  recall {m['recall']:.3f}  accuracy {m['accuracy']:.3f}  "
              f"({m['positives']} positive, {m['negatives']} negative)")
    print(f"wrote {args.output}")
    return 0
