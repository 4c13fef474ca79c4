"""What `pretrain eval` (and `pretrain train`, `pretrain generate`) check at start, before a checkpoint is read or
anything is evaluated (a hostile probe's findings):

- ``--output`` (and ``--write-lm-eval-tasks``) in a folder where no file can be made (read-only, /proc) was found
  only when the results were written, after the whole evaluation (or as a FileNotFoundError traceback);
- ``--device cuda`` without CUDA was a traceback from inside torch (eval: ``_cuda_setDevice``; generate: "Torch not
  compiled with CUDA enabled");
- a stale ``WORLD_SIZE`` without torchrun was a ``PeersLostError`` traceback blaming a lost node, ``RANK=abc`` a
  ValueError traceback (train) or an "invalid literal for int()" naming no variable (eval);
- a ``--task KIND:PATH:NAME`` of 300 characters was "File name too long" (200 got the task-name rule);
- task names differing only in case (``Ok`` / ``ok``) were accepted: ``Ok.yaml`` and ``ok.yaml`` are one file on
  a case-insensitive file system;
- a bpb ``stride`` at or above the model's window silently gave the stride-0 figure.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from curate.config import ConfigError
from pretrain.cli import main as pretrain_main

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "pretrain" / "configs" / "tiny.toml"
SYNTH = ["--set", "data.kind=synthetic", "--set", "model.vocab_size=256"]
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture
def choice_file(tmp_path):
    f = tmp_path / "choice.jsonl"
    f.write_text(json.dumps({"context": "The cat sat on", "choices": ["the mat", "a dog"], "label": 0}) + "\n")
    return str(f)


@pytest.fixture
def no_torchrun_env(monkeypatch):
    for var in TORCHRUN_VARS:
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def _eval(args, capsys) -> tuple[int, str]:
    code = pretrain_main(["eval", *args])
    return code, capsys.readouterr().err


# ------------------------------------------------------------------------------------- --output

@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_output_in_proc_is_refused_before_the_checkpoint_is_read(tmp_path, choice_file, capsys):
    code, err = _eval(["--checkpoint", str(tmp_path / "no_checkpoint"), "--task", f"choice:{choice_file}",
                       "--output", "/proc/x.json", "--device", "cpu"], capsys)
    assert code == 2 and "Traceback" not in err
    assert "--output /proc/x.json: cannot write in /proc" in err and "no checkpoint" not in err


def _readonly_eval(folder: Path, choice_file: str, option: list[str]) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pretrain", "eval", "--checkpoint", str(folder / "no_checkpoint"), "--task",
           f"choice:{choice_file}", "--device", "cpu", *option]
    if os.geteuid() == 0:  # root writes through a mode of 555: drop the capability that lets it
        if not shutil.which("setpriv"):
            pytest.skip("root without setpriv: a read-only folder is writable")
        cmd = ["setpriv", "--inh-caps=-all", "--bounding-set", "-dac_override,-dac_read_search,-fowner", *cmd]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("option", ["--output", "--write-lm-eval-tasks"])
def test_a_read_only_output_folder_is_refused_at_start(tmp_path, choice_file, option):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    target = ro / ("x.json" if option == "--output" else "tasks")
    try:
        out = _readonly_eval(tmp_path, choice_file, [option, str(target)])
    finally:
        ro.chmod(0o755)
    if "Operation not permitted" in out.stderr and "setpriv" in out.stderr:
        pytest.skip("setpriv cannot drop capabilities here")
    assert out.returncode == 2, out.stderr
    assert f"{option} {target}: cannot write in {ro} (Permission denied)" in out.stderr
    assert "Traceback" not in out.stderr and not list(ro.iterdir())


def test_missing_output_folders_are_not_made_at_start_but_are_no_error(tmp_path, choice_file, capsys):
    target = tmp_path / "new" / "sub" / "x.json"  # made when the results are written, as other commands do
    code, err = _eval(["--checkpoint", str(tmp_path / "no_checkpoint"), "--task", f"choice:{choice_file}",
                       "--output", str(target), "--device", "cpu"], capsys)
    assert code == 2 and "no checkpoint" in err and "--output" not in err
    assert not (tmp_path / "new").exists()


# ------------------------------------------------------------------------------------- --device cuda

@pytest.mark.parametrize("command", ["eval", "generate"])
def test_device_cuda_without_cuda_is_one_line(tmp_path, choice_file, monkeypatch, no_torchrun_env, capsys, command):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    ckpt = str(tmp_path / "no_checkpoint")
    args = (["eval", "--checkpoint", ckpt, "--task", f"choice:{choice_file}"] if command == "eval" else
            ["generate", "--checkpoint", ckpt, "--prompt", "The "])
    assert pretrain_main([*args, "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "--device cuda but CUDA is not available" in err and "--device cpu" in err and "Traceback" not in err


def test_cuda_problem_names_the_setting_and_the_cause(monkeypatch):
    from pretrain.parallel.mesh import cuda_problem

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    said = cuda_problem("train.device = 'cuda'")
    assert said.startswith("train.device = 'cuda' but CUDA is not available: ")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert cuda_problem("--device cuda", 1) is None
    assert "local rank 2 but 2 CUDA device(s)" in cuda_problem("--device cuda", 2)


# ------------------------------------------------------------------------------------- torchrun's variables

BAD_ENVS = [
    ({"WORLD_SIZE": "2"}, "WORLD_SIZE='2' is set but RANK is not", "unset WORLD_SIZE"),
    ({"RANK": "abc"}, "RANK='abc' is not a whole number", "unset RANK"),
    ({"RANK": "1"}, "RANK='1' is not below WORLD_SIZE=1", "unset RANK"),
    ({"WORLD_SIZE": "0"}, "WORLD_SIZE='0' is not a number of processes", "unset WORLD_SIZE"),
    ({"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "x"}, "LOCAL_RANK='x' is not a whole number", "unset LOCAL_RANK"),
    ({"WORLD_SIZE": "2", "RANK": "0", "MASTER_PORT": "70000", "MASTER_ADDR": "h"}, "MASTER_PORT='70000' is not a port",
     "unset MASTER_PORT"),
    ({"WORLD_SIZE": "2", "RANK": "0", "LOCAL_WORLD_SIZE": "3"}, "LOCAL_WORLD_SIZE='3' is not 1 .. WORLD_SIZE=2",
     "unset LOCAL_WORLD_SIZE"),
]


@pytest.mark.parametrize("env,said,fix", BAD_ENVS)
def test_check_launch_env_names_the_variable_and_what_to_do(no_torchrun_env, env, said, fix):
    from pretrain.parallel.mesh import LaunchEnvError, check_launch_env, env_world

    for k, v in env.items():
        no_torchrun_env.setenv(k, v)
    for check in (check_launch_env, env_world):
        with pytest.raises(LaunchEnvError) as e:
            check()
        assert said in str(e.value) and fix in str(e.value) and "torchrun" in str(e.value)
        assert isinstance(e.value, ConfigError)


def test_check_launch_env_accepts_a_plain_process_and_torchruns_variables(no_torchrun_env):
    from pretrain.parallel.mesh import LaunchEnvError, check_launch_env

    assert check_launch_env(need_store=True) == (0, 0, 1)
    env = dict(RANK="3", LOCAL_RANK="1", WORLD_SIZE="4", LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
               MASTER_PORT="29500")
    for k, v in env.items():
        no_torchrun_env.setenv(k, v)
    assert check_launch_env(need_store=True) == (3, 1, 4)
    no_torchrun_env.delenv("MASTER_ADDR")
    assert check_launch_env() == (3, 1, 4)  # (the store is needed only to join the process group)
    with pytest.raises(LaunchEnvError, match="MASTER_ADDR is not"):
        check_launch_env(need_store=True)


@pytest.mark.parametrize("env,said", [({"WORLD_SIZE": "2"}, "WORLD_SIZE='2' is set but RANK is not"),
                                      ({"RANK": "abc"}, "RANK='abc' is not a whole number")])
def test_train_and_eval_say_a_stale_torchrun_variable_in_one_line(tmp_path, choice_file, no_torchrun_env, capsys,
                                                                   env, said):
    for k, v in env.items():
        no_torchrun_env.setenv(k, v)
    code = pretrain_main(["train", "--config", str(TINY), *SYNTH, "--set", f"checkpoint.dir={tmp_path}/ck",
                          "--set", f"log.dir={tmp_path}/lg"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("pretrain train: ") and said in err and "Traceback" not in err
    assert not (tmp_path / "ck").exists()
    code, err = _eval(["--checkpoint", str(tmp_path / "no_checkpoint"), "--task", f"choice:{choice_file}",
                       "--device", "cpu"], capsys)
    assert code == 2 and said in err and "torchrun" in err


# ------------------------------------------------------------------------------------- task names

def test_a_300_character_task_name_gets_the_name_rule(choice_file, capsys):
    for n in (200, 300, 5000):
        code, err = _eval(["--task", f"choice:{choice_file}:{'x' * n}", "--write-lm-eval-tasks", "unused"], capsys)
        assert code == 2 and "a task name is 1-128 characters" in err and "too long" not in err, n


@pytest.mark.parametrize("how", ["--task", "--tasks"])
def test_names_differing_only_in_case_are_refused_naming_both(tmp_path, choice_file, capsys, how):
    out = tmp_path / "lm"
    if how == "--task":
        args = ["--task", f"choice:{choice_file}:Ok", "--task", f"choice:{choice_file}:ok"]
    else:
        toml = tmp_path / "tasks.toml"
        toml.write_text("".join(f'[[tasks]]\nkind = "choice"\nname = "{n}"\npath = "{choice_file}"\n'
                                for n in ("Ok", "ok")))
        args = ["--tasks", str(toml)]
    code, err = _eval([*args, "--write-lm-eval-tasks", str(out)], capsys)
    assert code == 2 and "'Ok' and 'ok' differ only in case" in err and "case-insensitive" in err
    assert not out.exists()


def test_names_differing_only_in_case_are_refused_in_a_training_config(tmp_path, choice_file):
    from pretrain.eval.tasks import task_specs_from_tables

    tables = [{"kind": "choice", "name": "Prose", "path": choice_file},
              {"kind": "choice", "name": "prose", "path": choice_file}]
    with pytest.raises(ConfigError, match="'Prose' and 'prose' differ only in case"):
        task_specs_from_tables(tables, "[[eval.tasks]]")


# ------------------------------------------------------------------------------------- bpb stride

def _chars(text: str) -> list[int]:
    return [3 + ord(c) % 200 for c in text]


@pytest.mark.parametrize("stride", [64, 65, 100_000])
def test_a_stride_at_or_above_the_window_is_refused_saying_the_range(tmp_path, stride):
    from pretrain.eval.requests import prepare_task
    from pretrain.eval.tasks import TaskSpec

    f = tmp_path / "p.jsonl"
    f.write_text(json.dumps({"text": "a long enough document " * 20}) + "\n")
    with pytest.raises(ConfigError) as e:
        prepare_task(TaskSpec("p", "bpb", str(f), stride=stride), _chars, 1, window=64)
    assert f"stride = {stride} is not below the model's window of 64 tokens" in str(e.value)
    assert "1 .. 63" in str(e.value) and "or 0" in str(e.value)
    for ok in (0, 1, 32, 63):
        items, reqs, _ = prepare_task(TaskSpec("p", "bpb", str(f), stride=ok), _chars, 1, window=64)
        assert len(items.items) == 1 and len(reqs) >= 1


def test_train_device_cuda_without_cuda_says_why_in_one_line(monkeypatch):
    """`pretrain train`'s train.device goes through the same check as --device: the cause is named."""
    from curate.config import ConfigError
    from pretrain.config import load_config
    from pretrain.train import pick_device as train_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cfg = load_config(None, ["train.device=cuda"])
    with pytest.raises(ConfigError, match=r"train.device = 'cuda' but CUDA is not available: .*set train.device"):
        train_device(cfg, 0)


def test_a_training_configs_bpb_stride_past_the_window_fails_the_config_check(tmp_path):
    """[[eval.tasks]] of a training config: the stride is checked with the rest of the config, before any process
    group or data, against the model's window (model.max_seq_len, else data.seq_len)."""
    from pretrain.config import check, load_config

    f = tmp_path / "p.jsonl"
    f.write_text(json.dumps({"text": "a document"}) + "\n")
    tok = tmp_path / "tok.model"
    tok.write_bytes(b"x")
    cfg = load_config(None, ["data.kind=synthetic", "data.seq_len=64", f"data.tokenizer={tok}", "train.global_batch=1",
                             "train.micro_batch=1"])
    cfg.eval.tasks = [{"name": "p", "kind": "bpb", "path": str(f), "stride": 64}]
    with pytest.raises(ConfigError, match=r"\[\[eval.tasks\]\] 'p': stride = 64 is not below the model's window of 64"):
        check(cfg, 1)
    cfg.eval.tasks[0]["stride"] = 63
    check(cfg, 1)
