"""Task names are checked when tasks are parsed, and lm-eval task YAML is written with every value quoted, so no
task name can add a YAML key (``process_results: !function ...`` runs a Python file when lm-eval loads tasks)."""
from __future__ import annotations

import json

import pytest
import yaml

from curate.config import ConfigError
from pretrain.cli import main as pretrain_main
from pretrain.eval.lm_eval_tasks import YAML, write_lm_eval_tasks
from pretrain.eval.tasks import TaskSpec, is_valid_task_name, parse_task_arg, task_specs_from_tables

INJECTION = "prose\nprocess_results: !function ..tmp.evil.run"
KEYS = {
    "bpb": {"task", "dataset_path", "dataset_kwargs", "test_split", "output_type", "doc_to_text", "doc_to_target",
            "metric_list"},
    "cloze": {"task", "dataset_path", "dataset_kwargs", "test_split", "output_type", "doc_to_text", "doc_to_target",
              "metric_list"},
    "choice": {"task", "dataset_path", "dataset_kwargs", "test_split", "output_type", "doc_to_text", "doc_to_choice",
               "doc_to_target", "target_delimiter", "metric_list"},
}


@pytest.fixture
def files(tmp_path):
    d = tmp_path / "in"
    d.mkdir()
    bpb = d / "prose.jsonl"
    bpb.write_text(json.dumps({"text": "An innocent looking passage of text."}) + "\n")
    cloze = d / "cloze.jsonl"
    cloze.write_text(json.dumps({"text": "the cat sat on the mat"}) + "\n")
    choice = d / "choice.jsonl"
    choice.write_text(json.dumps({"context": "Sky is", "choices": ["blue", "green"], "label": 0}) + "\n")
    return {"bpb": str(bpb), "cloze": str(cloze), "choice": str(choice)}


@pytest.mark.parametrize("name", ["prose", "a", "my-task_2.v1", "A" * 128, "0abc"])
def test_valid_names_are_kept(name):
    assert is_valid_task_name(name)


@pytest.mark.parametrize("name", ["", INJECTION, "prose\n", "my prose: v2 #1", "a/b", "../x", ".hidden", "-x", "_x",
                                  "a b", "a:b", "a#b", "A" * 129, "naïve", "x\ty", 'q"q', None, 3])
def test_unsafe_names_are_refused(name):
    assert not is_valid_task_name(name)


def test_injection_name_in_a_tasks_table_is_refused_in_one_line(files):
    with pytest.raises(ConfigError) as e:
        task_specs_from_tables([{"name": INJECTION, "kind": "bpb", "path": files["bpb"]}], "[[tasks]]")
    msg = str(e.value)
    assert repr(INJECTION) in msg and "\n" not in msg  # names the bad name (escaped), one line
    assert "letters, digits" in msg and "[A-Za-z0-9]" in msg  # and the allowed characters


def test_explicit_bad_names_on_the_command_line_are_refused(files):
    for name in ("my prose", "a#b", "x/y"):
        with pytest.raises(ConfigError, match="task name"):
            parse_task_arg(f"bpb:{files['bpb']}:{name}")
    assert parse_task_arg(f"bpb:{files['bpb']}:prose_v2").name == "prose_v2"


def test_names_from_file_names_are_sanitised(tmp_path):
    f = tmp_path / "my prose: v2 #1.jsonl"
    f.write_text(json.dumps({"text": "hello there world"}) + "\n")
    spec = parse_task_arg(f"bpb:{f}")  # the path exists, so every ':' is the path's
    assert spec.name == "my_prose__v2__1" and is_valid_task_name(spec.name)
    (t,) = task_specs_from_tables([{"kind": "bpb", "path": str(f)}], "[[tasks]]")
    assert t.name == spec.name  # the same name either way
    g = tmp_path / "prose.jsonl"
    g.write_text(f.read_text())
    assert parse_task_arg(f"bpb:{g}").name == "prose"  # an ordinary file name is unchanged
    h = tmp_path / "...jsonl"
    h.write_text(f.read_text())
    assert parse_task_arg(f"bpb:{h}").name == "task"


def test_command_refuses_the_injection_and_writes_nothing(tmp_path, files, capsys):
    tasks = tmp_path / "inj.toml"
    tasks.write_text(f'[[tasks]]\nname = {json.dumps(INJECTION)}\nkind = "bpb"\npath = {json.dumps(files["bpb"])}\n')
    out = tmp_path / "lm"
    assert pretrain_main(["eval", "--write-lm-eval-tasks", str(out), "--tasks", str(tasks)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "task name" in err and "Traceback" not in err
    assert not out.exists() or not any(out.iterdir())


def test_writer_refuses_a_bad_name_before_writing_anything(tmp_path, files):
    specs = [TaskSpec("ok", "bpb", files["bpb"]), TaskSpec(INJECTION, "bpb", files["bpb"])]
    out = tmp_path / "lm"
    with pytest.raises(ValueError, match="task name"):
        write_lm_eval_tasks(specs, out)
    assert not out.exists() or not any(out.iterdir())


def test_written_yaml_has_exactly_the_expected_keys(tmp_path, files):
    out = tmp_path / "out dir: #1\nx"  # a hostile directory name: the data path is quoted too
    specs = [TaskSpec("prose", "bpb", files["bpb"]), TaskSpec("cloze.v2", "cloze", files["cloze"]),
             TaskSpec("choice-1", "choice", files["choice"])]
    written = write_lm_eval_tasks(specs, out)
    assert [p.name for p in written] == ["prose.yaml", "cloze.v2.yaml", "choice-1.yaml"]
    for spec, path in zip(specs, written):
        text = path.read_text()
        assert "!function" not in text
        doc = yaml.safe_load(text)
        assert set(doc) == KEYS[spec.kind] == set(yaml.safe_load(YAML[spec.kind].format(name="n", data='"d"')))
        assert doc["task"] == spec.name
        data = doc["dataset_kwargs"]["data_files"]["test"]
        assert data == str((out / f"{spec.name}.jsonl").resolve())
        assert set(doc["dataset_kwargs"]) == {"data_files"} and set(doc["dataset_kwargs"]["data_files"]) == {"test"}
        assert (out / f"{spec.name}.jsonl").is_file()


def test_command_writes_sanitised_tasks_and_a_usable_command(tmp_path, capsys):
    f = tmp_path / "my prose: v2 #1.jsonl"
    f.write_text(json.dumps({"text": "An innocent looking passage of text."}) + "\n")
    out = tmp_path / "lm"
    assert pretrain_main(["eval", "--write-lm-eval-tasks", str(out), "--task", f"bpb:{f}"]) == 0
    printed = capsys.readouterr().out
    assert "--tasks my_prose__v2__1" in printed
    assert sorted(p.name for p in out.iterdir()) == ["my_prose__v2__1.jsonl", "my_prose__v2__1.yaml"]
    doc = yaml.safe_load((out / "my_prose__v2__1.yaml").read_text())
    assert doc["task"] == "my_prose__v2__1" and set(doc) == KEYS["bpb"]
