"""The learned ``blocks`` engine's model: training twin vs numpy inference, honest cross-validation, the
model file round trip and refusal of bad files, and the fallback for pages without visible blocks.

(Quality on real pages of every type and the damaged-file cases of the shipped model: tests/test_extract.py.)
"""
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from curate.extract import model as em
from curate.extract.blocks import extract_blocks
from curate.extract.training import train as T
from curate.extract.training.labels import word_f1

WCXB = Path(__file__).resolve().parent / "data" / "extract" / "wcxb_pages.jsonl.gz"
TINY = dict(hidden=(8, 8, 4), epochs=2)


@pytest.fixture(scope="module")
def ds():
    """The 21 real WCXB pages of tests/data (3 per page type) as a training set."""
    with gzip.open(WCXB, "rt", encoding="utf-8") as f:
        pages = [T.Page(d["id"], d["page_type"], d["html"], d["gold"]) for d in map(json.loads, f)]
    return T.build(pages, log=lambda *_: None)


def test_numpy_inference_matches_the_torch_network_it_was_trained_as(ds):
    import torch

    model = T.train_net(ds, np.arange(len(ds.pages)), seed=0, **TINY)
    sl = T._page_slices(ds.page)[3]
    # the torch twin with the trained weights, on one page
    net = T._Net(ds.x.shape[1], TINY["hidden"], len(TINY["hidden"]) - 1)
    with torch.no_grad():
        for layer, w, b in zip(net.layers, model.weights, model.biases):
            layer.weight.copy_(torch.from_numpy(w.T))
            layer.bias.copy_(torch.from_numpy(b))
        x = torch.from_numpy(((ds.x[sl] - model.mean) / model.scale).astype(np.float32))
        logits = net.forward(x, torch.from_numpy(ds.page[sl]), torch.from_numpy(ds.groups[sl])).numpy()
    np.testing.assert_allclose(model.predict(ds.x[sl], ds.groups[sl]), 1 / (1 + np.exp(-logits)), atol=1e-5)


def test_context_layer_from_its_parts_is_the_numpy_context_times_the_weights(ds):
    rng = np.random.default_rng(0)
    for sl in list(T._page_slices(ds.page).values()) + [slice(0, 0)]:
        groups = ds.groups[sl] if sl.stop else np.zeros((300, 4), dtype=np.int64)  # also one container of 300
        n = len(groups)
        seg, order, starts, inv_size, n_segs = em._segment_ids(np.ascontiguousarray(groups, dtype=np.int64))
        assert n_segs.tolist() == [int(np.searchsorted(starts[k], n)) for k in range(starts.shape[0])]
        for d, d_out in ((1, 1), (5, 3), (64, 32)):
            h = rng.random((n, d), dtype=np.float32) * 10
            w = rng.standard_normal((d * em.CONTEXT_PARTS, d_out)).astype(np.float32)
            b = rng.standard_normal(d_out).astype(np.float32)
            want = np.maximum(em.context(h, em.segments(groups)).astype(np.float64) @ w + b, 0)  # with its ReLU
            local, per_group, page_mean, page_max = em._split_context(w)
            means = em._segment_means(h, seg, inv_size)
            group_w = np.zeros((len(per_group), n, d_out), dtype=np.float32)
            for k, wk in enumerate(per_group):
                group_w[k, :n_segs[k]] = means[k, :n_segs[k]] @ wk
            if n:
                mean, top = em._mean_max(h)
                np.testing.assert_allclose(mean, h.mean(axis=0), rtol=1e-6)
                assert np.array_equal(top, h.max(axis=0))
            else:
                mean, top = np.zeros(d, np.float32), np.zeros(d, np.float32)
            got = em._context_sum(h @ local, group_w, seg, mean @ page_mean + top @ page_max + b)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3 * d)


def test_cross_validation_is_reproducible_and_really_out_of_fold(ds):
    fold = T.folds_of(T.groups_of(ds.pages), 3, seed=0)
    assert sorted(np.bincount(fold).tolist()) == [7, 7, 7]
    assert (T.folds_of(T.groups_of(ds.pages), 3, seed=0) == fold).all()
    prob = T.cross_validate(ds, 3, seed=0, log=lambda *_: None, **TINY)
    again = T.cross_validate(ds, 3, seed=0, log=lambda *_: None, **TINY)
    assert (prob == again).all()  # same command, same figures
    assert prob.min() > 0 and prob.max() < 1
    # scramble the labels of fold 0's pages: their predictions must not move (no model that predicts them
    # saw them), while the other folds' predictions do (fold 0 is in their training data)
    in0 = fold[ds.page] == 0
    rng = np.random.default_rng(1)
    scrambled = T.Dataset(**{**ds.__dict__, "y": np.where(in0, rng.random(len(ds.y)).astype(np.float32), ds.y)})
    prob2 = T.cross_validate(scrambled, 3, seed=0, log=lambda *_: None, **TINY)
    assert (prob2[in0] == prob[in0]).all()
    assert not np.allclose(prob2[~in0], prob[~in0])


def test_folds_keep_the_pages_of_one_site_together():
    wcxb = [{"id": f"{i:04d}", "source_url": f"https://{'www.' if i % 2 else ''}site{i % 5}.example/p{i}"}
            for i in range(20)]
    readability = [{"id": name} for name in ("nytimes-1", "nytimes-2", "nytimes-10", "heise", "bbc-1", "ol")]
    groups = [T.page_group("wcxb_dev_gold", d) for d in wcxb] + [T.page_group("readability_gold", d)
                                                                 for d in readability]
    assert groups[0] == "wcxb_dev_gold:site0.example" == groups[5]  # www. or not: one site
    assert groups[20] == groups[21] == groups[22] == "readability_gold:nytimes" != groups[23]
    assert T.page_group("wcxb_dev_gold", {"id": "0007", "source_url": None}) == "wcxb_dev_gold:0007"
    for seed in range(5):
        fold = T.folds_of(groups, 3, seed)
        for g in set(groups):
            assert len({int(f) for f, h in zip(fold, groups) if h == g}) == 1
        assert set(fold.tolist()) == {0, 1, 2}
    assert not all((T.folds_of(groups, 3, 0) == T.folds_of(groups, 3, s)).all() for s in range(1, 5))


def test_every_set_weighs_the_same_in_training(ds):
    pages = [T.Page(p.id, p.page_type, "", p.gold, ("big:" if i < 18 else "small:") + p.id)
             for i, p in enumerate(ds.pages)]
    two = T.Dataset(**{**ds.__dict__, "pages": pages})
    train = np.arange(len(pages))
    f = T.set_factors(two, train)
    assert f[:18].sum() == pytest.approx(f[18:].sum()) and f[0] == pytest.approx(f[17])
    assert f[18] == pytest.approx(6 * f[0])  # 18 pages against 3
    assert (T.set_factors(two, train[:10])[18:] == 0).all()  # a set with no training page: no weight
    one = T.set_factors(ds, train)
    assert (one == 1.0).all()  # one set: every page as before
    # one set: the balanced threshold criterion is the mean over pages
    texts = {i: p.gold for i, p in enumerate(ds.pages[:5])}
    assert T.balanced_f1(ds, texts) == pytest.approx(T.scores(ds, texts)["all"])
    assert T.balanced_f1(two, texts) == pytest.approx(np.mean([5 / 18, 0.0]))


def test_training_sets_are_paired_warc_with_gold():
    with pytest.raises(ValueError, match="one gold file per WARC"):
        T.load_sets(["a.warc.gz", "b.warc.gz"], ["a.jsonl"])


def test_model_file_round_trip_and_refusals(ds, tmp_path):
    model = T.train_net(ds, np.arange(len(ds.pages)), seed=0, **TINY)
    model.threshold = 0.4
    path = tmp_path / "m.json"
    T.write_atomic(path, model.to_json())
    back = em.load(path)
    sl = T._page_slices(ds.page)[0]
    np.testing.assert_allclose(back.predict(ds.x[sl], ds.groups[sl]), model.predict(ds.x[sl], ds.groups[sl]),
                               atol=1e-4)
    assert back.threshold == 0.4
    d = json.loads(path.read_text())
    # a model of format version 1 (context layers without the page maximum) names the command that rebuilds it
    for bad, what in [({**d, "version": 99}, "version"), ({**d, "version": 1}, "version 1, .* retrain with"),
                      ({**d, "threshold": 1.5}, "threshold"),
                      ({**d, "scale": [0.0] * len(d["scale"])}, "damaged"), ({**d, "layers": []}, "damaged"),
                      ([1, 2, 3], "not a")]:
        path.write_text(json.dumps(bad))
        with pytest.raises(em.ModelError, match=what):
            em.load(path)


def test_page_whose_content_is_all_hidden_still_extracts():
    """Script-rendered pages that stream their content into a hidden element have no visible block: the
    rules engine (which reads hidden elements) gives their text instead of an empty page."""
    para = ("The committee met on Tuesday to review the budget for the coming year, and after a long debate it "
            "agreed to fund the new library wing, the repairs to the bridge and two more buses for the school.")
    html = (f"<html><head><title>Budget</title></head><body><div hidden><article><h1>Budget approved</h1>"
            f"<p>{para}</p><p>{para.replace('Tuesday', 'Friday')}</p></article></div></body></html>")
    out = extract_blocks(html)
    assert word_f1(out, f"Budget approved\n{para}\n{para.replace('Tuesday', 'Friday')}") >= 0.8, out
    assert extract_blocks("<html><body></body></html>") == ""


def test_assemble_writes_repeated_content_once_and_nothing_of_a_low_scoring_page():
    from curate.extract.blocks import assemble

    post = "Thanks, that fixed the build for me as well."
    texts = ["Home", post, "Reply", "Quote", post, "Reply", "Yes", "Yes", "No", "Yes"]
    tags = ["li", "p", "a", "a", "blockquote", "a", "td", "td", "td", "td"]
    prob = np.array([0.1, 0.9, 0.8, 0.8, 0.9, 0.8, 0.9, 0.1, 0.9, 0.9])
    # the quoted post (3+ words) is written once; the short "Reply" twice; table cells are never merged
    assert assemble(texts, tags, prob, 0.5).split("\n") == [post, "Reply", "Quote", "Reply", "Yes", "No", "Yes"]
    assert assemble(["a b", "a b", "c"], ["p"] * 3, np.array([0.9, 0.9, 0.9]), 0.5) == "a b\nc"  # adjacent repeat
    # nothing reaches the threshold: nothing (``page_text`` then asks the rules engine)
    assert assemble(["x", "y z w", "v u t", "s"], ["p"] * 4, np.array([0.05, 0.25, 0.2, 0.11]), 0.5) == ""
    assert assemble([], [], np.zeros(0), 0.5) == ""
