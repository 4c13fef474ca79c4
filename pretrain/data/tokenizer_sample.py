"""A bounded, reproducible sample of training text spread over every shard (``pretrain tokenizer train --sample-bytes``).

The default sampler (``--max-bytes``) reads every shard's text column to draw documents uniformly: on a corpus of
terabytes that is the whole corpus through one machine. Here each shard gets a share of ``sample_bytes`` in
proportion to its file size, and one task per shard (on a curate executor: in-process, a local pool, or Ray) reads
record batches / row groups in a seeded random order, taking documents in a seeded random order, until its share is
filled: what is read is about the sample plus one batch per shard. The sample depends only on the manifest, the
seed and ``sample_bytes`` (not on the executor or worker count): the lines come back in shard order. Each task
checks its shard against the manifest first (sha256, rows: :mod:`pretrain.data.manifest_check`).
"""
from __future__ import annotations

import os

import numpy as np


def _sample_shard(args: tuple) -> list[str]:
    """Documents of one shard, in seeded random order of batches and rows, up to ``quota`` UTF-8 bytes."""
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    from curate.shards import checked
    from pretrain.data.manifest_check import verify_shard
    from pretrain.data.tokenizer import text_array

    entry, quota, seed, index, text_column = args
    verify_shard(entry)
    rng = np.random.default_rng([seed, index])
    parquet = entry.path.endswith(".parquet")
    source = pq.ParquetFile(entry.path) if parquet else ipc.open_file(entry.path)
    units = source.metadata.num_row_groups if parquet else source.num_record_batches
    out, used = [], 0
    for u in rng.permutation(units):
        if used >= quota:
            break
        if parquet:
            names = source.schema_arrow.names
            batch = source.read_row_group(int(u), columns=[text_column]) if text_column in names else None
        else:
            batch = source.get_batch(int(u))
            names = batch.schema.names
        if text_column not in names:
            raise ValueError(f"shard {entry.name} has no {text_column!r} column (columns: {names})")
        texts = text_array(checked(batch.column(text_column), entry.path), entry.path, text_column)
        for r in rng.permutation(len(texts)):
            text = texts[int(r)].as_py()
            if not isinstance(text, str) or not text:
                continue
            size = len(text.encode())
            if used + size > quota:  # the part that fits: the share is a cap, never overshot
                text = text.encode()[: quota - used].decode("utf-8", "ignore")
                size = len(text.encode())
            out.append(text)
            used += size
            if used >= quota:
                break
    return out


def sample_spread_text(entries: list, sample_bytes: int, seed: int = 0, text_column: str = "text",
                       executor=None) -> tuple[list[str], dict]:
    """Lines for SentencePiece from every shard of ``entries`` (checked manifest entries), ``sample_bytes`` in all."""
    from pretrain.data.tokenizer import _chunks

    if sample_bytes <= 0:
        raise ValueError(f"--sample-bytes must be positive, got {sample_bytes}")
    sizes = np.array([os.path.getsize(e.path) for e in entries], dtype=np.float64)
    total = sizes.sum()
    quotas = np.floor(sample_bytes * sizes / total).astype(np.int64) if total else np.zeros(len(entries), np.int64)
    items = [(e, int(q), seed, i, text_column) for i, (e, q) in enumerate(zip(entries, quotas))]
    if executor is None:
        found = [_sample_shard(item) for item in items]
    else:
        found = executor.map(_sample_shard, items, desc="sample")
    lines, used, docs = [], 0, 0
    for texts in found:
        for text in texts:
            gave = False  # a document counts when it gives text to train on
            for piece in (p for line in text.split("\n") for p in _chunks(line)):
                lines.append(piece)
                used += len(piece.encode())
                gave = True
            docs += gave
    info = {"shards": len(entries), "documents": sum(e.rows for e in entries), "sampled_documents": docs,
            "sampled_bytes": used, "total_bytes": int(total), "sample_bytes": sample_bytes}
    return lines, info
