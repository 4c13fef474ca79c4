"""GPT sample indices with Megatron-core's semantics, the index cache, and (optionally) Megatron itself."""
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pretrain.data.gpt_dataset import (
    EmptySplitError, IndexCache, build_gpt_dataset, build_gpt_indices, build_sample_index, num_epochs_needed,
    parse_split, split_ranges,
)
from pretrain.data.indexed import IndexedDataset, IndexedDatasetBuilder

HERE = Path(__file__).parent


def make_dataset(prefix, lengths, seed=0, vocab=30000):
    rng = np.random.default_rng(seed)
    with IndexedDatasetBuilder(prefix, np.uint16) as b:
        for n in lengths:
            b.add_document(rng.integers(0, vocab, n))
    return IndexedDataset(prefix)


def stream_of(ds):
    """The flattened token stream the samples are cut from: documents in document-index order."""
    ix = ds.indexed
    return np.concatenate([ix[int(d)] for d in ds.document_index]).astype(np.int64)


def test_split_string_and_ranges():
    assert parse_split("969,30,1") == pytest.approx([0.969, 0.03, 0.001])
    assert parse_split("98, 2") == pytest.approx([0.98, 0.02, 0.0])
    assert split_ranges(1000, "969,30,1") == [(0, 969), (969, 999), (999, 1000)]
    assert split_ranges(10, "98,2") == [(0, 10), (10, 10), None]  # valid rounds to nothing; test is 0
    with pytest.raises(ValueError):
        parse_split("1,2,3,4")
    with pytest.raises(ValueError):
        parse_split("0,0,0")
    assert parse_split("969/30/1") == parse_split("969,30,1")  # Megatron's other separator
    for garbage in ("90,abc", "1.2.3", "", "90,,10", "-1,2", "nan", "inf,1"):  # never read past what is there
        with pytest.raises(ValueError, match="non-negative numbers"):
            parse_split(garbage)


def test_sample_index_by_hand():
    # documents (sizes) 3, 4, 5 read in the order 2, 0, 1: a stream of 5 + 3 + 4 = 12 tokens.
    sizes = np.array([3, 4, 5], np.int32)
    order = np.array([2, 0, 1], np.int32)
    # seq_len 4 + 1 extra token: (12 - 1) // 4 = 2 samples, starting at stream positions 0, 4, 8.
    rows = build_sample_index(sizes, order, 4, 1, 12)
    assert rows.tolist() == [[0, 0], [0, 4], [2, 0]]  # position 4 is offset 4 of entry 0; 8 starts entry 2
    assert rows.dtype == np.int32
    # without the extra token: 12 // 4 = 3 samples; a row points just past the previous sample's end
    assert build_sample_index(sizes, order, 4, 1, 12, extra=0).tolist() == [[0, 0], [0, 4], [1, 3], [2, 4]]
    # an empty document in the stream is skipped: stream position 3 is the first token of entry 2
    sizes0 = np.array([3, 0, 5], np.int32)
    assert build_sample_index(sizes0, np.array([0, 1, 2], np.int32), 3, 1, 8).tolist() == [[0, 0], [2, 0], [2, 3]]


def test_epochs_and_separate_last_epoch_rule():
    assert num_epochs_needed(100, 10, 10) == 2  # 10 * 10 + 1 tokens need 2 epochs of 100
    assert num_epochs_needed(101, 10, 10) == 1
    sizes = np.full(10, 10, np.int32)  # 100 tokens per epoch, seq_len 10: 9 samples in one epoch
    # 10 samples need 101 tokens: 2 epochs. The first gives (100 - 1) // 10 = 9 samples, so the last epoch
    # supplies 10 - 9 = 1 < int(0.8 * 9) = 7 of its 9: it is shuffled separately
    ix = build_gpt_indices(sizes, np.arange(10), 10, 10, seed=3)
    assert (ix.num_epochs, ix.separate_final_epoch) == (2, True)
    assert sorted(ix.document_index[:10].tolist()) == list(range(10))  # epoch 1 shuffled on its own
    assert sorted(ix.document_index[10:].tolist()) == list(range(10))
    n = len(ix.sample_index) - 1
    assert n == (2 * 100 - 1) // 10
    assert sorted(ix.shuffle_index[:9].tolist()) == list(range(9))  # full epochs first ...
    assert sorted(ix.shuffle_index[9:].tolist()) == list(range(9, n))  # ... then the partial last one
    # 17 samples: the last epoch gives 17 - 9 = 8 >= int(0.8 * 9) = 7: shuffled together
    ix = build_gpt_indices(sizes, np.arange(10), 17, 10, seed=3)
    assert (ix.num_epochs, ix.separate_final_epoch) == (2, False)
    assert sorted(ix.shuffle_index.tolist()) == list(range(len(ix.sample_index) - 1))
    assert ix.shuffle_index.dtype == np.uint32 and ix.document_index.dtype == np.int32


@pytest.mark.parametrize("num_samples,seq_len", [(40, 16), (500, 16), (7, 64), (90, 3)])
def test_samples_have_seq_len_plus_one_tokens_and_share_one(tmp_path, num_samples, seq_len):
    rng = np.random.default_rng(num_samples)
    ix = make_dataset(tmp_path / "d", rng.integers(0, 60, 50), seed=1)
    ds = build_gpt_dataset(ix, "100,0,0", "train", num_samples, seq_len, seed=11)
    assert len(ds) >= num_samples
    stream = stream_of(ds)
    order = np.argsort(ds.shuffle_index)  # sample k of the stream is ds[order[k]]
    assert sorted(ds.shuffle_index.tolist()) == list(range(len(ds)))
    for k in range(len(ds)):
        sample = ds[int(order[k])]
        assert sample.dtype == np.int64 and sample.shape == (seq_len + 1,)
        assert np.array_equal(sample, stream[k * seq_len:k * seq_len + seq_len + 1])
        if k + 1 < len(ds):
            assert sample[-1] == ds[int(order[k + 1])][0]  # the last label is the next sample's first input
    batch = ds.get_batch([3, 0, len(ds) - 1])
    assert np.array_equal(batch, np.stack([ds[3], ds[0], ds[len(ds) - 1]]))
    with pytest.raises(IndexError):
        ds[len(ds)]


@pytest.mark.timeout(60)
def test_a_split_without_tokens_raises_instead_of_hanging(tmp_path):
    ix = make_dataset(tmp_path / "small", [5] * 10)
    with pytest.raises(EmptySplitError, match="no documents"):  # round(.98*10) .. round(.99*10): nothing
        build_gpt_dataset(ix, "98,1,1", "valid", 10, 8, seed=1)
    empty = make_dataset(tmp_path / "zeros", [0] * 4)
    with pytest.raises(EmptySplitError, match="0 tokens"):
        build_gpt_dataset(empty, "100,0,0", "train", 10, 8, seed=1)
    with pytest.raises(EmptySplitError, match="0 in the split"):
        build_gpt_dataset(ix, "100,0,0", "test", 10, 8, seed=1)


def test_cache_is_keyed_and_never_read_half_written(tmp_path):
    ix = make_dataset(tmp_path / "d", np.random.default_rng(0).integers(1, 40, 80))
    cache = tmp_path / "cache"
    a = build_gpt_dataset(ix, "90,10,0", "train", 100, 16, seed=5, cache_dir=cache)
    names = sorted(p.name for p in cache.iterdir())
    assert names == [".lock", "document_index.npy", "index.json", "sample_index.npy", "shuffle_index.npy"]
    b = build_gpt_dataset(ix, "90,10,0", "train", 100, 16, seed=5, cache_dir=cache)
    assert not b.shuffle_index.flags.writeable  # loaded (read-only), not rebuilt
    for name in ("document_index", "sample_index", "shuffle_index"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    meta = json.loads((cache / "index.json").read_text())
    assert meta["description"]["random_seed"] == 5 and meta["description"]["fingerprint"] == ix.fingerprint()
    # other parameters: rebuilt in place, the key follows
    c = build_gpt_dataset(ix, "90,10,0", "train", 100, 16, seed=6, cache_dir=cache)
    assert c.shuffle_index.flags.writeable  # built
    assert json.loads((cache / "index.json").read_text())["key"] != meta["key"]
    # arrays without their index.json (a build killed before the end) are never used
    (cache / "index.json").unlink()
    np.save(cache / "shuffle_index.npy", np.zeros(3, np.uint32))
    d = build_gpt_dataset(ix, "90,10,0", "train", 100, 16, seed=6, cache_dir=cache)
    assert np.array_equal(d.shuffle_index, c.shuffle_index)
    # the data changed (same path, other tokens): a new fingerprint, so a rebuild
    ix2 = make_dataset(tmp_path / "d", np.random.default_rng(1).integers(1, 40, 80))
    assert ix2.fingerprint() != ix.fingerprint()
    assert IndexCache(cache).load(meta["key"], ["shuffle_index"]) is None


@pytest.mark.parametrize("name, tamper, message", [
    ("document_index", lambda a: a + 10_000, "document index outside"),
    ("document_index", lambda a: -a - 1, "document index outside"),
    ("shuffle_index", lambda a: a * 0 + 10**6, "shuffle entry outside"),
    ("sample_index", lambda a: a * 0 + [0, 10**9], "reads past the end"),
    ("sample_index", lambda a: a * 0 + [10**6, 0], "starts outside"),
    ("sample_index", lambda a: a * 0 - 1, "starts outside"),
    ("sample_index", lambda a: a.reshape(-1), "wrong shape"),
])
def test_a_crafted_index_cache_is_refused_not_read_past_its_arrays(tmp_path, name, tamper, message):
    ix = make_dataset(tmp_path / "d", np.random.default_rng(0).integers(1, 40, 80))
    cache = tmp_path / "cache"
    build_gpt_dataset(ix, "90,10,0", "train", 100, 16, seed=5, cache_dir=cache)
    arr = np.load(cache / f"{name}.npy")
    np.save(cache / f"{name}.npy", tamper(arr).astype(arr.dtype))  # same key in index.json: only the arrays lie
    with pytest.raises(ValueError, match=f"{message}.*index cache .* is damaged"):
        build_gpt_dataset(ix, "90,10,0", "train", 100, 16, seed=5, cache_dir=cache)


def _megatron_python():
    return os.environ.get("QUARRY_MEGATRON_PYTHON")


@pytest.mark.slow
@pytest.mark.skipif(not _megatron_python(), reason="set QUARRY_MEGATRON_PYTHON to a Python with megatron-core")
def test_arrays_equal_megatron_core(tmp_path):
    """Builds the same blends with Megatron-core (BlendedMegatronDatasetBuilder) and compares every array and
    the first samples' tokens. megatron-core 0.19 needs Python >= 3.12, hence a separate interpreter."""
    from pretrain.data.blend import build_blend_splits

    rng = np.random.default_rng(42)
    jobs = []
    for i in range(6):
        split = ["90,8,2", "80,10,10", "969,30,1"][i % 3]
        prefixes = []
        for k in range(1 + i % 3):
            while True:  # Megatron hangs on a split without tokens (that is our EmptySplitError): avoid those
                lengths = rng.integers(1, [8, 60, 500, 3000][(i + k) % 4], rng.integers(60, 400) + 1200 * (i % 3 == 2))
                lengths[rng.random(len(lengths)) < 0.05] = 0
                if all(r and lengths[r[0]:r[1]].sum() > 1 for r in split_ranges(len(lengths), split)):
                    break
            make_dataset(tmp_path / f"d{i}_{k}", lengths, seed=10 * i + k, vocab=1000)
            prefixes.append(str(tmp_path / f"d{i}_{k}"))
        weights = [float(w) for w in rng.uniform(0.1, 1, len(prefixes))] if (len(prefixes) > 1 or i % 2) else None
        jobs.append({"blend": [prefixes, weights], "split": split, "seq_len": [7, 64, 128][i % 3],
                     "sizes": [int(rng.integers(100, 20000)), 40, 10], "seed": int(rng.integers(0, 2 ** 31))})
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    subprocess.run([_megatron_python(), str(HERE / "data" / "pretrain" / "megatron_reference.py"),
                    str(tmp_path / "jobs.json"), str(tmp_path / "ref")], check=True, capture_output=True, timeout=600)
    for i, job in enumerate(jobs):
        prefixes, weights = job["blend"]
        spec = " ".join(f"{w} {p}" for w, p in zip(weights, prefixes)) if weights else " ".join(prefixes)
        splits = build_blend_splits(spec, job["seq_len"], job["sizes"], job["seed"], tmp_path / f"c{i}",
                                    split=job["split"], order="megatron")
        report = json.loads((tmp_path / "ref" / str(i) / "report.json").read_text())
        for k, p in enumerate(prefixes):  # Megatron reads our files, and its builder writes the same bytes
            ours = IndexedDataset(p)
            r = report["indexed"][p]
            assert (r["len"], r["documents"], r["dtype"]) == (len(ours), ours.num_documents, "uint16")
            assert r["first"] == ours[0].tolist() and r["last"] == ours[len(ours) - 1].tolist()
            assert r["document_indices"] == ours.document_indices.tolist()
            for ext in (".bin", ".idx"):
                rebuilt = tmp_path / "ref" / str(i) / f"rebuilt_{k}{ext}"
                assert rebuilt.read_bytes() == Path(p + ext).read_bytes(), (i, k, ext)
        for name, ds in zip(("train", "valid", "test"), splits):
            ref = tmp_path / "ref" / str(i) / name
            parts = ds.datasets if hasattr(ds, "datasets") else [ds]
            pairs = [(ref / f"{a}.npy", getattr(ds, a)) for a in ("dataset_index", "dataset_sample_index")
                     if hasattr(ds, "datasets")]
            pairs += [(ref / str(k) / f"{a}.npy", getattr(g, a)) for k, g in enumerate(parts)
                      for a in ("document_index", "sample_index", "shuffle_index")]
            for path, ours in pairs:
                theirs = np.load(path)
                assert theirs.dtype == ours.dtype and np.array_equal(theirs, ours), (i, path)
            assert report[name]["len"] == len(ds)
            for k, tokens in enumerate(report[name]["samples"]):
                assert np.array_equal(ds[k], tokens), (i, name, k)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_other_token_dtypes_and_pickling(tmp_path, dtype):
    """int32 tokens (vocab >= 65,500) take the compiled fast path too; other dtypes the general one."""
    import pickle

    rng = np.random.default_rng(5)
    with IndexedDatasetBuilder(tmp_path / "t", dtype) as b:
        for n in rng.integers(1, 50, 40):
            b.add_document(rng.integers(0, 250, n))
    ds = build_gpt_dataset(IndexedDataset(tmp_path / "t"), "100,0,0", "train", 60, 8, seed=2)
    stream = stream_of(ds)
    order = np.argsort(ds.shuffle_index)
    for k in range(len(ds)):
        assert np.array_equal(ds[int(order[k])], stream[8 * k:8 * k + 9])
    clone = pickle.loads(pickle.dumps(ds))
    assert all(np.array_equal(clone[i], ds[i]) for i in range(len(ds)))


def write_parts(folder, tokens, lengths, cuts, dtype):
    """The sequences ``lengths`` of ``tokens`` as a dataset of parts cut before the sequences ``cuts``."""
    from pretrain.data.indexed import data_file_path
    from pretrain.data.parts import PartsDataset, part_name, write_parts_index

    starts = np.concatenate([[0], np.cumsum(lengths)])
    bounds = [0, *cuts, len(lengths)]
    parts = []
    for k, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        prefix = folder / part_name(k)
        with IndexedDatasetBuilder(prefix, dtype) as builder:
            if b > a:
                builder.add_documents(tokens[starts[a]:starts[b]], lengths[a:b])
        parts.append({"name": part_name(k), "documents": b - a, "tokens": int(starts[b] - starts[a]),
                      "bin_bytes": os.path.getsize(data_file_path(prefix))})
    write_parts_index(folder, dtype, parts)
    return PartsDataset(folder)


@pytest.mark.parametrize("dtype", [np.uint16, np.int32, np.int64])
def test_one_file_and_parts_give_the_same_samples_compiled_or_not(tmp_path, monkeypatch, dtype):
    """One gather serves both (a file is a dataset of one part): every index dtype combination, ds[i] and
    get_batch, compiled (uint16, int32 tokens) and in Python (int64 tokens, or as without numba), with empty
    documents, an empty part, and padding after the last partial sample, against the token stream."""
    from pretrain.data import parts_gather
    from pretrain.data.gpt_dataset import GPTDataset

    rng = np.random.default_rng(7)
    lengths = rng.integers(0, 40, 60)
    lengths[[0, 17, 59]] = 0
    tokens = rng.integers(0, 30000, int(lengths.sum())).astype(dtype)
    with IndexedDatasetBuilder(tmp_path / "one", dtype) as b:
        b.add_documents(tokens, lengths)
    one = IndexedDataset(tmp_path / "one")
    parts = write_parts(tmp_path / "parts", tokens, lengths, [20, 20, 45], dtype)  # part 1 is empty
    ix = build_gpt_indices(one.sequence_lengths, np.arange(len(one), dtype=np.int32), 70, 16, seed=3,
                           drop_last_partial=False)
    stream = np.concatenate([one[int(d)] for d in ix.document_index]).astype(np.int64)
    want = np.full((len(ix.sample_index) - 1, 17), -1, dtype=np.int64)  # sample k of the stream, padded with -1
    for k in range(len(want)):
        piece = stream[16 * k:16 * k + 17]
        want[k, :len(piece)] = piece
    want = want[ix.shuffle_index.astype(np.int64)]
    assert (want[:, -1] == -1).any()  # the last partial sample is padded
    idx = np.arange(len(want))
    for shuffle_dtype in (np.uint32, np.int64):
        for sample_dtype in (np.int32, np.int64):
            arrays = {"document_index": ix.document_index, "sample_index": ix.sample_index.astype(sample_dtype),
                      "shuffle_index": ix.shuffle_index.astype(shuffle_dtype)}
            for python in (False, True):
                with monkeypatch.context() as m:
                    if python:
                        m.setattr(parts_gather, "compiled", False)
                    for indexed in (one, parts):
                        ds = GPTDataset(indexed, arrays, 16)
                        compiled = np.dtype(dtype) in (np.uint16, np.int32) and not python and \
                            parts_gather.compiled
                        assert (ds._code is not None) == compiled
                        what = (shuffle_dtype, sample_dtype, python, type(indexed).__name__)
                        assert np.array_equal(ds.get_batch(idx), want), what
                        assert np.array_equal(ds.get_batch(idx[::-3]), want[::-3]), what
                        assert all(np.array_equal(ds[int(i)], want[i]) for i in idx), what


@pytest.mark.parametrize("order", ["stable", "megatron"])
def test_indices_larger_than_the_memory_are_refused_before_any_is_built(order):
    from pretrain.data.gpt_dataset import IndexTooLargeError, build_gpt_indices
    from pretrain.data.stable_order import build_stable_indices

    build = build_stable_indices if order == "stable" else build_gpt_indices
    sizes = np.full(40, 100, dtype=np.int32)
    assert build(sizes, np.arange(40), 1000, 64, 1).sample_index.shape[0] > 1000  # sensible: built
    with pytest.raises(IndexTooLargeError, match="GiB, more than the .* GiB of memory available"):
        build(sizes, np.arange(40), 10 ** 14, 64, 1)  # a count typed far too long: refused at once
    # a sequence length typed far too long with a count that fits: a million passes over the split per sample
    with pytest.raises(IndexTooLargeError, match="longer than the split's 4,000 tokens"):
        build(sizes, np.arange(40), 10, 4 * 10 ** 9, 1)
    assert build(sizes, np.arange(40), 3, 5000, 1).num_epochs >= 4  # a tiny split under a long sequence still builds
