"""Hostile inputs to the token data: index caches whose values stay in range but lie, one shard or
dataset read twice under two names, a stale tokenizer sidecar, a .bin truncated under a reader, numbers too large
to be floats, two tokenize runs on one prefix, a full disk under `blend build`, and `blend build --out` into a
folder of other files."""
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from pretrain.cli import main as pretrain_main
from pretrain.data.blend import build_blend_splits
from pretrain.data.blend_spec import BlendSpecError, load_blend_spec, parse_toml_spec
from pretrain.data.gpt_dataset import build_gpt_dataset, parse_split
from pretrain.data.indexed import IndexedDataset, IndexedDatasetBuilder

import curated  # tests/data/pretrain/curated.py (pytest's pythonpath)
from tests.test_blend import make_dataset, two_datasets, write_spec  # noqa: F401 - the blend tests' fixture
from tests.test_gpt_dataset import write_parts

ROOT = Path(__file__).resolve().parents[1]


# --- 1. in-range tampering of an index cache -----------------------------------------------------------------

def _docs_of_valid(a):
    return a * 0 + 280  # web has 300 documents, split 90,8,2: 280 is a validation document


@pytest.mark.parametrize("order", ["stable", "megatron"])
@pytest.mark.parametrize("name, tamper, message", [
    ("web/shuffle_index.npy", lambda a: a * 0, "not a permutation"),
    ("web/shuffle_index.npy", lambda a: np.concatenate([a[:1], a[:-1]]), "not a permutation"),
    ("web/document_index.npy", _docs_of_valid, "outside the split"),
    ("web/document_index.npy", lambda a: np.concatenate([a[:1], a[:-1]]), "appears .* times"),
    ("web/sample_index.npy", lambda a: a * 0, "does not start"),
    ("dataset_sample_index.npy", lambda a: a * 0, "not taken in order"),
    ("dataset_index.npy", lambda a: a * 0, "not taken in order"),
])
def test_an_in_range_tampered_cache_is_refused_naming_it(two_datasets, tmp_path, order, name, tamper, message):
    cache = tmp_path / "cache"
    build_blend_splits(two_datasets, 32, (500, 40, 0), 1234, cache, order=order)
    arr = np.load(cache / name)
    np.save(cache / name, tamper(arr).astype(arr.dtype))  # same key in index.json: only the values lie
    with pytest.raises(ValueError, match=f"{message}.*cache .* is damaged"):
        build_blend_splits(two_datasets, 32, (500, 40, 0), 1234, cache, order=order)


def test_a_blend_cache_drawing_more_than_a_weight_gives_is_refused(two_datasets, tmp_path):
    cache = tmp_path / "cache"
    build_blend_splits(two_datasets, 32, (500, 40, 0), 1234, cache)
    # both arrays rewritten consistently (each dataset's samples still 0, 1, 2, ...): web (0.7) drawn 352 of 500
    which = np.array([0] * 352 + [1] * 148, dtype=np.int16)
    np.save(cache / "dataset_index.npy", which)
    np.save(cache / "dataset_sample_index.npy", np.concatenate([np.arange(352), np.arange(148)]).astype(np.int64))
    with pytest.raises(ValueError, match="dataset 0 drawn 352 times, more than its weight .*cache .* is damaged"):
        build_blend_splits(two_datasets, 32, (500, 40, 0), 1234, cache)


@pytest.mark.parametrize("order", ["stable", "megatron"])
@pytest.mark.parametrize("drop_last_partial", [True, False])
def test_honest_indices_pass_the_structure_checks(tmp_path, order, drop_last_partial):
    lengths = np.random.default_rng(1).integers(0, 40, 90)  # empty documents too
    with IndexedDatasetBuilder(tmp_path / "d", np.uint16) as b:
        for n in lengths:
            b.add_document(np.arange(n) % 500)
    ix = IndexedDataset(tmp_path / "d")
    for samples in (None, 3, 100, 700):
        for split_name in ("train", "valid"):
            ds = build_gpt_dataset(ix, "80,20,0", split_name, samples, 16, seed=3, drop_last_partial=drop_last_partial,
                                   order=order)
            assert len(ds) >= (samples or 1)


# --- 2. one shard or dataset read twice under two names ------------------------------------------------------

@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    root = tmp_path_factory.mktemp("round7")
    cur, tokenizer = curated.curated_and_tokenizer(root, 60, shards=3, batch_rows=16, vocab=400, max_bytes=200_000)
    return tokenizer, cur


def _list_again(cur: Path, out: Path, how: str) -> Path:
    shutil.copytree(cur, out)
    shard = out / "shards" / "part-00000.arrow"
    again = out / "shards" / "part-00003.arrow"
    if how == "hard link":
        os.link(shard, again)
    else:
        shutil.copyfile(shard, again)
    manifest = json.loads((out / "manifest.json").read_text())
    entry = dict(manifest["shards"][0], path="shards/part-00003.arrow")
    manifest["shards"].append(entry)
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


@pytest.mark.parametrize("how, said", [("hard link", "a hard link to the same file"), ("copy", "a byte-identical copy")])
def test_a_shard_listed_twice_by_hard_link_or_copy_is_refused(tok, tmp_path, how, said):
    from pretrain.data.tokenize import tokenize_curated
    from pretrain.data.tokenizer import sample_training_text

    tokenizer, cur = tok
    twice = _list_again(cur, tmp_path / "twice", how)
    with pytest.raises(ValueError, match=f"part-00003.arrow twice \\(also as shards/part-00000.arrow, {said}\\)"):
        tokenize_curated(twice, tokenizer.model_path, tmp_path / "out", progress=False)
    assert not (tmp_path / "out.bin").exists()
    with pytest.raises(ValueError, match="twice"):
        sample_training_text(twice, 10_000)


def test_two_folders_holding_the_same_shards_are_refused(tok, tmp_path):
    from pretrain.data.tokenizer import sample_training_text

    _, cur = tok
    copy = shutil.copytree(cur, tmp_path / "cur_copy")
    with pytest.raises(ValueError, match="part-00000.arrow of .*cur_copy is also listed as shards/part-00000.arrow "
                                         "of .*, a byte-identical copy"):
        sample_training_text([cur, copy], 10_000)


def test_a_blend_reading_one_dataset_twice_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_dataset(tmp_path / "tokens" / "web", 50, 1)
    shutil.copyfile("tokens/web.bin", "tokens/copy.bin")
    shutil.copyfile("tokens/web.idx", "tokens/copy.idx")
    for second, name, said in (("./tokens/web", "web_2", "is the same file as"),
                               ("tokens//web", "web_2", "is the same file as"),
                               ("tokens/copy", "copy", "holds the same bytes as")):
        spec = f"1 tokens/web 1 {second}"
        with pytest.raises(BlendSpecError, match=f"dataset '{name}' \\({second}.bin\\) {said} dataset 'web' "
                                                 "\\(tokens/web.bin\\)"):
            build_blend_splits(spec, 16, (50, 0, 0), 1, None)
        assert pretrain_main(["blend", "inspect", spec]) == 2


def test_hard_linked_or_copied_parts_are_refused(tmp_path):
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 30, 20)
    tokens = rng.integers(0, 500, int(lengths.sum())).astype(np.uint16)
    folder = tmp_path / "parts"
    write_parts(folder, np.concatenate([tokens, tokens]), np.concatenate([lengths, lengths]), [20], np.uint16)
    with pytest.raises(BlendSpecError, match="part-00001.bin\\) holds the same bytes as .*part-00000.bin"):
        build_blend_splits(f"1 {folder}", 16, (20, 0, 0), 1, None)
    (folder / "part-00001.bin").unlink()
    os.link(folder / "part-00000.bin", folder / "part-00001.bin")
    with pytest.raises(BlendSpecError, match="part-00001.bin\\) is the same file as .*part-00000.bin"):
        build_blend_splits(f"1 {folder}", 16, (20, 0, 0), 1, None)


def test_datasets_tokenized_from_the_same_shards_are_refused_in_a_blend(tok, tmp_path, capsys):
    """The same documents in other files: a --merge file and its parts folder, a one-file and a --parts run of one
    curated folder, a folder and a subset of it (156 documents read twice, silently)."""
    tokenizer, cur = tok
    run = ["tokenize", "--input", str(cur), "--tokenizer", tokenizer.model_path, "--no-progress"]
    assert pretrain_main([*run, "--output-prefix", str(tmp_path / "one")]) == 0
    assert pretrain_main([*run, "--output-prefix", str(tmp_path / "p"), "--parts", "--part-bytes", "20000",
                          "--merge"]) == 0
    sub = tmp_path / "sub"  # the curated folder's first shard alone
    manifest = json.loads((cur / "manifest.json").read_text())
    (sub / "shards").mkdir(parents=True)
    shutil.copyfile(cur / manifest["shards"][0]["path"], sub / manifest["shards"][0]["path"])
    (sub / "manifest.json").write_text(json.dumps({**manifest, "shards": manifest["shards"][:1]}))
    assert pretrain_main(["tokenize", "--input", str(sub), "--tokenizer", tokenizer.model_path, "--no-progress",
                          "--output-prefix", str(tmp_path / "sub_tokens")]) == 0
    capsys.readouterr()
    for a, b in ((tmp_path / "p", f"{tmp_path / 'p'}/"), (tmp_path / "one", f"{tmp_path / 'p'}/"),
                 (tmp_path / "one", tmp_path / "sub_tokens")):
        spec = f"1 {a} 1 {b}"
        assert pretrain_main(["blend", "inspect", spec]) == 2
        assert "would be read twice" in capsys.readouterr().err  # (the same shards, or the same bytes)
    assert pretrain_main(["blend", "inspect", f"1 {tmp_path / 'one'}"]) == 0  # one of them alone is fine


# --- 3. a stale or foreign tokenizer sidecar -----------------------------------------------------------------

def test_a_sidecar_written_for_another_model_is_refused(tok, tmp_path):
    from pretrain.data.tokenizer import load_tokenizer

    tokenizer, cur = tok
    model = tmp_path / "m.model"
    shutil.copyfile(tokenizer.model_path, model)
    meta = json.loads(Path(tokenizer.model_path).with_suffix(".json").read_text())
    (tmp_path / "m.json").write_text(json.dumps(dict(meta, eod_id=100, model_sha256="0" * 64)))
    with pytest.raises(ValueError, match="m.json was written for another model .*delete m.json"):
        load_tokenizer(model)
    assert pretrain_main(["tokenize", "--input", str(cur), "--tokenizer", str(model), "--output-prefix",
                          str(tmp_path / "out"), "--no-progress"]) == 2
    assert not (tmp_path / "out.bin").exists()
    # the sidecar of this very model, and a user's ids alone (a pretrained model's), still load
    (tmp_path / "m.json").write_text(json.dumps(meta))
    assert load_tokenizer(model).eod_id == meta["eod_id"]
    (tmp_path / "m.json").write_text(json.dumps({k: meta[k] for k in ("eod_id", "bos_id", "pad_id", "unk_id")}))
    assert load_tokenizer(model).eod_id == meta["eod_id"]


# --- 4. a .bin truncated while it is read --------------------------------------------------------------------

def test_a_bin_truncated_in_use_is_an_error_not_sigbus(tmp_path):
    make_dataset(tmp_path / "web", 200, 1)
    script = f"""
import os, sys
from pretrain.data.gpt_dataset import build_gpt_dataset
from pretrain.data.parts import open_indexed
ds = build_gpt_dataset(open_indexed({str(tmp_path / 'web')!r}), "100", "train", 50, 16, seed=1)
ds.get_batch(range(10))
os.truncate({str(tmp_path / 'web.bin')!r}, 0)
try:
    ds.get_batch(range(10, 20))
except Exception as e:
    print(type(e).__name__, e)
    sys.exit(3)
"""
    r = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, (r.returncode, r.stderr[-2000:])
    assert "web.bin shrank while in use" in r.stdout and "restore it and rerun" in r.stdout


def test_a_bin_rewritten_in_place_during_use_is_an_error(tmp_path):
    """The same size, other tokens: the run trained on a mix of old and new ones without a word."""
    import numpy as np

    from pretrain.data.gpt_dataset import build_gpt_dataset
    from pretrain.data.indexed import DataChangedError
    from pretrain.data.parts import open_indexed

    make_dataset(tmp_path / "web", 200, 1)
    ds = build_gpt_dataset(open_indexed(str(tmp_path / "web")), "100", "train", 50, 16, seed=1)
    ds.get_batch(np.arange(10))
    path = tmp_path / "web.bin"
    st = os.stat(path)
    with open(path, "r+b") as f:  # in place: same inode, same size
        f.write(b"\x01\x00" * 8)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # (a coarse clock may not have moved)
    with pytest.raises(DataChangedError, match="web.bin was written while in use"):
        ds.get_batch(np.arange(10, 20))


# --- 5. numbers too large, a spec not UTF-8, trailing bytes, --tokenizer a folder -----------------------------

@pytest.mark.parametrize("key", ["weight", "epochs"])
def test_a_weight_or_epochs_of_400_digits_is_refused_in_one_line(key):
    text = f'[[datasets]]\nname = "web"\nprefix = "tokens/web"\n{key} = 1{"0" * 400}\n'
    with pytest.raises(BlendSpecError, match=f"'{key}' is a number of 401 digits, too large"):
        parse_toml_spec(text, "b.toml")


def test_a_split_of_400_digit_numbers_is_refused_and_huge_shares_keep_their_ratio():
    big = "9" * 400
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="too large to be a number"):
            parse_split(f"{big},{big}")
        assert parse_split("1" + "0" * 307 + ",1" + "0" * 307) == pytest.approx([0.5, 0.5, 0.0])


def test_a_spec_that_is_not_utf8_is_named(tmp_path):
    spec = tmp_path / "b.toml"
    spec.write_bytes(b'[[datasets]]\nname = "web"\nprefix = "tokens/web\xff"\nweight = 1\n')
    with pytest.raises(BlendSpecError, match=f"blend spec {spec}: not UTF-8 text"):
        load_blend_spec(str(spec))


def test_trailing_bytes_after_an_idx_are_refused(tmp_path):
    make_dataset(tmp_path / "web", 20, 1)
    with open(tmp_path / "web.idx", "ab") as f:
        f.write(b"\0" * 8)
    with pytest.raises(ValueError, match="web.idx is damaged: .* 8 after"):
        IndexedDataset(tmp_path / "web")


def test_tokenize_with_a_folder_as_tokenizer_names_the_tokenizer(tmp_path, capsys):
    (tmp_path / "w").mkdir()
    rc = pretrain_main(["tokenize", "--input", str(tmp_path / "w"), "--tokenizer", str(tmp_path / "w"),
                        "--output-prefix", str(tmp_path / "w" / "tk2")])
    err = capsys.readouterr().err
    assert rc == 2 and f"--tokenizer {tmp_path / 'w'} is a folder, not a .model file" in err, err


# --- 6. two one-file tokenize runs on one prefix ------------------------------------------------------------

def test_a_one_file_tokenize_run_takes_the_lock_of_its_scratch_folder(tok, tmp_path):
    from curate.lock import LockError, OutputLock
    from pretrain.data.tokenize import tokenize_curated

    tokenizer, cur = tok
    prefix = tmp_path / "web"
    scratch = Path(f"{prefix}.parts")
    scratch.mkdir()
    with OutputLock(scratch):  # another run holds it
        with pytest.raises(LockError, match="web.parts is in use by another run"):
            tokenize_curated(cur, tokenizer.model_path, prefix, progress=False)
    assert not Path(f"{prefix}.bin").exists()
    tokenize_curated(cur, tokenizer.model_path, prefix, progress=False)
    assert Path(f"{prefix}.bin").exists() and not scratch.exists()
    tokenize_curated(cur, tokenizer.model_path, prefix, progress=False)  # up to date: leaves no scratch folder
    assert not scratch.exists()


# --- 7. a full disk under blend build -----------------------------------------------------------------------

def test_blend_build_on_a_full_disk_names_the_file(two_datasets, tmp_path, monkeypatch, capsys):
    def full(*args, **kwargs):
        raise OSError("46510 requested and 9184 written")  # what np.save says on a full disk

    monkeypatch.setattr(np, "save", full)
    out = tmp_path / "cache"
    rc = pretrain_main(["blend", "build", str(two_datasets), "--seq-len", "16", "--samples", "200", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "No space left on device" in err and "the disk is full" in err, err
    assert f"{out}/" in err and ".npy" in err and "rerun" in err and "requested" not in err


# --- 8. blend build --out into a folder of other files ----------------------------------------------------------

def test_blend_build_into_a_folder_of_other_files_needs_force(two_datasets, tmp_path, capsys):
    args = ["blend", "build", str(two_datasets), "--seq-len", "16", "--samples", "200"]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("notes\n")
    assert pretrain_main(args + ["--out", str(mine)]) == 2
    err = capsys.readouterr().err
    assert "notes.txt" in err and "--force" in err and sorted(os.listdir(mine)) == ["notes.txt"]
    # the token dataset's own folder (web.bin, web.idx beside the spec)
    assert pretrain_main(args + ["--out", str(tmp_path)]) == 2
    assert "books.bin" in capsys.readouterr().err
    assert pretrain_main(args + ["--out", str(mine), "--force"]) == 0
    assert (mine / "notes.txt").read_text() == "notes\n" and (mine / "index.json").is_file()
    # an index cache's own folder is rebuilt without --force
    cache = tmp_path / "cache"
    assert pretrain_main(args + ["--out", str(cache)]) == 0
    assert pretrain_main(args[:-1] + ["300", "--out", str(cache)]) == 0
