"""curate.shuffle: layouts by bytes, partitioned files, document keys; and that no plan task reads every shard."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from curate import shuffle
from curate.executors.local import LocalExecutor
from curate.schema import documents_to_table
from curate.shards import write_shard


def test_layout_follows_bytes_not_shard_count(tmp_path):
    sizes = [100] * 40 + [5000] + [100] * 9
    paths = []
    for i, n in enumerate(sizes):
        p = tmp_path / f"s{i:03d}"
        p.write_bytes(b"x" * n)
        paths.append(str(p))
    lay = shuffle.make_layout(paths, task_bytes=1000, range_bytes=2500)
    assert lay.bounds[0] == 0 and lay.bounds[-1] == len(paths)
    per_group = [sum(sizes[a:b]) for a, b in zip(lay.bounds[:-1], lay.bounds[1:])]
    assert all(s <= 1000 for k, s in enumerate(per_group) if not (lay.bounds[k + 1] - lay.bounds[k] == 1))
    assert 5000 in per_group  # a large shard is a group of its own
    assert lay.ranges == max(shuffle.MIN_RANGES, -(-sum(sizes) // 2500))
    assert [lay.group_of(s) for s in range(len(paths))] == list(lay.groups_of(np.arange(len(paths))))
    assert shuffle.make_layout(paths, 1000, 2500) == lay  # a pure function of the files
    # the same bytes cut into 10x more shards: about the same number of groups and ranges
    many = []
    for i in range(400):
        p = tmp_path / f"m{i:03d}"
        p.write_bytes(b"x" * 25)
        many.append(str(p))
    few = []
    for i in range(4):
        p = tmp_path / f"f{i}"
        p.write_bytes(b"x" * 2500)
        few.append(str(p))
    a, b = shuffle.make_layout(many, 1000, 2500), shuffle.make_layout(few, 1000, 2500)
    assert a.ranges == b.ranges and a.groups <= 2 * max(b.groups, shuffle.MIN_GROUPS)


def test_parts_round_trip_in_order_with_empty_parts(tmp_path):
    t = pa.table({"k": pa.array([5, 1, 4, 1, 9, 2], pa.uint64()), "v": pa.array(["a", "b", "c", "d", "e", "f"])})
    part = np.array([2, 0, 2, 0, 3, 0])
    path = shuffle.write_parts(t, part, 5, tmp_path / "x.arrow")
    got = [shuffle.read_part([path], k, t.schema).column("v").to_pylist() for k in range(5)]
    assert got == [["b", "d", "f"], [], ["a", "c"], ["e"], []]
    both = shuffle.read_part([path, path], 2, t.schema)
    assert both.column("v").to_pylist() == ["a", "c", "a", "c"]
    with pytest.raises(ValueError):
        shuffle.write_parts(t, part, 3, tmp_path / "y.arrow")
    assert not (tmp_path / "y.arrow").exists()
    empty = shuffle.write_parts(t.slice(0, 0), np.zeros(0, np.int64), 3, tmp_path / "e.arrow")
    assert shuffle.read_part([empty], 1, t.schema).num_rows == 0


def test_keys_and_ranges():
    keys = shuffle.doc_keys(7, np.array([0, 3, 2**32 - 1]))
    assert shuffle.key_shard(keys).tolist() == [7, 7, 7] and shuffle.key_row(keys).tolist() == [0, 3, 2**32 - 1]
    assert (shuffle.doc_keys(1, np.array([0])) > shuffle.doc_keys(0, np.array([2**32 - 1]))).all()
    h = np.sort(np.random.default_rng(0).integers(0, 2**64, size=10_000, dtype=np.uint64))
    r = shuffle.key_range(h, 7)
    assert r.min() == 0 and r.max() == 6 and (np.diff(r) >= 0).all()
    assert abs(np.bincount(r).min() - 10_000 / 7) < 200
    assert shuffle.key_range(np.array([2**64 - 1], np.uint64), 3).tolist() == [2]


def test_unique_pairs_matches_numpy_unique():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 50, size=5000, dtype=np.uint64) | np.uint64(2**63)  # the high bit too
    b = rng.integers(0, 50, size=5000, dtype=np.uint64)
    got = shuffle.unique_pairs(a, b)
    assert got.dtype == np.uint64 and np.array_equal(got, np.unique(np.stack([a, b], axis=1), axis=0))
    assert shuffle.unique_pairs(np.zeros(0, np.uint64), np.zeros(0, np.uint64)).shape == (0, 2)


def test_task_output_done_only_with_marker_and_every_output(tmp_path):
    out, marker, info = shuffle.task_output(tmp_path, "clusters", 3, also=("drops",))
    assert out == tmp_path / "clusters" / "00003.arrow" and marker == out.with_suffix(".json") and info is None
    out.parent.mkdir()
    out.write_bytes(b"x")
    assert shuffle.task_output(tmp_path, "clusters", 3)[2] is None  # no marker: the task runs again
    marker.write_text('{"n": 1}')
    assert shuffle.task_output(tmp_path, "clusters", 3)[2] == {"n": 1}
    assert shuffle.task_output(tmp_path, "clusters", 3, also=("drops",))[2] is None  # its other output is missing
    (tmp_path / "drops").mkdir()
    (tmp_path / "drops" / "00003.arrow").write_bytes(b"x")
    assert shuffle.task_output(tmp_path, "clusters", 3, also=("drops",))[2] == {"n": 1}


def test_no_plan_task_reads_every_shard(tmp_path, monkeypatch):
    """200 small shards: every task of every plan reads at most one group's shards, and every range task
    one part of each group's file (never 200 files); each shard is read a bounded number of times."""
    monkeypatch.setattr(shuffle, "TASK_BYTES", 20_000)
    monkeypatch.setattr(shuffle, "RANGE_BYTES", 40_000)
    rng = np.random.default_rng(1)
    vocab = [f"w{i}" for i in range(5000)]
    texts = [" ".join(rng.choice(vocab, size=40)) for _ in range(1000)]
    texts += texts[:100]  # exact copies
    paths = []
    for k in range(200):
        rows = [{"id": f"d{k}-{j}", "text": t, "source": "t", "url": "", "content_type": "text/plain"}
                for j, t in enumerate(texts[k::200])]
        paths.append(str(write_shard(documents_to_table(rows), tmp_path / f"in-{k:05d}.arrow")))
    ev = tmp_path / "ev.txt"
    ev.write_text(texts[3] + "\n")
    import curate.shards
    from curate.stages import decontaminate, exact_dedup
    from curate.stages.minhash import buckets, clusters, stage

    reads, parts = Counter(), []
    real_read_shard, real_read_part = curate.shards.read_shard, shuffle.read_part

    def counting_read_shard(path, columns=None):
        reads[str(path)] += 1
        return real_read_shard(path, columns)

    def counting_read_part(files, part, schema):
        files = list(files)
        parts.append(len(files))
        return real_read_part(files, part, schema)

    for mod in (exact_dedup, buckets, clusters, decontaminate):
        monkeypatch.setattr(mod, "read_shard", counting_read_shard)
    monkeypatch.setattr(shuffle, "read_part", counting_read_part)
    plans = [exact_dedup.ExactDedup("e", None), stage.MinHashDedup("m", stage.Params()),
             decontaminate.Decontaminate("d", decontaminate.Params(eval_files=[str(ev)]))]
    for i, p in enumerate(plans):
        stats = p.plan(paths, tmp_path / f"plan{i}", LocalExecutor(1))  # in-process: the counters see every task
        assert stats["documents"] == 1100
    layout = shuffle.load_layout(tmp_path / "plan0")
    assert 2 < layout.groups < 40 and layout.ranges >= 2
    assert max(parts) <= max(layout.groups, layout.ranges) < 200
    assert max(reads.values()) <= 6  # a shard is read by a few phases, never once per range
