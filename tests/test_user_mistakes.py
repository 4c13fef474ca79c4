"""Mistakes a user makes with files and flags, each answered in one line saying what to change (a hostile-user
probe found each one: a hang, a traceback, a silently different run, or a message that sent the user looking for
the wrong thing)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from curate.config import ConfigError, load_toml
from pretrain.cli import main as pretrain_main
from pretrain.config import check, finalize, load_config
from tests.distributed_helpers import tiny_config
from tests.test_poisoned_checkpoint import TRAIN

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "pretrain" / "configs" / "tiny.toml"


# ------------------------------------------------------------------------------------------- config files

def test_a_config_path_that_is_not_a_regular_file_is_named_as_such(tmp_path):
    """A folder, a named pipe (opening one waits for a writer: a hang), a device (/dev/zero never ends) or a link
    to nothing: each said for what it is, never opened; they all said "does not exist"."""
    fifo = tmp_path / "p.toml"
    os.mkfifo(fifo)
    dangling = tmp_path / "gone.toml"
    dangling.symlink_to(tmp_path / "nowhere.toml")
    for path, said in ((tmp_path, "a folder"), (fifo, "a named pipe"), (Path("/dev/zero"), "a character device"),
                       (dangling, "a link to nothing"), (tmp_path / "missing.toml", "does not exist")):
        with pytest.raises(ConfigError, match=said):
            load_toml(path, what="pipeline file")


def test_a_byte_order_mark_before_the_toml_is_read_past(tmp_path):
    p = tmp_path / "bom.toml"
    p.write_bytes(b"\xef\xbb\xbf" + TINY.read_bytes())
    assert load_config(p).model.hidden_size == load_config(TINY).model.hidden_size


def test_an_empty_set_value_is_refused_not_taken_as_off(capsys):
    """``--set checkpoint.dir=$CKPT`` with CKPT unset turned checkpoints off without a word (a lost run)."""
    assert pretrain_main(["train", "--config", str(TINY), "--set", "checkpoint.dir="]) == 2
    err = capsys.readouterr().err
    assert "no value after '='" in err and "Traceback" not in err
    assert load_config(TINY, ["checkpoint.dir=''"]).checkpoint.dir == ""  # written as '' it is meant


def test_a_metrics_file_that_is_a_named_pipe_is_refused_at_start(tmp_path):
    """Appending to log.dir/metrics.jsonl blocked the run before its first step, printing nothing."""
    os.mkfifo(tmp_path / "metrics.jsonl")
    cfg = tiny_config({"log.dir": str(tmp_path)})
    with pytest.raises(ConfigError, match="metrics.jsonl is not a regular file \\(a named pipe\\)"):
        check(cfg, 1)


def test_a_tokenizer_that_is_no_model_is_named_without_a_traceback(tmp_path):
    bad = tmp_path / "tok.model"
    bad.write_bytes(os.urandom(3000))
    cfg = tiny_config({"model.vocab_size": None, "data.tokenizer": str(bad)})
    check(cfg, 1)
    with pytest.raises(ConfigError, match="data.tokenizer = .*not a SentencePiece model"):
        finalize(cfg, 1)


def test_a_tokenizer_that_is_a_folder_is_not_called_missing(tmp_path, capsys):
    (tmp_path / "blend.toml").write_text('[[datasets]]\nname = "x"\nprefix = "x"\nweight = 1\n')
    assert pretrain_main(["train", "--config", str(TINY), "--set", f"data.tokenizer='{tmp_path}'",
                          "--set", f"data.blend='{tmp_path / 'blend.toml'}'", "--set", "log.dir=''",
                          "--set", "checkpoint.dir=''"]) == 2
    err = capsys.readouterr().err
    assert "is not a regular file (a folder)" in err and "make demo" not in err


# ------------------------------------------------------------------------------------------- resuming

@pytest.mark.parametrize("override", ["model.norm_eps=0.1", "model.rope_theta=500.0"])
def test_resuming_with_another_norm_eps_or_rope_base_is_refused(tmp_path, capsys, override):
    """The same weights compute another function: the run went on with a jump in its loss, as after damage."""
    ck = tmp_path / "ck"
    base = [*TRAIN, "--set", "model.position='rope'", "--set", f"checkpoint.dir='{ck}'", "--set", "checkpoint.interval=1"]
    assert pretrain_main([*base, "--set", "train.steps=1"]) == 0
    capsys.readouterr()
    assert pretrain_main([*base, "--set", "train.steps=2", "--set", override]) == 2
    err = capsys.readouterr().err
    assert f"has model.{override.split('=')[0].split('.')[1]} = " in err and "Traceback" not in err
    assert pretrain_main([*base, "--set", "train.steps=2"]) == 0  # unchanged: resumes


# ------------------------------------------------------------------------------------------- a full disk

def test_a_full_disk_while_writing_a_shard_names_the_shard(tmp_path, monkeypatch):
    """pyarrow says "Error writing bytes to file ... [errno 28]" and no file: the one-line message named none."""
    import errno

    import pyarrow as pa
    import pyarrow.feather as feather

    from curate import shards
    from curate.os_errors import machine_error

    def full(*args, **kwargs):
        raise OSError("Error writing bytes to file. Detail: [errno 28] No space left on device")

    monkeypatch.setattr(feather, "write_feather", full)
    with pytest.raises(OSError) as e:
        shards.write_shard(pa.table({"text": ["a"]}), tmp_path / "data" / "s.arrow")
    assert e.value.errno == errno.ENOSPC and machine_error(e.value).endswith(str(tmp_path / "data" / "s.arrow"))
    assert not list((tmp_path / "data").iterdir())  # nothing half-written left
