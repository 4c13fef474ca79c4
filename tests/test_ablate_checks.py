"""`pretrain ablate` checks every run's config at start, before any data is made: sizes of 0 or below (a
ZeroDivisionError traceback after tokenizing, or a loop for ever), a sequence of 1 token, a model vocabulary
smaller than the tokenizer's; a variant name too long for a folder; a blend variant made with another
tokenizer."""
from __future__ import annotations

import json
import re
import signal
from pathlib import Path

import pytest

from curate.config import ConfigError
from pretrain.ablate.ablation import run_ablation
from pretrain.ablate.spec import spec_from_dict
from tests.test_ablate import PROXY, curated_folder, sample_prose, spec_table


@pytest.fixture
def small_data(tmp_path):
    docs = sample_prose()
    ev = tmp_path / "ev.jsonl"
    ev.write_text(json.dumps({"text": "a held out text"}) + "\n")
    return {"prose": curated_folder(tmp_path / "a", docs[:6]), "shuffled": curated_folder(tmp_path / "b", docs[6:12]),
            "eval": ev, "tmp": tmp_path}


@pytest.fixture
def no_hang():
    """A loop for ever (train.global_batch = -8 did that) fails the test instead of hanging it."""
    def stop(*_):
        raise TimeoutError("did not return within 60 s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def _never(run):  # the trainer's command line: no run may start
    raise AssertionError(f"run {run.name} started")


BAD = [
    ("train.global_batch=0", "train.global_batch = 0: must be at least 1"),
    ("train.global_batch=-8", "train.global_batch = -8: must be at least 1"),
    ("data.seq_len=0", "data.seq_len = 0: must be at least 1"),
    ("data.seq_len=-128", "data.seq_len = -128: must be at least 1"),
    ("train.rampup_batch_size=[0,0,0]", "start and increment must be at least 1"),
    ("data.seq_len=1", "data.seq_len = 1: a blend's samples need at least 2 tokens"),
    ("model.vocab_size=100", "model.vocab_size = 100 is smaller than the 512 pieces"),
    ("model.padded_vocab_size=500", "padded vocabulary 500"),
]


@pytest.mark.parametrize("override, message", BAD)
def test_a_bad_run_config_fails_before_any_data_is_made(small_data, no_hang, override, message):
    out = small_data["tmp"] / "out"
    spec = spec_from_dict(spec_table(small_data, overrides=[override]), "spec.toml")
    with pytest.raises(ConfigError, match=message) as e:
        run_ablation(spec, out, log=lambda _m: None, command_for=_never)
    assert f"{PROXY} with the spec's overrides" in str(e.value)
    assert not (out / "data").exists() and not (out / "tokenizer.model").exists() and not (out / "spec.json").exists()


def test_the_config_file_itself_is_checked_too(small_data, no_hang):
    text = PROXY.read_text().replace("global_batch = 8", "global_batch = -8")
    assert text != PROXY.read_text()
    config = small_data["tmp"] / "proxy.toml"
    config.write_text(text)
    out = small_data["tmp"] / "out"
    spec = spec_from_dict(spec_table(small_data, config=str(config)), "spec.toml")
    with pytest.raises(ConfigError, match="train.global_batch = -8: must be at least 1"):
        run_ablation(spec, out, log=lambda _m: None, command_for=_never)
    assert not (out / "data").exists()


def test_an_eval_task_the_runs_cannot_use_fails_before_any_data_is_made(small_data):
    """Every run's own config (its [[eval.tasks]] included) is checked before tokenizing, not after."""
    out = small_data["tmp"] / "out"
    spec = spec_from_dict(spec_table(small_data, overrides=["parallel.pp=2", "model.max_seq_len=256",
                                                            "train.micro_batch=4"]), "spec.toml")
    with pytest.raises(ConfigError, match="needs model.max_seq_len = data.seq_len"):
        run_ablation(spec, out, log=lambda _m: None, command_for=_never)
    assert not (out / "data").exists()


@pytest.mark.parametrize("sizes", [["data.seq_len=0"], ["train.global_batch=-8"], ["train.global_batch=0"],
                                   ["train.rampup_batch_size=[0, 0, 0]", "train.global_batch=8"]])
def test_steps_for_refuses_sizes_below_one(no_hang, sizes):
    from pretrain.ablate.runs import steps_for
    from pretrain.config import load_config

    with pytest.raises(ConfigError, match="must be at least 1"):
        steps_for(load_config(PROXY, sizes), 10 ** 6)


def test_variant_names_are_at_most_64_characters(small_data):
    def table(name):
        return spec_table(small_data, baseline=name, variants=[{"name": name, "curated": [str(small_data["prose"])]},
                                                               {"name": "x", "curated": [str(small_data["shuffled"])]}])

    assert spec_from_dict(table("a" * 64)).baseline == "a" * 64
    for name in ("a" * 65, "a" * 300, "prose\n"):
        with pytest.raises(ConfigError, match="1 to 64 letters") as e:
            spec_from_dict(table(name), "spec.toml")
        assert len(str(e.value)) < 300


def test_a_blend_variant_made_with_another_tokenizer_fails_at_start(small_data, tmp_path):
    from curate.shards import sha256_file
    from pretrain.data.tokenizer import train_tokenizer

    tok = tmp_path / "tok.model"
    train_tokenizer([str(small_data["prose"])], 400, tok, threads=1)
    prefix = tmp_path / "tokens" / "other"
    prefix.parent.mkdir()
    Path(f"{prefix}.json").write_text(json.dumps({"tokenizer_sha256": "0" * 64}))
    blend = tmp_path / "blend.toml"
    blend.write_text(f'split = "100,0,0"\n[[datasets]]\nname = "other"\nprefix = "{prefix}"\nweight = 1\n')
    table = spec_table(small_data, tokenizer=str(tok),
                       variants=[{"name": "prose", "curated": [str(small_data["prose"])]},
                                 {"name": "shuffled", "blend": str(blend)}])
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match=f"dataset 'other' .* was tokenized with .*{re.escape(str(prefix))}.json.* "
                                          f"not with data.tokenizer {re.escape(str(tok))}"):
        run_ablation(spec_from_dict(table), out, log=lambda _m: None, command_for=_never)
    assert not (out / "data").exists()
    Path(f"{prefix}.json").write_text(json.dumps({"tokenizer_sha256": sha256_file(tok)}))  # the same one: passes
    from pretrain.train import check_blend_tokenizer

    check_blend_tokenizer(str(blend), str(tok), sha256_file(tok), say=pytest.fail)
