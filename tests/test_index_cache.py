"""The index cache at scale: small arrays read, large ones mapped, both at the offset index.json records; one sync of
the cache's file system for a whole blend build instead of an fsync per file."""
import os

import numpy as np

import pretrain.data.index_cache as gd
from pretrain.data.blend import build_blend_splits
from pretrain.data.indexed import IndexedDatasetBuilder


def make(prefix, seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(5, 60, 120)
    with IndexedDatasetBuilder(prefix, np.uint16, durable=False) as b:
        b.add_documents(rng.integers(0, 500, int(lengths.sum())).astype(np.uint16), lengths)
    return str(prefix)


def test_cached_arrays_load_read_or_mapped_and_equal_the_built_ones(tmp_path, monkeypatch):
    spec = f"0.5 {make(tmp_path / 'a', 1)} 0.5 {make(tmp_path / 'b', 2)}"
    built = build_blend_splits(spec, 16, (400, 0, 0), 3, None)[0]
    syncs = []
    real_sync = gd.sync_file_systems
    monkeypatch.setattr(gd, "sync_file_systems", lambda folders: (syncs.append(1), real_sync(folders)))
    fsyncs = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (fsyncs.append(fd), real_fsync(fd)))
    build_blend_splits(spec, 16, (400, 0, 0), 3, tmp_path / "cache")
    assert syncs == [1] and fsyncs == []  # 9 arrays and 3 index.json files, one sync
    for limit, kind in ((gd.CACHE_READ_BYTES, np.ndarray), (0, np.memmap)):
        monkeypatch.setattr(gd, "CACHE_READ_BYTES", limit)
        loaded = build_blend_splits(spec, 16, (400, 0, 0), 3, tmp_path / "cache")[0]
        assert type(loaded.dataset_index) is kind and not loaded.dataset_index.flags.writeable
        assert type(loaded.datasets[1].shuffle_index) is kind
        assert np.array_equal(loaded.get_batch(np.arange(len(loaded))), built.get_batch(np.arange(len(built))))
    assert syncs == [1]  # loads write nothing
