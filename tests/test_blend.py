"""Blending (Megatron's greedy interleave), blend specs, `pretrain blend build|inspect`."""
import math
from pathlib import Path

import numpy as np
import pytest

from pretrain.data.blend import build_blend_splits, build_blending_indices, inspect_blend
from pretrain.data.blend_spec import BlendSpecError, load_blend_spec, parse_megatron_blend, parse_toml_spec
from pretrain.cli import main as pretrain_main
from pretrain.data.gpt_dataset import parse_split, requested_per_dataset
from pretrain.data.indexed import IndexedDatasetBuilder

ROOT = Path(__file__).resolve().parents[1]


def make_dataset(prefix, n_docs, seed, max_len=80):
    rng = np.random.default_rng(seed)
    with IndexedDatasetBuilder(prefix, np.uint16) as b:
        for _ in range(n_docs):
            b.add_document(rng.integers(0, 1000, rng.integers(1, max_len)))


def write_spec(path, body):
    path.write_text(body)
    return path


@pytest.fixture
def two_datasets(tmp_path):
    make_dataset(tmp_path / "web", 300, 1)
    make_dataset(tmp_path / "books", 120, 2, max_len=300)
    spec = write_spec(tmp_path / "blend.toml", f'''split = "90,8,2"
[[datasets]]
name = "web"
prefix = "{tmp_path}/web"
weight = 0.7
[[datasets]]
name = "books"
prefix = "{tmp_path}/books"
weight = 0.3
''')
    return spec


def test_megatron_surplus_and_sizes():
    # S = 100, weights .3/.7: each dataset asked for ceil(ceil(100 w) * 1.005), the blend has 30 + 70
    assert requested_per_dataset([0.3, 0.7], 100) == [31, 71]
    di, dsi = build_blending_indices([0.3, 0.7], 100)
    assert np.bincount(di).tolist() == [30, 70] and di.dtype == np.int16 and dsi.dtype == np.int64
    assert di[:4].tolist() == [1, 0, 1, 1]  # i=0 and i=1 both use max(i, 1) = 1: .7 wins, then .3 ...


@pytest.mark.parametrize("seed", range(6))
def test_every_prefix_stays_within_one_sample_of_its_share(seed):
    """With two datasets every prefix of i samples holds within one sample of w * i of each. With more, a
    dataset is still never a full sample ahead of w * i (Megatron's greedy can let one lag by a little more
    than a sample: the arrays must be Megatron's, so that is kept)."""
    rng = np.random.default_rng(seed)
    k = 2 if seed < 3 else int(rng.integers(3, 9))
    w = rng.dirichlet(np.ones(k))
    size = 20000
    di, dsi = build_blending_indices(w, size)
    counts = np.zeros((size, k), np.int64)
    counts[np.arange(size), di] = 1
    ahead = np.cumsum(counts, axis=0) - np.outer(np.arange(1, size + 1), w)  # per prefix of i + 1 samples
    assert ahead.max() < 1.0
    if k == 2:
        assert np.abs(ahead).max() < 1.0
    for d in range(k):  # each dataset's samples are taken in order 0, 1, 2, ...
        assert np.array_equal(dsi[di == d], np.arange((di == d).sum()))


def test_blend_splits_samples_and_cache_layout(two_datasets, tmp_path):
    cache = tmp_path / "cache"
    train, valid, test = build_blend_splits(two_datasets, 32, (500, 40, 0), 1234, cache)
    assert test is None
    assert len(train) == math.ceil(500 * 0.7) + math.ceil(500 * 0.3)
    assert [len(d) >= n for d, n in zip(train.datasets, requested_per_dataset([0.7, 0.3], 500))] == [True, True]
    for i in (0, 1, 250, len(train) - 1):
        d, j = int(train.dataset_index[i]), int(train.dataset_sample_index[i])
        assert np.array_equal(train[i], train.datasets[d][j]) and train[i].shape == (33,)
    assert np.bincount(train.dataset_index).tolist() == [350, 150]
    picks = [5, 0, len(train) - 1, 17, 5]
    assert np.array_equal(train.get_batch(picks), np.stack([train[i] for i in picks]))
    for p in ("dataset_index.npy", "dataset_sample_index.npy", "index.json", "web/document_index.npy",
              "web/sample_index.npy", "web/shuffle_index.npy", "books/shuffle_index.npy",
              "valid/dataset_index.npy", "valid/web/sample_index.npy"):
        assert (cache / p).is_file(), p
    assert not (cache / "test").exists()
    again = build_blend_splits(two_datasets, 32, (500, 40, 0), 1234, cache)[0]
    assert not again.dataset_index.flags.writeable  # from the cache (read-only; small arrays read, large mapped)
    assert all(np.array_equal(again[i], train[i]) for i in range(0, len(train), 37))
    other = build_blend_splits(two_datasets, 32, (500, 40, 0), 99, cache)[0]
    assert not all(np.array_equal(other[i], train[i]) for i in range(20))  # another seed, another order


@pytest.mark.parametrize("name, tamper, message", [
    ("dataset_index.npy", lambda a: a - 1, "dataset index outside"),   # -1 would silently pick the last one
    ("dataset_index.npy", lambda a: a + 2, "dataset index outside"),
    ("dataset_sample_index.npy", lambda a: a + 10**6, "sample index outside"),
    ("dataset_sample_index.npy", lambda a: a[:-1], "shapes"),
    ("web/shuffle_index.npy", lambda a: a + 10**6, "shuffle entry outside"),
])
def test_a_crafted_blend_cache_is_refused_naming_it(two_datasets, tmp_path, name, tamper, message):
    cache = tmp_path / "cache"
    build_blend_splits(two_datasets, 32, (500, 40, 0), 1234, cache)
    arr = np.load(cache / name)
    np.save(cache / name, tamper(arr).astype(arr.dtype))
    with pytest.raises(ValueError, match=f"{message}.*cache .* is damaged"):
        build_blend_splits(two_datasets, 32, (500, 40, 0), 1234, cache)


def test_megatron_string_form_is_accepted(two_datasets, tmp_path):
    spec = f"0.7 {tmp_path}/web 0.3 {tmp_path}/books"
    a = build_blend_splits(spec, 16, (200, 0, 0), 5, None, split="90,8,2")[0]
    b = build_blend_splits(two_datasets, 16, (200, 0, 0), 5, None)[0]
    assert np.array_equal(a.dataset_index, b.dataset_index)
    assert all(np.array_equal(a[i], b[i]) for i in range(len(a)))
    # a lone prefix is not blended (as Megatron): a plain GPT dataset of exactly what was asked for
    single = build_blend_splits(f"{tmp_path}/web", 16, (50, 0, 0), 5, None, split="90,8,2")[0]
    assert not hasattr(single, "datasets") and len(single) >= 50


def test_spec_errors_name_the_problem(tmp_path):
    base = '[[datasets]]\nname = "web"\nprefix = "p"\n'
    cases = {
        base + "weight = 0.5\ncolour = 1\n": "unknown key 'colour'",
        '[[datasets]]\nname = "web"\nweight = 1\n': "missing key 'prefix'",
        base: "missing key 'weight'",
        base + "weight = 0\n": "'weight' must be positive",
        base + "weight = -1\n": "'weight' must be positive",
        base + 'weight = "a lot"\n': "'weight' must be a positive number",
        base + "weight = 1\nepochs = 2\n": "not both",
        base + "weight = 1\n" + base + "weight = 1\n": "appears twice",
        'blend = 3\n' + base + "weight = 1\n": "unknown top-level key 'blend'",
        'split = "1,2,3,4"\n' + base + "weight = 1\n": "'split'",
        '[[datasets]]\nname = "valid"\nprefix = "p"\nweight = 1\n': "reserved",
        "not toml = = \n": "not valid TOML",
        base + "epochs = 1e308\n": "at most 1,000,000 passes",  # was a NaN weight, then a conversion error
    }
    for text, message in cases.items():
        with pytest.raises(BlendSpecError, match=message):
            parse_toml_spec(text, "s.toml")
    with pytest.raises(BlendSpecError, match="must be positive"):
        parse_megatron_blend("0.5 a -1 b")
    with pytest.raises(BlendSpecError, match="not found"):
        load_blend_spec(tmp_path / "missing.toml")


def test_weights_too_large_to_sum_keep_their_shares(two_datasets, tmp_path):
    """Weights are shares: 1.5e308 and 1e308 sum to inf, which made every normalized weight nan (a blend of 0
    samples); they keep their ratio."""
    spec = parse_megatron_blend("1.5e308 a 1e308 b")
    assert [d.weight for d in spec.datasets] == pytest.approx([1.0, 2 / 3])
    text = "".join(f'[[datasets]]\nname = "{n}"\nprefix = "{p}"\nweight = 1e308\n' for n, p in (("x", "a"), ("y", "b")))
    assert [d.weight for d in parse_toml_spec(text).datasets] == [1.0, 1.0]


def test_demo_spec():
    """The demo's spec names the prefixes the demo writes; its split and weights are the demo's to tune."""
    spec = load_blend_spec(ROOT / "data_specs" / "demo.toml")
    assert parse_split(spec.split)[0] > 0
    assert [(d.name, d.prefix) for d in spec.datasets] == [("web", "out/demo/tokens/web"),
                                                          ("books", "out/demo/tokens/books")]
    assert all(d.weight > 0 for d in spec.datasets)
    m = parse_megatron_blend("30 a/web 70 b/web")
    assert [(d.name, d.prefix, d.weight) for d in m.datasets] == [("web", "a/web", 30.0), ("web_2", "b/web", 70.0)]


def _big_and_small(tmp_path, big: str):
    """A blend spec of a big dataset (``big``: its weight or epochs line) and a small one given 2 epochs."""
    make_dataset(tmp_path / "big", 400, 3)
    make_dataset(tmp_path / "small", 40, 4)
    return write_spec(tmp_path / "e.toml", f'''split = "100,0,0"
[[datasets]]
name = "big"
prefix = "{tmp_path}/big"
{big}
[[datasets]]
name = "small"
prefix = "{tmp_path}/small"
epochs = 2.0
''')


def test_epochs_weights_and_inspect(tmp_path, capsys):
    spec = _big_and_small(tmp_path, "weight = 1.0")
    rows, warnings = inspect_blend(spec, tokens=None)
    small = next(r for r in rows if r["dataset"] == "small")
    total = sum(r["train_tokens"] for r in rows)
    # 'small' is given 2 epochs of its tokens; the budget defaults to every train token once
    assert small["drawn"] == pytest.approx(2 * small["train_tokens"])
    assert small["weight"] == pytest.approx(2 * small["train_tokens"] / total)
    assert small["epochs"] == pytest.approx(2.0) and not warnings
    rows, warnings = inspect_blend(spec, tokens=total * 3, max_epochs=2.5)
    assert not any(w.startswith("small") for w in warnings)  # still 2 epochs: fixed by epochs, not by weight
    big = next(r for r in rows if r["dataset"] == "big")
    assert big["epochs"] == pytest.approx((3 * total - 2 * small["train_tokens"]) / big["train_tokens"])
    assert any(w.startswith("big would be repeated") for w in warnings)
    # the command line: the table, and a warning on stderr
    assert pretrain_main(["blend", "inspect", str(spec), "--tokens", str(total * 3), "--max-epochs", "2.5"]) == 0
    out = capsys.readouterr()
    assert "dataset" in out.out and "epochs" in out.out and "big" in out.out and "100.00%" in out.out
    assert "warning: big would be repeated" in out.err


def test_blend_build_command(two_datasets, tmp_path, capsys):
    out = tmp_path / "prebuilt"
    assert pretrain_main(["blend", "build", str(two_datasets), "--seq-len", "16", "--samples", "300",
                          "--seed", "7", "--out", str(out)]) == 0
    for name in ("web", "books"):
        for a in ("document_index", "sample_index", "shuffle_index"):
            assert (out / name / f"{a}.npy").is_file()
    di = np.load(out / "dataset_index.npy")
    ref = build_blend_splits(two_datasets, 16, (300, 0, 0), 7, None)[0]
    assert np.array_equal(di, ref.dataset_index)
    assert np.array_equal(np.load(out / "web" / "shuffle_index.npy"), ref.datasets[0].shuffle_index)
    # the trainer's call finds the prebuilt cache
    train = build_blend_splits(two_datasets, 16, (300, 0, 0), 7, out)[0]
    assert not train.dataset_index.flags.writeable  # loaded from the cache
    # bad input: a clear message and exit status 2
    bad = write_spec(tmp_path / "bad.toml", '[[datasets]]\nname = "x"\nprefix = "p"\nweight = -2\n')
    assert pretrain_main(["blend", "build", str(bad), "--seq-len", "16", "--samples", "10", "--out", str(out)]) == 2
    assert "'weight' must be positive" in capsys.readouterr().err
    assert pretrain_main(["blend", "inspect", str(tmp_path / "nothing")]) == 2


def test_a_blend_all_in_epochs_warns_when_the_budget_reads_them_otherwise(tmp_path, capsys):
    """Every dataset in epochs: the epochs set only the mix. A train budget other than the tokens they add up
    to reads every dataset more (or fewer) times than given: inspect and the build say so, with the figures."""
    spec = _big_and_small(tmp_path, "epochs = 1.0")
    rows, warnings = inspect_blend(spec, tokens=None)  # the default budget: the epochs as given
    assert not warnings and [r["epochs"] for r in rows] == pytest.approx([1.0, 2.0])
    want = sum(r["train_tokens"] * e for r, e in zip(rows, (1.0, 2.0)))
    assert inspect_blend(spec, tokens=want)[1] == []
    rows, warnings = inspect_blend(spec, tokens=3 * want)
    assert [r["epochs"] for r in rows] == pytest.approx([3.0, 6.0])
    said = [w for w in warnings if w.startswith("every dataset of the blend is given in epochs")]
    assert len(said) == 1 and "3.00x" in said[0] and "small 2 -> 6.00" in said[0] and f"{int(want):,}" in said[0]
    with pytest.warns(UserWarning, match="given in epochs"):
        build_blend_splits(spec, 16, (int(3 * want) // 16, 0, 0), 7, None)
