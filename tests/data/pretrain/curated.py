"""Test helper: a curation output folder (Arrow shards + manifest.json) made from the prose sample."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa

from curate.shards import shard_entry, write_json, write_shard

HERE = Path(__file__).parent
PROSE = HERE / "english_prose_sample.jsonl.gz"


def prose_docs(n: int | None = None) -> list[dict]:
    with gzip.open(PROSE, "rt", encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    return docs[:n] if n is not None else docs


def make_curated(out: Path, texts: list, shards: int = 3, fmt: str = "arrow", batch_rows: int | None = None) -> Path:
    """Write ``texts`` in order, cut into ``shards`` shards, plus manifest.json."""
    out = Path(out)
    entries = []
    per = -(-len(texts) // shards)
    for s in range(shards):
        part = texts[s * per:(s + 1) * per]
        table = pa.table({"id": [f"doc{s}-{i}" for i in range(len(part))],
                          "text": pa.array(part, type=pa.string())})
        path = out / "shards" / f"part-{s:05d}.{'parquet' if fmt == 'parquet' else 'arrow'}"
        if batch_rows and fmt == "arrow":  # several record batches in one shard
            import pyarrow.feather as feather
            path.parent.mkdir(parents=True, exist_ok=True)
            feather.write_feather(table, path, compression="zstd", chunksize=batch_rows)
        else:
            write_shard(table, path, fmt)
        entries.append(shard_entry(path, out))
    write_json({"shards": entries, "dropped": []}, out / "manifest.json")
    return out


def curated_and_tokenizer(root: Path, docs: int, *, shards: int, batch_rows: int, vocab: int, max_bytes: int,
                          threads: int = 1):
    """The first ``docs`` prose documents curated under ``root/curated`` and a tokenizer trained on them
    (``root/tok.model``): -> (curated folder, TrainedTokenizer)."""
    from pretrain.data.tokenizer import train_tokenizer

    texts = [d["text"] for d in prose_docs()][:docs]
    cur = make_curated(Path(root) / "curated", texts, shards=shards, batch_rows=batch_rows)
    return cur, train_tokenizer(cur, vocab, Path(root) / "tok.model", max_bytes=max_bytes, threads=threads)
