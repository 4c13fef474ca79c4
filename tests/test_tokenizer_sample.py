"""`pretrain tokenizer train --sample-bytes`: a bounded sample spread over every shard, the same on any executor."""

from curate.executors.local import LocalExecutor
from pretrain.cli import main as pretrain_main
from pretrain.data.manifest_check import manifest_entries
from pretrain.data.tokenizer import load_tokenizer
from pretrain.data.tokenizer_sample import sample_spread_text

import curated  # tests/data/pretrain/curated.py (pytest's pythonpath)


def test_the_sample_is_bounded_spread_and_reproducible(tmp_path):
    texts = [d["text"] for d in curated.prose_docs()][:240]
    cur = curated.make_curated(tmp_path / "cur", texts, shards=8, batch_rows=10)
    entries = manifest_entries(cur)
    lines, info = sample_spread_text(entries, 200_000, seed=3)
    assert 150_000 < info["sampled_bytes"] <= 200_000 and sum(len(x.encode()) for x in lines) == info["sampled_bytes"]
    per_shard = [set(texts[i * 30:(i + 1) * 30]) for i in range(8)]
    joined = "\n".join(lines)
    assert all(any(t.split("\n")[0][:200] in joined for t in shard) for shard in per_shard)  # every shard gave text
    ex = LocalExecutor(2)
    try:
        assert sample_spread_text(entries, 200_000, seed=3, executor=ex)[0] == lines  # same on a pool
    finally:
        ex.close()
    assert sample_spread_text(entries, 200_000, seed=4)[0] != lines  # another seed, another sample
    small, _ = sample_spread_text(entries, 5_000, seed=3)
    assert sum(len(x.encode()) for x in small) <= 5_000


def test_training_with_sample_bytes(tmp_path, capsys):
    cur = curated.make_curated(tmp_path / "cur", [d["text"] for d in curated.prose_docs()][:120], shards=4)
    out = tmp_path / "tok.model"
    rc = pretrain_main(["tokenizer", "train", "--input", str(cur), "--vocab-size", "500", "--output", str(out),
                        "--sample-bytes", "300K", "--threads", "2"])
    assert rc == 0 and load_tokenizer(out).vocab_size == 500
    rc = pretrain_main(["tokenizer", "train", "--input", str(cur), "--vocab-size", "500", "--output", str(out),
                        "--executor", "local"])
    assert rc == 2 and "give --sample-bytes too" in capsys.readouterr().err
