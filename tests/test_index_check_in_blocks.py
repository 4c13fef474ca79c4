"""The structure check of an index cache walks the document stream a block of entries at a time (the position and
length of every document-index entry at once were two int64 arrays the length of the document index, GBs at billions
of entries). With blocks of a few entries, every honest index still passes (both orders, both ``extra``, partial
last samples kept or not, empty documents) and every lie is still refused, as with one block."""
import numpy as np
import pytest

from pretrain.data import gpt_dataset
from pretrain.data.gpt_dataset import GPTDataset, build_gpt_dataset
from pretrain.data.indexed import IndexedDataset, IndexedDatasetBuilder

BLOCKS = [1, 2, 7, 1 << 22]


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    lengths = np.random.default_rng(5).integers(0, 40, 90)  # empty documents too
    prefix = tmp_path_factory.mktemp("blocks") / "d"
    with IndexedDatasetBuilder(prefix, np.uint16) as b:
        for n in lengths:
            b.add_document(np.arange(n) % 500)
    return IndexedDataset(prefix)


def _again(ds, **arrays):
    """``ds``'s indices, some replaced, checked anew."""
    indices = {"document_index": ds.document_index, "sample_index": ds.sample_index,
               "shuffle_index": ds.shuffle_index, **arrays}
    return GPTDataset(ds.indexed, indices, ds.seq_len, num_samples=ds.num_samples, extra=ds.extra,
                      split=ds.split, documents=ds.documents)


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("order", ["stable", "megatron"])
def test_honest_indices_pass_in_blocks_of_any_size(indexed, monkeypatch, block, order):
    monkeypatch.setattr(gpt_dataset, "CHECK_BLOCK", block)
    for extra in (1, 0):
        for drop_last_partial in (True, False):
            for samples, seq_len in ((None, 16), (3, 16), (100, 5), (700, 16), (40, 1000)):
                ds = build_gpt_dataset(indexed, "80,20,0", "train", samples, seq_len, seed=3, extra=extra,
                                       drop_last_partial=drop_last_partial, order=order)
                assert len(ds) >= (samples or 1)


def _lies(ds):
    """Sample indices that break the stream rule with every value in range."""
    s = np.array(ds.sample_index)
    shifted = s.copy()
    shifted[len(s) // 2, 1] += 1  # one sample starts a token late
    back = s.copy()
    k = next(i for i in range(1, len(s)) if s[i, 0] > s[i - 1, 0])
    back[k] = back[k - 1]  # two samples start at the same token
    swapped = s.copy()
    swapped[[k - 1, k]] = swapped[[k, k - 1]]  # the entries go back
    return {"shifted": shifted, "repeated": back, "swapped": swapped}


@pytest.mark.parametrize("block", BLOCKS)
@pytest.mark.parametrize("lie", ["shifted", "repeated", "swapped"])
def test_a_sample_index_that_lies_is_refused_in_blocks_of_any_size(indexed, monkeypatch, block, lie):
    ds = build_gpt_dataset(indexed, "80,20,0", "train", 200, 16, seed=3)
    bad = _lies(ds)[lie]
    monkeypatch.setattr(gpt_dataset, "CHECK_BLOCK", block)
    _again(ds)  # the honest one passes
    with pytest.raises(ValueError, match="a sample does not start 16 tokens after the one before it"):
        _again(ds, sample_index=bad)
