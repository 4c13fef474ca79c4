"""Extending a run keeps the data order: with data.order = "stable" (the default) the first N samples of a dataset
and of a blend are the same whatever sample count they are built for, so 3 steps then a resume to 6 steps give
exactly the losses of a straight 6-step run on a real blend that needs several epochs. Megatron's order
(data.order = "megatron") does not keep them, which is what the tests would catch."""
from __future__ import annotations

import numpy as np
import pytest

from pretrain.data.blend import build_blend_splits
from pretrain.data.gpt_dataset import build_gpt_dataset
from pretrain.data.indexed import IndexedDataset, IndexedDatasetBuilder
from pretrain.data.tokenizer import load_tokenizer
from tests.data.pretrain.curated import prose_docs
from tests.distributed_helpers import config_dict, tiny_config, train_losses
from tests.test_export_hf import quarry_tokenizer

SEQ = 16


@pytest.fixture(scope="module")
def prose_blend(tmp_path_factory):
    """Two small real datasets (Austen and the King James Bible from the prose sample, first 20 tokens of 8
    documents each: 10 samples of 16 tokens per epoch, so 3 steps of 8 samples need 2 epochs and 6 steps 3), a
    0.6 / 0.4 blend spec and the tokenizer."""
    folder = tmp_path_factory.mktemp("prose_blend")
    tok_path = quarry_tokenizer(tmp_path_factory)
    tok = load_tokenizer(tok_path)
    docs = prose_docs()
    for source in ("austen", "sword-kjv"):
        texts = [d["text"] for d in docs if d["source"] == source][:8]
        with IndexedDatasetBuilder(folder / source, dtype=np.uint16) as b:
            for ids in tok.encode_batch(texts, num_threads=1):
                b.add_document(np.array(ids[:20] + [tok.eod_id]))
    spec = folder / "blend.toml"
    spec.write_text(f'split = "100,0,0"\n[[datasets]]\nname = "austen"\nprefix = "{folder}/austen"\nweight = 0.6\n'
                    f'[[datasets]]\nname = "kjv"\nprefix = "{folder}/sword-kjv"\nweight = 0.4\n')
    return folder, spec, tok_path


def _rows(ds, n):
    return np.stack([ds[i] for i in range(n)])


@pytest.mark.parametrize("n", [7, 20, 33])
def test_first_n_samples_do_not_depend_on_how_many_are_built(prose_blend, n):
    folder, spec, _ = prose_blend
    ix = IndexedDataset(folder / "austen")
    small = build_gpt_dataset(ix, "100,0,0", "train", n, SEQ, seed=3)
    large = build_gpt_dataset(ix, "100,0,0", "train", 3 * n, SEQ, seed=3)
    assert large.num_epochs > small.num_epochs or n == 7  # the larger build needs more epochs ...
    assert np.array_equal(_rows(small, n), _rows(large, n))  # ... yet starts with the same samples
    assert not np.array_equal(_rows(large, n), _rows(build_gpt_dataset(ix, "100,0,0", "train", 3 * n, SEQ,
                                                                        seed=4), n))  # the seed still matters
    blend_small = build_blend_splits(spec, SEQ, (n, 0, 0), 3, None)[0]
    blend_large = build_blend_splits(spec, SEQ, (3 * n, 0, 0), 3, folder / f"cache{n}")[0]
    assert np.array_equal(_rows(blend_small, n), _rows(blend_large, n))
    assert np.array_equal(blend_small.get_batch(np.arange(n)), blend_large.get_batch(np.arange(n)))


def test_stable_order_is_a_real_shuffle_of_every_epoch(prose_blend):
    folder, _, _ = prose_blend
    ix = IndexedDataset(folder / "austen")
    ds = build_gpt_dataset(ix, "100,0,0", "train", 60, SEQ, seed=3)
    docs = len(ix)
    epochs = ds.document_index.reshape(-1, docs)
    assert len(epochs) >= 3 and all(sorted(e) == list(range(docs)) for e in epochs)  # each epoch: every document
    assert len({tuple(e) for e in epochs}) == len(epochs)  # in its own order
    block = (ds.tokens_per_epoch - 1) // SEQ  # one epoch's samples (each holds SEQ + 1 tokens, one shared)
    shuffle = np.asarray(ds.shuffle_index).astype(np.int64)
    assert len(shuffle) % block == 0 and len(shuffle) >= 60
    for b in range(len(shuffle) // block):  # each block permutes its own samples, not in order
        part = shuffle[b * block:(b + 1) * block]
        assert sorted(part) == list(range(b * block, (b + 1) * block)) and not np.array_equal(part, np.sort(part))


def test_megatron_order_is_kept_behind_its_option_and_is_not_stable(prose_blend):
    folder, spec, _ = prose_blend
    ix = IndexedDataset(folder / "austen")
    small = build_gpt_dataset(ix, "100,0,0", "train", 20, SEQ, seed=3, order="megatron")
    large = build_gpt_dataset(ix, "100,0,0", "train", 60, SEQ, seed=3, order="megatron")
    same = sum(np.array_equal(small[i], large[i]) for i in range(20))
    assert same < 5, same  # Megatron reshuffles everything once more epochs are needed
    from pretrain.data.gpt_dataset import build_gpt_indices

    ref = build_gpt_indices(ix.sequence_lengths, np.arange(len(ix), dtype=np.int32), 60, SEQ, 3)
    for name in ("document_index", "sample_index", "shuffle_index"):
        assert np.array_equal(getattr(large, name), getattr(ref, name))


def _cfg(spec, tok, steps, ckpt=None, order="stable"):
    over = {"data.kind": "blend", "data.blend": str(spec), "data.tokenizer": str(tok), "data.seq_len": SEQ,
            "data.order": order, "train.steps": steps, "train.decay_steps": 6, "train.warmup_steps": 1}
    if ckpt:
        over["checkpoint.dir"] = str(ckpt)
    raw = config_dict(tiny_config(over))
    del raw["model"]["vocab_size"]  # from the tokenizer
    return raw


@pytest.mark.parametrize("order", ["stable", "megatron"])
def test_three_steps_then_resume_to_six_equals_six_steps(prose_blend, tmp_path, order):
    folder, spec, tok = prose_blend
    straight = train_losses(_cfg(spec, tok, 6, order=order))["losses"]
    first = train_losses(_cfg(spec, tok, 3, tmp_path / "ckpt", order))["losses"]
    second = train_losses(_cfg(spec, tok, 6, tmp_path / "ckpt", order))
    assert sorted(second["losses"]) == [4, 5, 6] and second["consumed_samples"] == 48
    extended = [first[s] for s in (1, 2, 3)] + [second["losses"][s] for s in (4, 5, 6)]
    if order == "stable":  # exactly: same samples, same state
        assert extended == [straight[s] for s in range(1, 7)]
    else:  # the 3-step run's blend (24 samples) and the 6-step one's (48) are shuffled differently
        assert extended != [straight[s] for s in range(1, 7)]


def test_a_blend_with_budget_dependent_weights_warns(prose_blend, tmp_path):
    folder, _, _ = prose_blend
    spec = tmp_path / "mixed.toml"
    spec.write_text(f'split = "100,0,0"\n[[datasets]]\nname = "austen"\nprefix = "{folder}/austen"\nepochs = 1\n'
                    f'[[datasets]]\nname = "kjv"\nprefix = "{folder}/sword-kjv"\nweight = 1.0\n')
    with pytest.warns(UserWarning, match="will not keep its data order"):
        build_blend_splits(spec, SEQ, (30, 0, 0), 3, None)


def test_blend_build_order_option(prose_blend, tmp_path):
    from pretrain.cli import main

    folder, spec, _ = prose_blend
    for order in ("stable", "megatron"):
        out = tmp_path / order
        assert main(["blend", "build", str(spec), "--seq-len", str(SEQ), "--samples", "48", "--seed", "3",
                     "--out", str(out), "--order", order]) == 0
        ref = build_blend_splits(spec, SEQ, (48, 0, 0), 3, None, order=order)[0]
        for k, name in enumerate(("austen", "kjv")):
            assert np.array_equal(np.load(out / name / "shuffle_index.npy"), ref.datasets[k].shuffle_index)
    assert not np.array_equal(np.load(tmp_path / "stable" / "austen" / "document_index.npy"),
                              np.load(tmp_path / "megatron" / "austen" / "document_index.npy"))
