"""exact_dedup: a partitioned plan (hash groups -> ranges -> texts -> per-shard drop lists)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from curate import shuffle
from curate.executors.local import LocalExecutor
from curate.schema import documents_to_table
from curate.shards import read_shard, write_shard
from curate.stages import exact_dedup
from curate.stages.exact_dedup import ExactDedup, Params, normalized


def make_corpus(tmp: Path, shards: int = 23, seed: int = 3):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(3000)]
    uniques = [" ".join(rng.choice(words, size=int(rng.integers(5, 40)))) for _ in range(600)]
    docs = []
    for i in range(900):
        if i >= 50 and rng.random() < 0.3:  # an exact copy of an earlier document, spacing changed
            src = docs[int(rng.integers(len(docs)))][1]
            docs.append((f"d{i:04d}", "  " + src.replace(" ", "\n ", 1)))
        else:
            docs.append((f"d{i:04d}", uniques[i % len(uniques)] + f" u{i}"))
    paths, per = [], -(-len(docs) // shards)
    for k in range(shards):
        rows = [{"id": i, "text": t, "source": "t", "url": "", "content_type": "text/plain"} for i, t in docs[k * per:(k + 1) * per]]
        paths.append(str(write_shard(documents_to_table(rows), tmp / f"in-{k:05d}.arrow")))
    return docs, paths


def expected(docs, lowercase=False):
    first, out = {}, {}
    for i, t in docs:
        n = normalized(t, lowercase)
        if n in first:
            out[i] = first[n]
        else:
            first[n] = i
    return out


def run(paths, plan_dir, workers=1, **params):
    stage = ExactDedup("exact_dedup", Params(**params))
    stats = stage.plan(paths, Path(plan_dir), LocalExecutor(workers))
    res = [stage.apply_with_plan(read_shard(p), i, Path(plan_dir)) for i, p in enumerate(paths)]
    kept = pa.concat_tables([r.kept for r in res])
    dropped = pa.concat_tables([r.dropped for r in res])
    return stats, kept, dropped


@pytest.fixture
def small_parts(monkeypatch):
    """Several shard groups and several hash ranges even on a small corpus."""
    monkeypatch.setattr(shuffle, "TASK_BYTES", 6000)
    monkeypatch.setattr(shuffle, "RANGE_BYTES", 9000)


def test_drops_exactly_the_later_copies_with_their_original(tmp_path, small_parts):
    docs, paths = make_corpus(tmp_path)
    stats, kept, dropped = run(paths, tmp_path / "plan", workers=2)
    assert stats["shard_groups"] > 3 and stats["hash_ranges"] > 3
    want = expected(docs)
    assert dict(zip(dropped.column("id").to_pylist(), dropped.column("duplicate_of").to_pylist())) == want
    assert set(dropped.column("reason").to_pylist()) == {"exact_duplicate"}
    assert kept.num_rows + dropped.num_rows == len(docs) and stats["duplicates"] == len(want) > 100
    assert kept.column("id").to_pylist() == [i for i, _ in docs if i not in want]  # order kept


def test_same_plan_files_for_any_worker_count_and_after_a_kill(tmp_path, small_parts):
    _, paths = make_corpus(tmp_path)
    s1, k1, _ = run(paths, tmp_path / "w1", workers=1)
    s2, k2, _ = run(paths, tmp_path / "w2", workers=2)
    assert s1 == s2 and k1.equals(k2)
    f1 = sorted(p.relative_to(tmp_path / "w1") for p in (tmp_path / "w1").rglob("*") if p.is_file())
    f2 = sorted(p.relative_to(tmp_path / "w2") for p in (tmp_path / "w2").rglob("*") if p.is_file())
    assert f1 == f2
    for f in f1:
        assert (tmp_path / "w1" / f).read_bytes() == (tmp_path / "w2" / f).read_bytes(), f
    plan = tmp_path / "w1"  # a kill: the stats and a part of every phase are missing
    (plan / exact_dedup.STATS_FILE).unlink()
    for sub in ("hashes", "cand", "texts", "resolved", "drops"):
        victims = sorted((plan / sub).iterdir())
        victims[len(victims) // 2].unlink()
    s3, k3, _ = run(paths, plan, workers=2)
    assert s3 == s1 and k3.equals(k1)


def test_hash_collisions_never_drop_a_different_text(tmp_path, small_parts, monkeypatch):
    docs, paths = make_corpus(tmp_path)
    monkeypatch.setattr(exact_dedup, "text_hashes", lambda texts, lc: np.full(len(texts), 7, np.uint64))
    stats, _, dropped = run(paths, tmp_path / "plan", workers=1)  # in-process: the patch applies
    assert dict(zip(dropped.column("id").to_pylist(), dropped.column("duplicate_of").to_pylist())) == expected(docs)
    assert stats["hash_collisions"] == 1 and stats["hash_collisions_checked"] == len(docs)


def test_lowercase_and_empty_shards(tmp_path):
    rows = [[("a", "Hello  World"), ("b", "hello world")], [], [("c", "HELLO WORLD"), ("d", "other")]]
    paths = []
    for k, part in enumerate(rows):
        t = documents_to_table([{"id": i, "text": x, "source": "t", "url": "", "content_type": "text/plain"} for i, x in part])
        paths.append(str(write_shard(t, tmp_path / f"in-{k}.arrow")))
    _, kept, dropped = run(paths, tmp_path / "p1")
    assert kept.num_rows == 4
    _, kept, dropped = run(paths, tmp_path / "p2", lowercase=True)
    assert dict(zip(dropped.column("id").to_pylist(), dropped.column("duplicate_of").to_pylist())) == {"b": "a", "c": "a"}
    stats = ExactDedup("exact_dedup", Params()).plan([], tmp_path / "p3", LocalExecutor(1))
    assert stats["documents"] == 0
