"""The command lines: every command's --help ends with examples; `curate run --address` without
`--executor ray` is refused; `train-quality` names the flag out of range; `generate` says a file is not a checkpoint
folder; `export-hf` never writes into the checkpoint folder."""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import re

import pytest

from curate.cli import main as curate_main
from pretrain.cli import main as pretrain_main

MAINS = {"curate": curate_main, "pretrain": pretrain_main}


def _children(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def command_names() -> list[str]:
    """`curate`, `pretrain` and every command and subcommand below them, from their argparse parsers."""
    names = []

    def walk(name, parser):
        names.append(name)
        for sub, child in _children(parser):
            walk(f"{name} {sub}", child)

    for prog in MAINS:
        names.append(prog)
        for cmd, (module, _) in importlib.import_module(f"{prog}.cli").COMMANDS.items():
            p = argparse.ArgumentParser(prog=f"{prog} {cmd}")
            importlib.import_module(module).add_arguments(p)
            walk(f"{prog} {cmd}", p)
    return names


def run(argv: list[str], prog: str = "curate") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = MAINS[prog](argv)
        except SystemExit as e:
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("name", command_names())
def test_every_help_ends_with_examples(name):
    prog, *words = name.split()
    rc, text, _ = run(words + ["--help"], prog)
    assert rc == 0
    lines = text.rstrip().splitlines()
    heads = [i for i, line in enumerate(lines) if re.match(r"examples?\b.*:$", line)]
    assert heads, f"`{name} --help` has no examples"
    tail = [line for line in lines[heads[-1] + 1:] if line.strip()]
    assert all(line.startswith("  ") for line in tail), f"`{name} --help` does not end with its examples:\n{tail}"
    assert any(re.match(rf"  {re.escape(name)}( |$)", line) for line in tail), \
        f"`{name} --help`: no example line starts with `{name}`"


def test_curate_run_refuses_address_without_ray(tmp_path):
    rc, out, err = run(["run", str(tmp_path / "p.toml"), "--address", "127.0.0.1:6379"])
    assert rc == 2 and out == ""
    assert err.strip() == "curate: error: --address is for --executor ray"


@pytest.mark.parametrize("flag, value, says", [
    ("--epochs", "0", "--epochs 0: must be from 1 to 2,147,483,647"),
    ("--threads", "0", "--threads 0: must be from 1 to 1,024"),
    ("--bucket", "0", "--bucket 0: must be from 1 to 2,147,483,647"),
    ("--max-docs", "-1", "--max-docs -1: must be >= 0"),
    ("--lr", "0", "--lr 0.0: give --lr a finite number > 0"),
])
def test_train_quality_names_the_flag_out_of_range(tmp_path, flag, value, says):
    rc, _, err = run(["train-quality", "--positive", str(tmp_path / "p.jsonl"), "--negative", str(tmp_path / "n.jsonl"),
                      "--output", str(tmp_path / "m.bin"), flag, value])
    assert rc == 2 and err.startswith(f"train-quality: {says}") and len(err.strip().splitlines()) == 1, err
    other = {"--epochs", "--threads", "--bucket", "--max-docs", "--dim", "--chunk-words", "--lr"} - {flag}
    assert not any(o in err for o in other), err


@pytest.mark.parametrize("argv", [
    ["generate", "--prompt", "The ", "--checkpoint"],
    ["report", "--out", "REPORT", "--curated", "C", "--logs", "L", "--checkpoint"],
])
def test_a_file_is_not_a_checkpoint_folder(tmp_path, argv):
    config = tmp_path / "train.toml"
    config.write_text("[train]\nsteps = 1\n")
    argv = [str(tmp_path / "report") if a == "REPORT" else a for a in argv]
    rc, _, err = run(argv + [str(config)], "pretrain")
    assert rc == 2 and f"{config} is a file, not a checkpoint folder" in err and "tokenizer" not in err, err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("given, out, force", [("", "", True), ("", "", False), ("", "hf", False), ("", "hf", True),
                                               ("", "a/b", True), ("step_10", "", True), ("step_10", "hf", False)])
def test_export_hf_refuses_the_checkpoint_folder_and_inside_it(tmp_path, given, out, force):
    ck = tmp_path / "checkpoints"
    (ck / "step_10").mkdir(parents=True)
    (ck / "latest").write_text("step_10\n")
    rc, _, err = run(["export-hf", str(ck / given), str(ck / out)] + (["--force"] if force else []), "pretrain")
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert "the checkpoint folder" in err and "outside it" in err, err
    assert sorted(p.name for p in ck.iterdir()) == ["latest", "step_10"]


def test_a_rerun_of_a_finished_run_says_there_was_nothing_to_do(tmp_path, capsys):
    """It printed the whole funnel and "done in 0.8s" as if it had worked; now one line says why it did not."""
    from curate.cli import main as curate_main

    (tmp_path / "in.jsonl").write_text("".join(f'{{"id": "d{i}", "text": "words of document {i}"}}\n'
                                               for i in range(5)))
    p = tmp_path / "p.toml"
    p.write_text(f'[pipeline]\nname = "again"\noutput = "{tmp_path / "out"}"\n'
                 f'[[sources]]\npath = "{tmp_path / "in.jsonl"}"\n[[stages]]\ntype = "exact_dedup"\n')
    assert curate_main(["run", str(p)]) == 0
    first = capsys.readouterr()
    assert "nothing to do" not in first.out + first.err
    assert curate_main(["run", str(p)]) == 0
    again = capsys.readouterr()
    assert "nothing to do:" in again.out + again.err


@pytest.mark.parametrize("argv, said", [
    (["pretrain", "tokenize", "--input", "x", "--tokenizer", "t.model", "--output-prefix", "o", "--part-bytes", "1M"],
     "--part-bytes is for a run of parts"),
    (["pretrain", "tokenize", "--input", "x", "--tokenizer", "t.model", "--output-prefix", "o", "--max-retries", "1"],
     "--max-retries is for a run of parts"),
    (["pretrain", "ablate", "pipelines/ablate_demo.toml", "--ray-cpus", "2"], "--ray-cpus needs --executor ray"),
    (["pretrain", "train", "--config", "pretrain/configs/tiny.toml", "--set", ".x=1"], "expected table.key=value"),
    (["pretrain", "train", "--config", "pretrain/configs/tiny.toml", "--set", "checkpoint.dir=2024-01-01"],
     "write it in quotes"),
])
def test_flags_that_would_be_ignored_or_misread_are_named(argv, said):
    """A flag a mode does not use was dropped without a word; a date or number where a path goes said only
    'expected a string'."""
    rc, out, err = run(argv[1:], argv[0])
    assert rc == 2 and said in err and "Traceback" not in err, err


def test_a_finished_command_ignores_ctrl_c_while_the_interpreter_ends(monkeypatch):
    """Ctrl-C in the 0.7 s after `curate run` printed "done" (the interpreter's teardown) made a finished run
    exit 130 with no message; a command called from Python (argv given, as here below) leaves SIGINT alone."""
    import signal

    from curate.cli import main as curate_main

    before = signal.getsignal(signal.SIGINT)
    try:
        assert curate_main(["stages", "exact_dedup"]) == 0
        assert signal.getsignal(signal.SIGINT) == before
        monkeypatch.setattr("sys.argv", ["curate", "stages", "exact_dedup"])
        assert curate_main() == 0  # the process's own command line
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
