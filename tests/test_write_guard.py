"""No command writes over what it reads: an output that is an input, or lies inside an input folder, is refused
at start with the paths named, and the input is left as it was."""
import json
import os
from pathlib import Path

import pytest

from curate.cli import main as curate_main
from curate.write_guard import overwrite_problem
from pretrain.cli import main as pretrain_main


def _curated(root):
    """A folder that looks like a curation output to the guard (the guard runs before anything is read)."""
    cur = root / "curated"
    (cur / "data").mkdir(parents=True)
    (cur / "manifest.json").write_text('{"shards": [], "dropped": []}')
    (root / "tok.model").write_bytes(b"a tokenizer")
    (root / "tok.json").write_text('{"eod": 1}')
    return cur


def _untouched(root):
    assert (root / "curated" / "manifest.json").read_text() == '{"shards": [], "dropped": []}'
    assert (root / "tok.json").read_text() == '{"eod": 1}'
    assert sorted(p.name for p in (root / "curated").iterdir()) == ["data", "manifest.json"]


def test_the_guard_sees_through_links_and_dots(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.jsonl").write_text("x")
    (tmp_path / "alias").symlink_to(tmp_path / "in")
    assert "lies inside" in overwrite_problem([tmp_path / "alias" / "out.bin"], [tmp_path / "in"])
    assert "is an input" in overwrite_problem([tmp_path / "in" / ".." / "in" / "a.jsonl"], [tmp_path / "in" / "a.jsonl"])
    assert overwrite_problem([tmp_path / "in.bin", None, ""], [tmp_path / "in", None]) is None
    # a file read is not a folder: a path "inside" it is another name, not an overwrite
    assert overwrite_problem([tmp_path / "in" / "a.jsonl.bin"], [tmp_path / "in" / "a.jsonl"]) is None


@pytest.mark.parametrize("prefix, extra, message", [
    ("curated/manifest", [], "lies inside"),      # PREFIX.json was written over the curation's manifest.json
    ("tok", [], "is an input"),                   # ... and over the tokenizer's special ids
    ("curated", ["--parts"], "is an input"),      # the parts folder is the curation folder
    ("curated/data/x", ["--merge"], "lies inside"),
])
def test_tokenize_never_writes_over_its_input(tmp_path, capsys, prefix, extra, message):
    cur = _curated(tmp_path)
    rc = pretrain_main(["tokenize", "--input", str(cur), "--tokenizer", str(tmp_path / "tok.model"),
                        "--output-prefix", str(tmp_path / prefix), "--no-progress", *extra])
    err = capsys.readouterr().err
    assert rc == 2 and message in err and str(tmp_path / prefix) in err
    _untouched(tmp_path)


def test_tokenizer_train_never_writes_inside_its_input(tmp_path, capsys):
    cur = _curated(tmp_path)
    rc = pretrain_main(["tokenizer", "train", "--input", str(cur), "--vocab-size", "300",
                        "--output", str(cur / "manifest.model")])
    assert rc == 2 and "lies inside" in capsys.readouterr().err
    _untouched(tmp_path)


def test_eval_never_writes_over_a_task_file(tmp_path, capsys):
    task = tmp_path / "evals" / "prose.jsonl"
    task.parent.mkdir()
    task.write_text('{"text": "the original task file"}\n')
    # the lm-eval copy of task "prose" is evals/prose.jsonl: the task file itself
    rc = pretrain_main(["eval", "--task", f"bpb:{task}", "--write-lm-eval-tasks", str(tmp_path / "evals")])
    assert rc == 2 and "is an input" in capsys.readouterr().err
    rc = pretrain_main(["eval", "--task", f"bpb:{task}", "--checkpoint", str(tmp_path / "ckpt"), "--output", str(task)])
    assert rc == 2 and "is an input" in capsys.readouterr().err
    assert task.read_text() == '{"text": "the original task file"}\n'
    assert pretrain_main(["eval", "--task", f"bpb:{task}", "--write-lm-eval-tasks", str(tmp_path / "lm")]) == 0
    assert json.loads((tmp_path / "lm" / "prose.jsonl").read_text())["text"] == "the original task file"


def test_train_quality_and_extractor_train_never_write_over_their_input(tmp_path, capsys):
    cur = _curated(tmp_path)
    rc = curate_main(["train-quality", "--positive", str(cur), "--negative", str(cur),
                      "--output", str(cur / "data" / "q.bin")])
    assert rc == 2 and "lies inside" in capsys.readouterr().err
    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"url": "u", "main_content": "x"}\n')
    warc = tmp_path / "p.warc.gz"
    warc.write_bytes(b"")
    rc = curate_main(["extractor", "train", "--warc", str(warc), "--gold", str(gold), "--out", str(gold)])
    assert rc == 2 and "is an input" in capsys.readouterr().err
    assert gold.read_text() == '{"url": "u", "main_content": "x"}\n' and os.path.getsize(warc) == 0
    _untouched(tmp_path)


def test_ablate_never_writes_inside_a_curated_folder(tmp_path, capsys):
    cur = _curated(tmp_path)
    other = tmp_path / "other"
    (other / "data").mkdir(parents=True)
    (other / "manifest.json").write_text('{"shards": [], "dropped": []}')
    (tmp_path / "evals.jsonl").write_text('{"text": "held out"}\n')
    spec = tmp_path / "ab.toml"
    config = Path(__file__).resolve().parents[1] / "pretrain" / "configs" / "proxy-tiny.toml"
    spec.write_text(f'config = "{config}"\ntokens = 4096\nseeds = [1]\nbaseline = "b"\n'
                    f'[[variants]]\nname = "a"\ncurated = ["{cur}"]\n[[variants]]\nname = "b"\ncurated = ["{other}"]\n'
                    f'[[tasks]]\nname = "prose"\nkind = "bpb"\npath = "{tmp_path / "evals.jsonl"}"\n')
    rc = pretrain_main(["ablate", str(spec), "--output", str(cur / "ablate")])
    assert rc == 2 and "lies inside" in capsys.readouterr().err
    _untouched(tmp_path)
