"""A tokenizer is the one a checkpoint or a dataset was made with, not merely one of the same size: two
tokenizers of 400 pieces trained on the same text (bpe, unigram) are told apart by their sha256. A checkpoint
records ``tokenizer_sha256``; eval, generate, export-hf and a resumed run refuse another tokenizer, and
`pretrain train` refuses a blend whose datasets were tokenized with another one. Checkpoints and datasets from
before (no record) are still used."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from curate.config import ConfigError
from curate.shards import sha256_file
from pretrain.cli import main as pretrain_main
from tests.distributed_helpers import config_dict, tiny_config, train_losses
from tests.test_ablate import curated_folder, sample_prose


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Two tokenizers of the same size, the same text tokenized with each, a blend of each, a held-out file."""
    from pretrain.data.tokenize import tokenize_curated
    from pretrain.data.tokenizer import load_tokenizer, train_tokenizer

    tmp = tmp_path_factory.mktemp("tokid")
    docs = sample_prose()
    folder = curated_folder(tmp / "curated", docs[:40])
    out = {"tmp": tmp}
    for kind in ("bpe", "unigram"):
        tok = tmp / f"{kind}.model"
        train_tokenizer([str(folder)], 400, tok, model_type=kind, threads=1)
        tokenize_curated(str(folder), str(tok), str(tmp / "tokens" / kind), progress=False, log=lambda _m: None)
        blend = tmp / f"{kind}.toml"
        blend.write_text(f'split = "90,10,0"\n[[datasets]]\nname = "{kind}"\nprefix = "{tmp / "tokens" / kind}"\n'
                         'weight = 1\n')
        out[kind] = {"tok": str(tok), "blend": str(blend)}
    assert load_tokenizer(out["bpe"]["tok"]).vocab_size == load_tokenizer(out["unigram"]["tok"]).vocab_size == 400
    assert sha256_file(out["bpe"]["tok"]) != sha256_file(out["unigram"]["tok"])
    (tmp / "held.jsonl").write_text("".join(json.dumps({"text": t[:300]}) + "\n" for t in docs[-4:]))
    return out


def run_config(made, tokens: str, tokenizer: str, ckpt: Path, steps: int = 1, **over) -> dict:
    raw = config_dict(tiny_config({"data.kind": "blend", "data.blend": made[tokens]["blend"], "data.tokenizer":
                                   made[tokenizer]["tok"], "train.steps": steps, "checkpoint.dir": str(ckpt),
                                   "data.cache_dir": str(ckpt.parent / f"cache-{tokens}"), **over}))
    del raw["model"]["vocab_size"]  # from the tokenizer
    return raw


def test_train_refuses_a_blend_tokenized_with_another_tokenizer(made, tmp_path):
    from pretrain.config import from_dict
    from pretrain.train import check_tokenizer

    raw = run_config(made, "unigram", "bpe", tmp_path / "ck")
    with pytest.raises(ConfigError, match=r"dataset 'unigram' .* was tokenized with .*unigram\.model.*, not with "
                                          r"data.tokenizer .*bpe\.model"):
        train_losses(raw)
    assert not (tmp_path / "ck").exists()  # stopped at start
    ok = from_dict(run_config(made, "bpe", "bpe", tmp_path / "ck"))
    assert check_tokenizer(ok) == sha256_file(made["bpe"]["tok"])


def test_records_of_a_dataset_tell_its_tokenizer(made, tmp_path):
    """``tokenizer_sha256`` of PREFIX.json or of PREFIX/job.json (--parts, --merge) is taken first; a dataset that
    records nothing (or a path no longer there) gets a note and is used."""
    from pretrain.train import check_blend_tokenizer

    tok = made["bpe"]["tok"]
    sha, other = sha256_file(tok), sha256_file(made["unigram"]["tok"])
    blend = tmp_path / "blend.toml"
    blend.write_text(f'split = "100,0,0"\n[[datasets]]\nname = "d"\nprefix = "{tmp_path / "d"}"\nweight = 1\n')
    notes = []
    check_blend_tokenizer(str(blend), tok, sha, notes.append)
    assert len(notes) == 1 and "dataset(s) d is not recorded" in notes[0]
    (tmp_path / "d.json").write_text(json.dumps({"tokenizer": str(tmp_path / "gone.model")}))
    check_blend_tokenizer(str(blend), tok, sha, notes.append)
    assert len(notes) == 2
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "job.json").write_text(json.dumps({"tokenizer_sha256": other}))
    with pytest.raises(ConfigError, match=r"d/job.json records \(sha256 " + other[:12]):
        check_blend_tokenizer(str(blend), tok, sha, pytest.fail)
    (tmp_path / "d.json").write_text(json.dumps({"tokenizer_sha256": sha}))  # PREFIX.json's own record first
    check_blend_tokenizer(str(blend), tok, sha, pytest.fail)


def test_a_model_vocabulary_smaller_than_the_tokenizer_fails_at_start(made, tmp_path):
    raw = run_config(made, "bpe", "bpe", tmp_path / "ck")
    raw["model"]["vocab_size"] = 300
    with pytest.raises(ConfigError, match="model.vocab_size = 300 is smaller than the 400 pieces of the tokenizer"):
        train_losses(raw)
    assert not (tmp_path / "ck").exists()


@pytest.fixture(scope="module")
def checkpoint(made):
    ck = made["tmp"] / "ck"
    train_losses(run_config(made, "bpe", "bpe", ck))
    return ck


def test_the_checkpoint_records_its_tokenizer_and_others_are_refused(made, checkpoint, tmp_path, capsys):
    from pretrain.generate import resolve_tokenizer_path

    meta = json.loads((checkpoint / "step_00000001" / "meta.json").read_text())
    assert meta["tokenizer_sha256"] == sha256_file(made["bpe"]["tok"])
    good, bad = made["bpe"]["tok"], made["unigram"]["tok"]
    assert resolve_tokenizer_path(checkpoint) == good
    assert resolve_tokenizer_path(checkpoint, good) == good
    with pytest.raises(ValueError, match=f"tokenizer {bad} .* is not the one .* was trained with .*{good}"):
        resolve_tokenizer_path(checkpoint, bad)
    held = made["tmp"] / "held.jsonl"
    for argv in (["eval", "--checkpoint", str(checkpoint), "--task", f"bpb:{held}", "--quiet", "--tokenizer", bad],
                 ["generate", "--checkpoint", str(checkpoint), "--prompt", "The", "--tokenizer", bad],
                 ["export-hf", str(checkpoint), str(tmp_path / "hf"), "--tokenizer", bad]):
        assert pretrain_main(argv) == 2, argv
        err = capsys.readouterr().err
        assert f"tokenizer {bad}" in err and "is not the one" in err and good in err, (argv, err)
    assert not (tmp_path / "hf").exists()
    assert pretrain_main(["eval", "--checkpoint", str(checkpoint), "--task", f"bpb:{held}", "--quiet"]) == 0


def test_a_resumed_run_refuses_another_tokenizer(made, checkpoint, tmp_path):
    import shutil

    ck = tmp_path / "ck"
    shutil.copytree(checkpoint, ck)
    with pytest.raises(ConfigError, match="is not the one .* was trained with.*set data.tokenizer to that one"):
        train_losses(run_config(made, "unigram", "unigram", ck, steps=2))


def test_a_checkpoint_from_before_the_record_is_still_used(made, checkpoint, tmp_path):
    import shutil

    from pretrain.checkpoint.manifest import checkpoint_files, digests, write_manifest
    from pretrain.generate import resolve_tokenizer_path

    ck = tmp_path / "old"
    shutil.copytree(checkpoint, ck)
    d = ck / "step_00000001"
    meta = json.loads((d / "meta.json").read_text())
    del meta["tokenizer_sha256"]
    (d / "meta.json").write_text(json.dumps(meta))
    write_manifest(d, digests(d, checkpoint_files(d)))
    assert resolve_tokenizer_path(ck, made["unigram"]["tok"]) == made["unigram"]["tok"]  # unknown: not refused
    (d / "meta.json").write_text(json.dumps({**meta, "tokenizer_sha256": "not a sha"}))
    with pytest.raises(ValueError, match="tokenizer_sha256 = 'not a sha' is not a sha256"):
        resolve_tokenizer_path(d, made["bpe"]["tok"])
