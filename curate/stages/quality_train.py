"""Training the fastText quality classifier used by ``quality_classifier`` (``curate train-quality``,
``curate/commands/train_quality.py``).

Positives (``__label__hq``) are text like what you want to keep (GPT-3 and MT-NLG used curated
sets such as OpenWebText2, Wikipedia, books); negatives (``__label__lq``) are raw crawl, each from
paths of: a curation output folder (its kept shards), shard files (``.arrow``, ``.parquet``), or JSON
Lines files (``.jsonl``, ``.jsonl.gz``) whose rows have a ``text`` field. Texts go through
``curate.stages.quality.prepare_text`` (as when the stage scores them), which neutralises label words:
fastText reads every word that begins with ``__label__`` as a label, so a crawl page holding
``__label__hq`` words would otherwise add the positive label to its own training lines.

The same documents on both sides teach the classifier nothing: a ``--positive`` and a ``--negative``
path that are the same file, or that hold the same documents (SHA-256 of the texts in order, ``collect``'s
``digests``: a ``.jsonl``, its ``.jsonl.gz`` and a shard of the same documents agree), are refused
(``same_input_problem``, ``same_content_problem``).

Each document is cut into pieces of ``chunk_words`` words, one training example each (``0``: whole
documents); the stage still scores whole documents. fastText's SGD takes one step per example, and
whole documents give too few steps on small sets (scores that stay near 0.5, useless for Pareto
sampling). Training runs in a fresh Python process (``train_fasttext``) with one thread by default, so
the same inputs and seed give the same model byte for byte. The model is written atomically.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

from curate import json_files
from curate.file_kind import file_id, file_problem
from curate.readers.text import clean_surrogates
from curate.schema import TEXT
from curate.shards import manifest_shards, read_shard
from curate.text.fasttext_model import LABEL_PREFIX
from curate.stages.quality import NEGATIVE, POSITIVE, neutralise_labels, prepare_text


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
        raise ValueError(f"{path}: {file_problem(path, folder_ok=True) or 'changed while it was checked'}")
    elif path.suffix in (".arrow", ".parquet"):
        yield from _shard_texts(path)
    elif path.name.endswith((".jsonl", ".jsonl.gz")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                row = json_files.loads(line, f"{path}:{n}")
                text = row.get(TEXT) if isinstance(row, dict) else None
                if not isinstance(text, str):
                    raise ValueError(f"{path}:{n}: no string `text` field")
                yield clean_surrogates(text)[0]  # JSON's "\ud800" escapes: U+FFFD, as the readers do
    else:
        raise ValueError(f"{path}: expected a curation output folder, .arrow, .parquet, .jsonl or .jsonl.gz")


def _shard_texts(path: Path) -> Iterator[str]:
    yield from (t for t in read_shard(path, columns=[TEXT]).column(TEXT).to_pylist() if t)


def collect(paths: list[str], max_docs: int, rng: random.Random, digests: dict | None = None) -> list[str]:
    """Training texts (``prepare_text``) of all documents under ``paths`` (held in memory), or a uniform
    sample of ``max_docs`` of them. ``digests``, when given, receives each path's SHA-256 over all its
    documents (each text's length, then its UTF-8 bytes, in order), sampled or not."""
    sample: list[str] = []
    seen = 0
    for path in paths:
        h = hashlib.sha256()
        for text in iter_texts(path):
            if not text.strip():
                continue
            data = text.encode("utf-8", "surrogatepass")
            h.update(len(data).to_bytes(8, "little"))
            h.update(data)
            seen += 1
            if not max_docs or len(sample) < max_docs:
                sample.append(prepare_text(text))
            else:  # reservoir sampling
                j = rng.randrange(seen)
                if j < max_docs:
                    sample[j] = prepare_text(text)
        if digests is not None:
            digests[str(path)] = h.hexdigest()
    return sample


def same_input_problem(positives: list[str], negatives: list[str]) -> str | None:
    """A message when a ``--positive`` path and a ``--negative`` path are the same file or folder (links,
    ``..``, hard links), or one lies inside the other (a shard of a curation folder given on the other side),
    else None. Checked before anything is read."""
    def ident(p):
        try:
            return file_id(os.stat(p))
        except OSError:
            return None

    for p in positives:
        for n in negatives:
            rp, rn = os.path.realpath(p), os.path.realpath(n)
            ip, in_ = ident(p), ident(n)
            if rp == rn or (ip is not None and ip == in_):
                return (f"--positive {p} and --negative {n} are the same "
                        f"{'folder' if os.path.isdir(p) else 'file'}: the same documents as good and bad examples "
                        "teach the classifier nothing")
            for inner, outer, a, b in ((rn, rp, f"--negative {n}", f"--positive {p}"),
                                       (rp, rn, f"--positive {p}", f"--negative {n}")):
                if inner.startswith(outer.rstrip(os.sep) + os.sep) and os.path.isdir(outer):
                    return (f"{a} lies inside {b}: its documents would be both good and bad examples")
    return None


def same_content_problem(pos_digests: dict, neg_digests: dict, positives: list[str],
                         negatives: list[str]) -> str | None:
    """A message when a positive and a negative path hold the same documents (``collect``'s ``digests``), or when the
    two sides' examples are the same set of texts, else None."""
    empty = hashlib.sha256().hexdigest()
    for p, dp in pos_digests.items():
        for n, dn in neg_digests.items():
            if dp == dn and dp != empty:
                return (f"--positive {p} and --negative {n} hold the same documents (SHA-256 {dp[:16]}...): "
                        "the same text as good and bad examples teaches the classifier nothing")
    if positives and set(positives) == set(negatives):
        return ("--positive and --negative hold the same documents: the same text as good and bad examples "
                "teaches the classifier nothing")
    return None


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
    the model atomically to ``output``. Label words in the texts are neutralised here too
    (``neutralise_labels``), so no text can add a label to its own line."""
    rng = random.Random(seed)
    positives = [neutralise_labels(t) for t in positives]
    negatives = [neutralise_labels(t) for t in negatives]
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
